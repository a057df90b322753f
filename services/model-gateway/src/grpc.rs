//! Thin gRPC handlers for the model gateway.

use crate::model::*;
use crate::pricing::CATALOG;
use crate::service::ModelGatewayService;
use checkfu_core::page::PageRequest;
use checkfu_core::time::rfc3339;
use checkfu_core::{Code, Error, Result};
use checkfu_proto::modelgateway::v1 as pb;
use checkfu_proto::modelgateway::v1::model_gateway_service_server::ModelGatewayService as Rpc;
use std::pin::Pin;
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

pub struct ModelGatewayGrpc {
    pub svc: ModelGatewayService,
    /// A model call is made only for a Run whose lease its token names.
    pub tokens: checkfu_proto::token::Verifier,
}

fn profile(p: RoutingProfile) -> pb::RoutingProfile {
    pb::RoutingProfile {
        id: p.id.into(),
        environment_id: p.environment_id.into(),
        name: p.name,
        candidates: p
            .candidates
            .iter()
            .map(|c| pb::Candidate {
                provider: c.provider.as_str().into(),
                model: c.model.clone(),
                effort: c.effort.as_str().into(),
                connection_id: c.connection_id.clone().unwrap_or_default(),
                endpoint: c.endpoint.clone().unwrap_or_default(),
            })
            .collect(),
        created_at: rfc3339(p.created_ms),
    }
}

fn qualification(q: crate::qualifications::Qualification) -> pb::EvaluatorQualification {
    pb::EvaluatorQualification {
        status: q.status().into(),
        id: q.id.into(),
        provider: q.provider.as_str().into(),
        model: q.model,
        purpose: q.purpose.as_str().into(),
        evidence: q.evidence,
        reviewed_at: rfc3339(q.reviewed_ms),
        expires_at: rfc3339(q.expires_ms),
        created_by: q.created_by,
        created_at: rfc3339(q.created_ms),
        revoked_at: if q.revoked_ms > 0 { rfc3339(q.revoked_ms) } else { String::new() },
    }
}

fn block_from_pb(b: pb::ContentBlock) -> Result<Block> {
    use pb::content_block::Block as B;
    Ok(match b.block {
        Some(B::Text(t)) => Block::Text(t),
        Some(B::ToolUse(t)) => Block::ToolUse { id: t.id, name: t.name, input: serde_json::from_str(&t.input_json)? },
        Some(B::ToolResult(r)) => Block::ToolResult { tool_use_id: r.tool_use_id, content: r.content, is_error: r.is_error },
        Some(B::File(f)) => Block::File(FileRef {
            file_id: f.file_id,
            filename: f.filename,
            media_type: f.media_type,
            path: f.path,
            title: f.title,
            text: f.text,
            data: f.data,
        }),
        None => return Err(Error::invalid("empty content block")),
    })
}

pub fn block_to_pb(b: &Block) -> pb::ContentBlock {
    use pb::content_block::Block as B;
    pb::ContentBlock {
        block: Some(match b {
            Block::Text(t) => B::Text(t.clone()),
            Block::ToolUse { id, name, input } => {
                B::ToolUse(pb::ToolUse { id: id.clone(), name: name.clone(), input_json: input.to_string() })
            }
            Block::ToolResult { tool_use_id, content, is_error } => {
                B::ToolResult(pb::ToolResult { tool_use_id: tool_use_id.clone(), content: content.clone(), is_error: *is_error })
            }
            Block::File(f) => B::File(pb::FileRef {
                file_id: f.file_id.clone(),
                filename: f.filename.clone(),
                media_type: f.media_type.clone(),
                path: f.path.clone(),
                title: f.title.clone(),
                text: f.text.clone(),
                data: f.data.clone(),
            }),
        }),
    }
}

/// A report output's acceptance: the typed one, else a 0.1.0 caller's
/// JSON text; none when neither says.
fn acceptance(typed: Option<pb::Acceptance>, json: &str) -> Option<crate::tasks::grade::Acceptance> {
    use pb::report_value::Value as V;
    use serde_json::Value;
    let Some(a) = typed else {
        return crate::tasks::grade::Acceptance::from_json(&serde_json::from_str(json).unwrap_or(Value::Null));
    };
    let scalar = |v: pb::ReportValue| match v.value {
        Some(V::Text(t)) => Value::from(t),
        Some(V::Integer(i)) => Value::from(i),
        Some(V::Unsigned(u)) => Value::from(u),
        Some(V::Number(n)) => Value::from(n),
        Some(V::Boolean(b)) => Value::from(b),
        None => Value::Null,
    };
    Some(crate::tasks::grade::Acceptance {
        values: (!a.values.is_empty()).then(|| a.values.into_iter().map(scalar).collect()),
        min: a.min,
        max: a.max,
    })
}

fn request_from_pb(r: pb::GenerateRequest) -> Result<ModelRequest> {
    let messages = r
        .messages
        .into_iter()
        .map(|m| {
            let role = match m.role.as_str() {
                "user" => Role::User,
                "assistant" => Role::Assistant,
                other => return Err(Error::invalid_field("messages.role", format!("unknown role {other:?}"))),
            };
            let content = m.content.into_iter().map(block_from_pb).collect::<Result<_>>()?;
            Ok(Message { role, content })
        })
        .collect::<Result<_>>()?;
    let tools = r
        .tools
        .into_iter()
        .map(|t| {
            let input_schema = if t.input_schema_json.is_empty() {
                serde_json::json!({"type": "object"})
            } else {
                serde_json::from_str(&t.input_schema_json)?
            };
            Ok(ToolSpec { name: t.name, description: t.description, input_schema })
        })
        .collect::<Result<_>>()?;
    Ok(ModelRequest { system: r.system, messages, tools })
}

type ChunkStream = Pin<Box<dyn Stream<Item = Result<pb::GenerateChunk, Status>> + Send>>;

#[tonic::async_trait]
impl Rpc for ModelGatewayGrpc {
    async fn create_routing_profile(&self, r: Request<pb::CreateRoutingProfileRequest>) -> Result<Response<pb::RoutingProfile>, Status> {
        let r = r.into_inner();
        let candidates: Vec<StoredCandidate> = r
            .candidates
            .into_iter()
            .map(|c| StoredCandidate {
                provider: c.provider,
                model: c.model,
                effort: c.effort,
                connection_id: Some(c.connection_id),
                endpoint: Some(c.endpoint),
                legacy_base_url: None,
            })
            .collect();
        let p = self.svc.create_profile(&r.environment_id, &r.name, &candidates).await?;
        Ok(Response::new(profile(p)))
    }

    async fn list_endpoints(&self, _: Request<pb::ListEndpointsRequest>) -> Result<Response<pb::ListEndpointsResponse>, Status> {
        let data = self
            .svc
            .endpoints()
            .list()
            .map(|e| pb::ModelEndpoint {
                name: e.name.clone(),
                provider: e.provider.as_str().into(),
                base_url: e.public_url(),
                key_configured: e.has_key(),
                is_default: e.name == e.provider.as_str(),
            })
            .collect();
        Ok(Response::new(pb::ListEndpointsResponse { data }))
    }

    async fn get_routing_profile(&self, r: Request<pb::GetRoutingProfileRequest>) -> Result<Response<pb::RoutingProfile>, Status> {
        Ok(Response::new(profile(self.svc.profile(&r.into_inner().id).await?)))
    }

    async fn list_routing_profiles(
        &self,
        r: Request<pb::ListRoutingProfilesRequest>,
    ) -> Result<Response<pb::ListRoutingProfilesResponse>, Status> {
        let r = r.into_inner();
        let page = PageRequest::standard(r.limit, &r.page)?;
        let mut envs = r.environment_ids;
        if !r.environment_id.is_empty() {
            envs.push(r.environment_id);
        }
        let rows = self.svc.list_profiles(&envs, &page).await?;
        let (rows, next_page) = page.finish(rows, |p| &p.id);
        Ok(Response::new(pb::ListRoutingProfilesResponse { data: rows.into_iter().map(profile).collect(), next_page }))
    }

    async fn get_price_catalog(&self, _: Request<pb::GetPriceCatalogRequest>) -> Result<Response<pb::PriceCatalog>, Status> {
        let entries = CATALOG
            .iter()
            .map(|p| pb::PriceEntry {
                provider: p.provider.into(),
                model: p.model.into(),
                input_micro_usd_per_mtok: p.input_micro_usd_per_mtok,
                output_micro_usd_per_mtok: p.output_micro_usd_per_mtok,
            })
            .collect();
        Ok(Response::new(pb::PriceCatalog { entries }))
    }

    type GenerateStream = ChunkStream;

    async fn generate(&self, r: Request<pb::GenerateRequest>) -> Result<Response<Self::GenerateStream>, Status> {
        let scope = self.tokens.verify(&r)?;
        let r = r.into_inner();
        if r.run_id != scope.run_id {
            return Err(Error::new(Code::PermissionDenied, "the capability token is for another Run").into());
        }
        if r.routing_profile_id != scope.routing_profile_id {
            return Err(Error::new(Code::PermissionDenied, "the Run's pins name another model routing profile").into());
        }
        let profile_id = r.routing_profile_id.clone();
        let req = request_from_pb(r)?;
        let (out_tx, out_rx) = mpsc::channel::<Result<pb::GenerateChunk, Status>>(64);
        let svc = self.svc.clone();
        tokio::spawn(async move {
            use pb::generate_chunk::Chunk;
            let (started_tx, mut started_rx) = mpsc::channel::<(Provider, String)>(4);
            let (delta_tx, mut delta_rx) = mpsc::channel::<String>(64);
            let forward = {
                let out_tx = out_tx.clone();
                async move {
                    loop {
                        // Biased: a candidate's Started is queued before any of
                        // its deltas, and must reach the caller first.
                        tokio::select! {
                            biased;
                            Some((p, m)) = started_rx.recv() => {
                                let c = Chunk::Started(pb::Started { provider: p.as_str().into(), model: m });
                                let _ = out_tx.send(Ok(pb::GenerateChunk { chunk: Some(c) })).await;
                            }
                            Some(d) = delta_rx.recv() => {
                                let _ = out_tx.send(Ok(pb::GenerateChunk { chunk: Some(Chunk::TextDelta(d)) })).await;
                            }
                            else => break,
                        }
                    }
                }
            };
            let (result, ()) = tokio::join!(svc.generate(&profile_id, &req, started_tx, delta_tx), forward);
            let last = match result {
                Ok(m) => Ok(pb::GenerateChunk {
                    chunk: Some(Chunk::Completed(pb::Completed {
                        content: m.output.content.iter().map(block_to_pb).collect(),
                        usage: Some(pb::Usage { input_tokens: m.output.usage.input_tokens, output_tokens: m.output.usage.output_tokens }),
                        cost_micro_usd: m.cost_micro_usd,
                        stop_reason: m.output.stop_reason,
                    })),
                }),
                Err(e) => Err(Status::from(e)),
            };
            let _ = out_tx.send(last).await;
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(out_rx))))
    }

    async fn run_task(&self, r: Request<pb::TaskRequest>) -> Result<Response<pb::TaskResponse>, Status> {
        use crate::tasks::grade::ReportOutput;
        use crate::tasks::{Answer, DreamTask, GradeTask, Task};
        let r = r.into_inner();
        #[allow(deprecated)] // a 0.1.0 caller's acceptance_json
        let task = match r.task {
            Some(pb::task_request::Task::Dream(d)) => Task::Dream(DreamTask {
                instructions: d.instructions,
                messages: d.messages,
                documents: d.documents.into_iter().map(|d| (d.path, d.content)).collect(),
            }),
            Some(pb::task_request::Task::Grade(g)) => Task::Grade(GradeTask {
                rubric: g.rubric,
                criteria: g.criteria.into_iter().map(|c| (c.name, c.question)).collect(),
                report: g
                    .report
                    .into_iter()
                    .map(|o| ReportOutput {
                        name: o.name,
                        kind: o.r#type,
                        description: o.description,
                        acceptance: acceptance(o.acceptance, &o.acceptance_json),
                    })
                    .collect(),
                evidence_message: g.evidence_message,
                evidence_files: g.evidence_files.into_iter().map(|f| (f.path, f.sha256)).collect(),
            }),
            Some(pb::task_request::Task::Check(c)) => Task::Check(crate::tasks::CheckTask {
                instructions: c.instructions,
                questions: c.questions.into_iter().map(|q| (q.name, q.question)).collect(),
                input: c.input_json,
                effort: if c.effort.is_empty() { None } else { Some(Effort::parse("effort", &c.effort)?) },
            }),
            Some(pb::task_request::Task::Screen(t)) => Task::Screen(crate::tasks::ScreenTask {
                instructions: t.instructions,
                message: t.message,
                effort: if t.effort.is_empty() { None } else { Some(Effort::parse("effort", &t.effort)?) },
            }),
            None => return Err(Error::invalid("a task names what to do").into()),
        };
        let done = self.svc.run_task(&r.routing_profile_id, &r.environment_id, &task).await?;
        let answer = match done.answer {
            Answer::Dream(changes) => pb::task_response::Answer::Dream(pb::DreamAnswer {
                changes: changes.into_iter().map(|c| pb::DreamChange { path: c.path, content: c.content }).collect(),
            }),
            Answer::Grade(g) => pb::task_response::Answer::Grade(pb::GradeAnswer {
                judgments: g
                    .judgments
                    .into_iter()
                    .map(|j| pb::Judgment { source: j.source, name: j.name, verdict: j.verdict.as_str().into() })
                    .collect(),
                report_json: serde_json::Value::Object(g.report).to_string(),
                explanation: g.explanation,
                feedback: g.feedback,
            }),
            Answer::Check(reply_json) => pb::task_response::Answer::Check(pb::CheckAnswer { reply_json }),
            Answer::Screen(reply_json) => pb::task_response::Answer::Screen(pb::ScreenAnswer { reply_json }),
        };
        Ok(Response::new(pb::TaskResponse {
            usage: Some(pb::Usage { input_tokens: done.usage.input_tokens, output_tokens: done.usage.output_tokens }),
            cost_micro_usd: done.cost_micro_usd,
            provider: done.provider.as_str().into(),
            model: done.model,
            answer: Some(answer),
            qualification_id: done.qualification_id.map(String::from).unwrap_or_default(),
        }))
    }

    async fn create_evaluator_qualification(
        &self,
        r: Request<pb::CreateEvaluatorQualificationRequest>,
    ) -> Result<Response<pb::EvaluatorQualification>, Status> {
        let r = r.into_inner();
        let new = crate::qualifications::NewQualification {
            provider: r.provider,
            model: r.model,
            purpose: r.purpose,
            evidence: r.evidence,
            reviewed_at: r.reviewed_at,
            expires_at: r.expires_at,
            actor_id: r.actor_id,
        };
        Ok(Response::new(qualification(self.svc.create_qualification(&new).await?)))
    }

    async fn get_evaluator_qualification(
        &self,
        r: Request<pb::GetEvaluatorQualificationRequest>,
    ) -> Result<Response<pb::EvaluatorQualification>, Status> {
        Ok(Response::new(qualification(self.svc.qualification(&r.into_inner().id).await?)))
    }

    async fn list_evaluator_qualifications(
        &self,
        r: Request<pb::ListEvaluatorQualificationsRequest>,
    ) -> Result<Response<pb::ListEvaluatorQualificationsResponse>, Status> {
        let r = r.into_inner();
        let page = PageRequest::standard(r.limit, &r.page)?;
        let rows = self.svc.list_qualifications(&page).await?;
        let (rows, next_page) = page.finish(rows, |q| q.id.as_str());
        Ok(Response::new(pb::ListEvaluatorQualificationsResponse { data: rows.into_iter().map(qualification).collect(), next_page }))
    }

    async fn revoke_evaluator_qualification(
        &self,
        r: Request<pb::RevokeEvaluatorQualificationRequest>,
    ) -> Result<Response<pb::EvaluatorQualification>, Status> {
        Ok(Response::new(qualification(self.svc.revoke_qualification(&r.into_inner().id).await?)))
    }

    async fn check_evaluators(&self, r: Request<pb::CheckEvaluatorsRequest>) -> Result<Response<pb::CheckEvaluatorsResponse>, Status> {
        let r = r.into_inner();
        let purpose = crate::qualifications::Purpose::parse("purpose", &r.purpose)?;
        let qualified = self.svc.evaluators_qualified(&r.routing_profile_id, purpose).await?;
        Ok(Response::new(pb::CheckEvaluatorsResponse { qualified }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_acceptance_reads_the_same_typed_or_from_a_0_1_0_callers_text() {
        use pb::report_value::Value as V;
        let typed = pb::Acceptance {
            values: [V::Integer(5), V::Number(5.5), V::Text("ok".into()), V::Boolean(true)]
                .into_iter()
                .map(|v| pb::ReportValue { value: Some(v) })
                .collect(),
            min: Some(1.0),
            max: None,
        };
        let text = json!({"values": [5, 5.5, "ok", true], "min": 1.0}).to_string();
        let a = acceptance(Some(typed), "").expect("typed");
        assert_eq!(Some(a.clone()), acceptance(None, &text));
        assert_eq!(a.values.as_deref(), Some(&[json!(5), json!(5.5), json!("ok"), json!(true)][..]), "an integer stays an integer");
        assert_eq!(acceptance(None, ""), None, "none");
        assert_eq!(acceptance(Some(pb::Acceptance::default()), "").expect("empty").values, None, "no values listed: any passes");
    }
}

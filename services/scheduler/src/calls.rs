//! Running `step_connection` steps (api.md §18.3) on the governed path a
//! Run's tool call takes, with the Automation's service Principal as the
//! caller and no agent: in order, and each refusal terminal with nothing
//! sent —
//!
//! 1. PermissionAssignment: the service Principal holds `use_connection` on
//!    the pinned Connection, else `failed` `permission_denied`;
//! 2. ActionPolicy on `{kind:"tool", id:<tool>}` (rules on the ToolSource
//!    and the Connection match too; none → `require_approval`): `deny` →
//!    `failed` `policy_denied`;
//! 3. `require_approval`: the step waits `awaiting_approval` on an
//!    ActionApproval freezing the call (asked for by the program's advance,
//!    as an approval step's is); approve runs 1–2 again, then calls;
//! 4. the ConnectionCall is saved with `sent_at` in a compare-and-set, and
//!    only then does the capability gateway check the Connection again,
//!    inject the credential and send `tools/call`.
//!
//! A call saved and unanswered is never sent again: a durable timer armed
//! in the write that saved it — at the ToolSource's call timeout and a
//! margin — takes it as indeterminate (`effect_indeterminate`) if no answer
//! was recorded by then: its process died, or lost the answer. Replicas
//! never take another's call in flight for lost, whatever restarts.

use crate::connection_call::{CallAnswer, CallWork, ConnectionCall};
use crate::firing::Firing;
use crate::model::{Automation, Readiness};
use crate::program::{Outcome, Program};
use crate::service::SchedulerService;
use checkfu_core::id::{ConnectionCallId, FiringId};
use checkfu_core::time::now_ms;
use checkfu_proto::capability::v1 as cg;
use checkfu_proto::governance::v1 as gov;
use futures_util::future::BoxFuture;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// How long past a ToolSource's call timeout an unanswered call is waited
/// for before it is taken as indeterminate.
const ANSWER_MARGIN_MS: i64 = 10_000;

/// Checks a `step_connection`'s written arguments against its tool's
/// schema when planned: the keys its bindings fill are left to the run
/// (the schema's `required` is relaxed for them, and their values are not
/// read). `Err(why)` names what does not fit.
pub(crate) fn written_arguments_fit(
    schema: &Value,
    arguments: &Map<String, Value>,
    bound: &BTreeMap<String, crate::graph::document::Binding>,
) -> Result<(), String> {
    let mut relaxed = schema.clone();
    if let Some(required) = relaxed.get_mut("required").and_then(Value::as_array_mut) {
        required.retain(|k| k.as_str().is_none_or(|k| !bound.contains_key(k)));
    }
    if let Some(props) = relaxed.get_mut("properties").and_then(Value::as_object_mut) {
        for key in bound.keys() {
            props.insert(key.clone(), json!({}));
        }
    }
    let written: Map<String, Value> =
        arguments.iter().filter(|(k, _)| !bound.contains_key(*k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    let mut sample = Value::Object(written);
    for key in bound.keys() {
        sample[key] = Value::Null;
    }
    let v = jsonschema::draft202012::new(&relaxed).map_err(|e| format!("the tool's input schema is unreadable: {e}"))?;
    match v.iter_errors(&sample).next() {
        None => Ok(()),
        Some(e) => Err(format!("the arguments do not match the tool's input schema at {:?}: {e}", e.instance_path().to_string())),
    }
}

/// What governance decided for a call.
enum Governed {
    Allowed,
    AwaitApproval,
    Refused(&'static str, String),
}

impl SchedulerService {
    /// Governs and sends the calls `f`'s Connection steps wait for that
    /// this replica is not already handling (`in_flight.rs`). A call sent
    /// waits for its answer or its deadline's timer, and is not taken.
    pub(crate) fn run_connection_steps<'a>(&'a self, f: &'a Firing, a: &'a Automation) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let Some(p) = f.program.as_ref() else { return };
            let work = p.call_work(&f.event);
            let work = self.take_in_flight(f, a, work, |w: &CallWork| (w.step_id.as_str(), w.attempt), Readiness::admits_calls).await;
            for w in work {
                let svc = self.clone();
                let (firing, a) = (f.id.clone(), a.clone());
                tokio::spawn(async move {
                    if let Err(e) = svc.govern_and_call(&firing, &a, &w).await {
                        tracing::warn!(firing_id = %firing, step_id = %w.step_id, error = %e.message, "a Connection step did not move on");
                    }
                    svc.left(&firing, &w.step_id, w.attempt);
                });
            }
        })
    }

    /// Steps 1–4 for one Connection step's attempt.
    async fn govern_and_call(&self, firing: &FiringId, a: &Automation, w: &CallWork) -> checkfu_core::Result<()> {
        let env = a.environment_id.to_string();
        let req = cg::ResolveStepToolRequest { environment_id: env.clone(), tool_source: w.tool_source_id.clone(), tool: w.tool.clone() };
        let tool = match self.capability.clone().resolve_step_tool(req).await {
            Ok(t) => t.into_inner(),
            Err(s) => {
                let detail = format!("the ToolSource could not be read: {}", s.message());
                return self.refuse(firing, a, w, "call_not_sent", detail).await;
            }
        };
        if tool.connection_status != "active" || tool.connection_id != w.connection_id {
            let detail = format!("connection.unavailable: connection {} is not active", w.connection_id);
            return self.refuse(firing, a, w, "call_not_sent", detail).await;
        }
        match self.govern(a, w, &tool.connection_status).await {
            Governed::Refused(reason, detail) => return self.refuse(firing, a, w, reason, detail).await,
            Governed::AwaitApproval => {
                let step = w.step_id.clone();
                let attempt = w.attempt;
                let change = move |_: &mut Firing, p: &mut Program, now: i64| {
                    if p.call_pending(&step, attempt) {
                        p.set(&step, Outcome::of("awaiting_approval"), now);
                    }
                };
                return self.advance_program(firing, Some(Box::new(change))).await;
            }
            Governed::Allowed => {}
        }
        let now = now_ms();
        let call = ConnectionCall {
            id: ConnectionCallId::mint().to_string(),
            step_id: w.step_id.clone(),
            attempt: w.attempt,
            tool: w.tool.clone(),
            tool_source_id: w.tool_source_id.clone(),
            connection_id: w.connection_id.clone(),
            arguments_sha256: checkfu_core::sha256_hex(w.arguments.to_string()),
            status: None,
            error_code: None,
            sent_at_ms: now,
            deadline_ms: now + tool.call_timeout_seconds.clamp(1, 600) * 1000 + ANSWER_MARGIN_MS,
        };
        // Saved, `sent_at` set, before a byte leaves.
        let saved = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (record, mark) = (call.clone(), saved.clone());
        let change = move |_: &mut Firing, p: &mut Program, _: i64| {
            mark.store(p.call_sent(record.clone()), std::sync::atomic::Ordering::SeqCst);
        };
        self.write_program(firing, Box::new(change)).await?;
        if !saved.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(());
        }
        let req = cg::CallStepToolRequest {
            environment_id: env,
            tool_source_id: w.tool_source_id.clone(),
            connection_id: w.connection_id.clone(),
            tool: w.tool.clone(),
            arguments_json: w.arguments.to_string(),
            connection_call_id: call.id.clone(),
        };
        let answer = match self.capability.clone().call_step_tool(req).await {
            Ok(r) => {
                let r = r.into_inner();
                let structured = serde_json::from_str(&r.structured_content_json).ok();
                let output = (r.outcome == "succeeded").then(|| Program::call_output(r.content, structured));
                CallAnswer { outcome: r.outcome, code: r.code, output }
            }
            // Refused before anything was sent.
            Err(s) if matches!(s.code(), tonic::Code::InvalidArgument | tonic::Code::PermissionDenied | tonic::Code::Unauthenticated) => {
                CallAnswer { outcome: "not_sent".into(), code: "capability.refused".into(), output: None }
            }
            Err(s) => {
                tracing::warn!(step_id = %w.step_id, error = %s.message(), "a Connection step's call has no answer");
                CallAnswer { outcome: "indeterminate".into(), code: "capability.unreachable".into(), output: None }
            }
        };
        let (id, settled) = (call.id.clone(), answer.clone());
        let change = move |_: &mut Firing, p: &mut Program, now: i64| {
            p.call_answered(&id, &settled, now);
        };
        self.advance_program(firing, Some(Box::new(change))).await?;
        let status = match answer.outcome.as_str() {
            "succeeded" => "succeeded",
            "indeterminate" => "indeterminate",
            _ => "failed",
        };
        self.audit_resource(
            a.service_principal_id.as_ref(),
            &format!("connection_call.{status}"),
            "automation_firing",
            firing.as_str(),
            json!({"connection_call_id": call.id, "step_id": w.step_id, "attempt": w.attempt, "tool": w.tool,
                "tool_source_id": w.tool_source_id, "connection_id": w.connection_id, "arguments_sha256": call.arguments_sha256,
                "outcome": answer.outcome, "error_code": answer.code}),
        )
        .await;
        Ok(())
    }

    /// Governance's first two checks, then whether a person must approve
    /// (unless one already did for this attempt).
    async fn govern(&self, a: &Automation, w: &CallWork, connection_status: &str) -> Governed {
        let svc = a.service_principal_id.to_string();
        let env = a.environment_id.to_string();
        match self.allowed(&svc, "use_connection", "connection", &w.connection_id, &env).await {
            Ok(true) => {}
            Ok(false) => return Governed::Refused("permission_denied", format!("{svc} holds no use_connection on {}", w.connection_id)),
            Err(s) => return Governed::Refused("call_not_sent", format!("governance could not be asked: {}", s.message())),
        }
        let req = gov::EvaluateActionRequest {
            environment_id: env,
            subject: Some(gov::ResourceRef { kind: "principal".into(), id: svc }),
            resource: Some(gov::ResourceRef { kind: "tool".into(), id: w.tool.clone() }),
            permission: "invoke".into(),
            tool: Some(gov::CalledTool { r#type: "tool_source".into(), name: w.tool.clone(), read_only: false, destructive: false }),
            connection_id: w.connection_id.clone(),
            connection_status: connection_status.into(),
            tool_source_id: w.tool_source_id.clone(),
            ..Default::default()
        };
        match self.governance.clone().evaluate_action(req).await {
            Ok(d) => match d.get_ref().disposition.as_str() {
                "allow" => Governed::Allowed,
                "require_approval" if w.approved => Governed::Allowed,
                "require_approval" => Governed::AwaitApproval,
                _ => Governed::Refused("policy_denied", d.into_inner().reason),
            },
            Err(s) => Governed::Refused("call_not_sent", format!("governance could not be asked: {}", s.message())),
        }
    }

    /// Fails a Connection step's attempt before anything was sent (audited
    /// as a refusal); `call_not_sent` is retried when the step says so.
    async fn refuse(
        &self,
        firing: &FiringId,
        a: &Automation,
        w: &CallWork,
        reason: &'static str,
        detail: String,
    ) -> checkfu_core::Result<()> {
        let (step, attempt) = (w.step_id.clone(), w.attempt);
        let change = move |_: &mut Firing, p: &mut Program, now: i64| {
            if p.call_pending(&step, attempt) {
                p.settle_attempt(&step, Outcome::failed(reason), now);
            }
        };
        self.advance_program(firing, Some(Box::new(change))).await?;
        let action = if reason == "call_not_sent" { "connection_call.not_sent" } else { "action.denied" };
        self.audit_resource(
            a.service_principal_id.as_ref(),
            action,
            "automation_firing",
            firing.as_str(),
            json!({"step_id": w.step_id, "attempt": w.attempt, "tool": w.tool, "tool_source_id": w.tool_source_id,
                "connection_id": w.connection_id, "reason": reason, "detail": detail}),
        )
        .await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::document::Binding;

    #[test]
    fn written_arguments_are_checked_but_bound_keys_are_left_to_the_run() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"],
            "additionalProperties": false});
        let args = |v: Value| v.as_object().cloned().unwrap_or_default();
        let b = BTreeMap::from([("b".to_string(), Binding { source: "hook".into(), pointer: "/b".into() })]);
        assert_eq!(written_arguments_fit(&schema, &args(json!({"a": 2})), &b), Ok(()));
        assert_eq!(written_arguments_fit(&schema, &args(json!({"a": 2, "b": "x"})), &b), Ok(()), "a bound key's written value is replaced");
        assert!(written_arguments_fit(&schema, &args(json!({"a": "x"})), &b).is_err());
        assert!(written_arguments_fit(&schema, &args(json!({"a": 2})), &BTreeMap::new()).is_err(), "b is required");
        assert!(written_arguments_fit(&schema, &args(json!({"a": 2, "c": 1})), &b).is_err(), "no such argument");
    }
}

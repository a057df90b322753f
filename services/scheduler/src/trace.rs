//! A firing's trace: what its children and waits are now, read fresh from
//! the sessions and governance services each time (reading resumes
//! nothing), and which of the records it names could no longer be read.

use crate::firing::Firing;
use crate::service::SchedulerService;
use checkfu_core::Result;
use checkfu_core::time::now_ms;
use checkfu_proto::governance::v1 as gov;
use checkfu_proto::sessions::v1 as ss;

/// A firing with its receipts and evidence.
pub struct Trace {
    pub firing: Firing,
    pub receipts: Receipts,
    pub evidence: Evidence,
}

#[derive(Debug, Default, PartialEq)]
pub struct Receipts {
    pub sessions: Vec<SessionReceipt>,
    pub approvals: Vec<ApprovalReceipt>,
    pub waits: Vec<WaitReceipt>,
    /// Each accepted `continue_selected` input, `(step id, input)` (an
    /// Agent target's step id is empty).
    pub inputs: Vec<(String, crate::session_input::SessionInput)>,
    /// Each screened child's verdicts, as its log records them now.
    pub screens: Vec<ScreenReceipt>,
}

/// A delivery screen's verdict on one of a child's messages (§18.8).
#[derive(Debug, PartialEq)]
pub struct ScreenReceipt {
    pub step_id: Option<String>,
    pub session_id: String,
    pub event_id: String,
    pub seq: i64,
    /// `allowed`, `blocked` or `error`.
    pub verdict: String,
    pub released: bool,
    pub content_sha256: String,
    pub at: String,
}

/// A child Session as it says now.
#[derive(Debug, PartialEq)]
pub struct SessionReceipt {
    pub step_id: Option<String>,
    pub session_id: String,
    pub status: String,
    /// As the sessions service sent it: typed, or a 0.1.0 service's text.
    pub stop_reason: Option<ss::StopReason>,
    pub stop_reason_json: String,
}

#[derive(Debug, PartialEq)]
pub struct ApprovalReceipt {
    pub step_id: String,
    pub action_approval_id: String,
    pub status: String,
}

#[derive(Debug, PartialEq)]
pub struct WaitReceipt {
    pub step_id: String,
    pub until_ms: i64,
    pub elapsed: bool,
}

#[derive(Debug, Default, PartialEq)]
pub struct Evidence {
    /// `(kind, id)` of each record that could not be read.
    pub missing: Vec<(&'static str, String)>,
}

impl SchedulerService {
    /// A firing and its receipts: each child Session's status and stop
    /// reason as the Session says now. A child that cannot be read is listed
    /// as missing evidence. Reading resumes nothing.
    pub async fn trace(&self, id: &str) -> Result<Trace> {
        let f = self.firing(id).await?;
        let mut receipts = Receipts::default();
        let mut evidence = Evidence::default();
        for child in &f.child_session_ids {
            match self.sessions.clone().get_session(ss::GetByIdRequest { id: child.clone() }).await {
                Ok(s) => {
                    let s = s.into_inner();
                    let step_id = f.program.as_ref().and_then(|p| p.step_of_child(child)).map(|st| st.id.clone());
                    if s.delivery_screen.is_some() {
                        self.each_event(child, &["message.screened"], |e| {
                            let p: serde_json::Value = serde_json::from_str(&e.payload_json).unwrap_or_default();
                            receipts.screens.push(ScreenReceipt {
                                step_id: step_id.clone(),
                                session_id: child.clone(),
                                event_id: e.id.clone(),
                                seq: e.seq,
                                verdict: p["verdict"].as_str().unwrap_or_default().into(),
                                released: p["released"].as_bool().unwrap_or(false),
                                content_sha256: p["content_sha256"].as_str().unwrap_or_default().into(),
                                at: e.created_at.clone(),
                            });
                        })
                        .await?;
                    }
                    #[allow(deprecated)] // a 0.1.0 sessions service sends only the JSON text
                    let stop_reason_json = if s.stop_reason.is_some() { String::new() } else { s.stop_reason_json };
                    receipts.sessions.push(SessionReceipt {
                        step_id,
                        session_id: s.id,
                        status: s.status,
                        stop_reason: s.stop_reason,
                        stop_reason_json,
                    });
                }
                Err(st) if st.code() == tonic::Code::NotFound => evidence.missing.push(("session", child.clone())),
                Err(st) => return Err(st.into()),
            }
        }
        receipts.inputs =
            self.store.firing_inputs(f.id.as_str()).await?.into_iter().filter_map(|r| Some((r.step_id, r.accepted?))).collect();
        let now = now_ms();
        receipts.waits = f
            .program
            .iter()
            .flat_map(|p| p.steps.iter())
            .filter(|s| s.wait_until_ms > 0)
            .map(|s| WaitReceipt { step_id: s.id.clone(), until_ms: s.wait_until_ms, elapsed: now >= s.wait_until_ms })
            .collect();
        for s in f.program.iter().flat_map(|p| p.steps.iter()) {
            let Some(id) = &s.action_approval_id else { continue };
            match self.governance.clone().get_action_approval(gov::GetByIdRequest { id: id.clone() }).await {
                Ok(a) => receipts.approvals.push(ApprovalReceipt {
                    step_id: s.id.clone(),
                    action_approval_id: id.clone(),
                    status: a.into_inner().status,
                }),
                Err(st) if st.code() == tonic::Code::NotFound => evidence.missing.push(("action_approval", id.clone())),
                Err(st) => return Err(st.into()),
            }
        }
        Ok(Trace { firing: f, receipts, evidence })
    }
}

//! User input: validation of the wire event into [`Input`], which
//! [`crate::draft::Draft::apply`] applies to a Session. Creation (initial
//! events) and `POST /events` share both, so the rules cannot drift apart.

use crate::model::*;
use checkfu_core::events::EventType;
use checkfu_core::{Error, Result};
use serde_json::{Value, json};

/// A validated user event.
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    pub event_type: EventType,
    pub payload: Value,
    pub authored_by: String,
    pub caused_by: Value,
    pub thread_id: Option<String>,
    /// The id a continuation's caller minted for it (`continuation.rs`);
    /// `None`: minted when appended.
    pub event_id: Option<checkfu_core::id::EventId>,
}

fn field_str<'a>(p: &'a Value, f: &str, ty: &str) -> Result<&'a str> {
    p.get(f)
        .and_then(Value::as_str)
        .ok_or_else(|| Error::invalid_field(&format!("payload.{f}"), format!("{ty} needs a string payload.{f}")))
}

/// Content blocks: text, and (where `files` is set) document and image
/// blocks naming a File, shape-checked by [`file_blocks`].
fn check_content(p: &Value, field: &str, files: bool) -> Result<()> {
    let content = p
        .get(field)
        .and_then(Value::as_array)
        .ok_or_else(|| Error::invalid_field(&format!("payload.{field}"), format!("payload.{field} must be an array of content blocks")))?;
    if content.is_empty() || content.len() > 100 {
        return Err(Error::invalid_field(&format!("payload.{field}"), "content must hold 1 to 100 blocks"));
    }
    let mut total = 0usize;
    for (i, b) in content.iter().enumerate() {
        let f = format!("payload.{field}[{i}]");
        match b.get("type").and_then(Value::as_str) {
            Some("text") => {
                let t =
                    b.get("text").and_then(Value::as_str).ok_or_else(|| Error::invalid_field(&f, "a text block needs a string text"))?;
                total += t.len();
            }
            Some("document" | "image") if files => {}
            Some(other) => {
                let supported = if files { "text, document, image" } else { "text" };
                return Err(Error::invalid_field(&f, format!("unknown content block type {other:?}; supported: {supported}")));
            }
            None => return Err(Error::invalid_field(&f, "a content block needs a type")),
        }
    }
    if total > MAX_TEXT_BYTES {
        return Err(Error::invalid_field(&format!("payload.{field}"), "message text is limited to 256 KiB"));
    }
    if files {
        file_blocks(&p[field])?;
    }
    Ok(())
}

impl Input {
    /// Validates a wire event. `caused_by` must be `{kind, id}`; `authored_by`
    /// a principal id (the gateway has checked the caller may speak for it).
    pub fn parse(event_type: &str, payload: Value, authored_by: &str, caused_by: Value) -> Result<Input> {
        if event_type == EventType::UserToolResult.as_str() {
            return Err(Error::denied(
                "user.tool_result is sent only by the holder of the Session's work item, with its work token (api.md §17.13)",
            )
            .with_reason("work_holder_only"));
        }
        let Some(event_type) = EventType::parse("type", event_type).ok().filter(|t| EventType::USER.contains(t)) else {
            let accepted: Vec<&str> = EventType::USER.iter().map(|t| t.as_str()).collect();
            return Err(Error::invalid_field("type", format!("unknown event type {event_type:?}; accepted: {}", accepted.join(", "))));
        };
        if authored_by.is_empty() {
            return Err(Error::invalid_field("authored_by", "authored_by is required"));
        }
        checkfu_core::id::PrincipalId::check("authored_by", authored_by)?;
        let kind = caused_by.get("kind").and_then(Value::as_str).unwrap_or("");
        let id = caused_by.get("id").and_then(Value::as_str).unwrap_or("");
        if !caused_by.is_object() || kind.is_empty() || id.is_empty() || kind.len() > 64 || id.len() > 200 {
            return Err(Error::invalid_field("caused_by", "caused_by is required as {\"kind\": ..., \"id\": ...}"));
        }
        let p = if payload.is_null() { json!({}) } else { payload };
        if !p.is_object() {
            return Err(Error::invalid_field("payload", "payload must be an object"));
        }
        let mut thread_id = None;
        if matches!(event_type, EventType::UserInterrupt | EventType::UserToolConfirmation | EventType::UserCustomToolResult)
            && let Some(t) = p.get("session_thread_id").filter(|v| !v.is_null())
        {
            let t = t.as_str().ok_or_else(|| Error::invalid_field("payload.session_thread_id", "must be a string"))?;
            checkfu_core::id::check("payload.session_thread_id", "sthr", t)?;
            thread_id = Some(t.to_string());
        }
        match event_type {
            EventType::UserMessage => check_content(&p, "content", true)?,
            EventType::UserToolConfirmation => {
                field_str(&p, "tool_use_id", event_type.as_str())?;
                let r = field_str(&p, "result", event_type.as_str())?;
                if r != "allow" && r != "deny" {
                    return Err(Error::invalid_field("payload.result", "result must be allow or deny"));
                }
                if let Some(m) = p.get("deny_message").filter(|v| !v.is_null())
                    && m.as_str().is_none_or(|s| s.len() > 4096)
                {
                    return Err(Error::invalid_field("payload.deny_message", "deny_message must be a string of at most 4 KiB"));
                }
            }
            EventType::UserCustomToolResult => {
                field_str(&p, "custom_tool_use_id", event_type.as_str())?;
                check_content(&p, "content", false)?;
                if p.get("is_error").is_some_and(|v| !v.is_boolean() && !v.is_null()) {
                    return Err(Error::invalid_field("payload.is_error", "is_error must be a boolean"));
                }
            }
            EventType::UserDefineOutcome => {
                crate::model::outcome::Definition::parse(&p)?;
            }
            _ => {}
        }
        Ok(Input { event_type, payload: p, authored_by: authored_by.to_string(), caused_by, thread_id, event_id: None })
    }

    pub(crate) fn is_settle(&self) -> bool {
        EventType::SETTLE.contains(&self.event_type)
    }
}

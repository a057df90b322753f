//! Model-gateway domain types: routing profiles and their ordered candidates.

use checkfu_core::{Error, Result, string_enum};
use serde::{Deserialize, Serialize};

string_enum!(
    /// Providers the gateway can route to.
    Provider { Anthropic = "anthropic", OpenAi = "openai", Scripted = "scripted" }
);

string_enum!(
    /// The provider-neutral effort scale; adapters translate it, callers never
    /// pass a raw provider parameter.
    Effort { Minimal = "minimal", Low = "low", Medium = "medium", High = "high", Max = "max" }
);

#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub provider: Provider,
    pub model: String,
    pub effort: Effort,
    pub connection_id: Option<String>,
    pub base_url: Option<String>,
}

/// How a candidate is stored (and shown): plain strings.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredCandidate {
    pub provider: String,
    pub model: String,
    pub effort: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
}

impl Candidate {
    pub fn parse(i: usize, c: &StoredCandidate) -> Result<Candidate> {
        let field = |f: &str| format!("candidates[{i}].{f}");
        let provider = Provider::parse(&field("provider"), &c.provider)?;
        let effort = if c.effort.is_empty() { Effort::Medium } else { Effort::parse(&field("effort"), &c.effort)? };
        if c.model.trim().is_empty() || c.model.len() > 200 {
            return Err(Error::invalid_field(&field("model"), "model must be 1 to 200 characters"));
        }
        if let Some(conn) = c.connection_id.as_deref().filter(|s| !s.is_empty()) {
            checkfu_core::id::check(&field("connection_id"), "conn", conn)?;
        }
        let base_url = c.base_url.clone().filter(|s| !s.is_empty());
        if let Some(u) = &base_url
            && !(u.starts_with("http://") || u.starts_with("https://"))
        {
            return Err(Error::invalid_field(&field("base_url"), "base_url must be an http(s) URL"));
        }
        Ok(Candidate {
            provider,
            model: c.model.clone(),
            effort,
            connection_id: c.connection_id.clone().filter(|s| !s.is_empty()),
            base_url,
        })
    }

    pub fn stored(&self) -> StoredCandidate {
        StoredCandidate {
            provider: self.provider.as_str().into(),
            model: self.model.clone(),
            effort: self.effort.as_str().into(),
            connection_id: self.connection_id.clone(),
            base_url: self.base_url.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct RoutingProfile {
    pub id: String,
    pub environment_id: String,
    pub name: String,
    pub candidates: Vec<Candidate>,
    pub created_ms: i64,
}

/// A block of a conversation message, provider-neutral.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Text(String),
    ToolUse { id: String, name: String, input: serde_json::Value },
    ToolResult { tool_use_id: String, content: String, is_error: bool },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: Role,
    pub content: Vec<Block>,
}

/// A tool the model may call: its name, description and JSON Schema.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelRequest {
    pub system: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: i64,
    pub output_tokens: i64,
}

/// The finished turn a provider produced.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelOutput {
    pub content: Vec<Block>,
    pub usage: Usage,
    pub stop_reason: String,
}

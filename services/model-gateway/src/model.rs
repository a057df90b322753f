//! Model-gateway domain types: routing profiles and their ordered candidates.

use checkfu_core::id::{EnvironmentId, RoutingProfileId};
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
    /// The installation endpoint to use; `None` is the provider's default.
    pub endpoint: Option<String>,
    /// Stored before endpoints existed with a `base_url` of its own: such a
    /// candidate is never called (a credential goes only to configured hosts).
    pub legacy_base_url: bool,
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
    pub endpoint: Option<String>,
    /// Read from profiles stored before endpoints existed; never written.
    #[serde(default, rename = "base_url", skip_serializing)]
    pub legacy_base_url: Option<String>,
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
        let endpoint = c.endpoint.clone().filter(|s| !s.is_empty());
        if let Some(e) = &endpoint
            && (e.len() > 64 || !e.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
        {
            return Err(Error::invalid_field(&field("endpoint"), "endpoint names a configured model endpoint (GET /v1/model-endpoints)"));
        }
        if endpoint.is_some() && provider == Provider::Scripted {
            return Err(Error::invalid_field(&field("endpoint"), "the scripted model has no endpoint"));
        }
        Ok(Candidate {
            provider,
            model: c.model.clone(),
            effort,
            connection_id: c.connection_id.clone().filter(|s| !s.is_empty()),
            endpoint,
            legacy_base_url: c.legacy_base_url.as_deref().is_some_and(|u| !u.is_empty()),
        })
    }

    pub fn stored(&self) -> StoredCandidate {
        StoredCandidate {
            provider: self.provider.as_str().into(),
            model: self.model.clone(),
            effort: self.effort.as_str().into(),
            connection_id: self.connection_id.clone(),
            endpoint: self.endpoint.clone(),
            legacy_base_url: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct RoutingProfile {
    pub id: RoutingProfileId,
    pub environment_id: EnvironmentId,
    pub name: String,
    pub candidates: Vec<Candidate>,
    pub created_ms: i64,
}

/// A block of a conversation message, provider-neutral.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        input: serde_json::Value,
    },
    ToolResult {
        tool_use_id: String,
        content: String,
        is_error: bool,
    },
    /// A File given to the Session.
    File(FileRef),
}

/// A File a message names, as the runner found it in the workspace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileRef {
    pub file_id: String,
    pub filename: String,
    pub media_type: String,
    /// Where it lies in the workspace (`uploads/<id>/<name>`).
    pub path: String,
    pub title: String,
    /// Its text, when it is text of at most 100,000 characters.
    pub text: String,
    /// Its bytes, when it is an image or a PDF a provider may take natively.
    pub data: Vec<u8>,
}

impl FileRef {
    /// How the File reads as text: inline, or a line naming where it lies.
    pub fn as_text(&self) -> String {
        let title = if self.title.is_empty() { String::new() } else { format!(" title=\"{}\"", self.title) };
        if self.text.is_empty() {
            format!("[file {} {}]{title} is in the workspace at {} ({})", self.file_id, self.filename, self.path, self.media_type)
        } else {
            format!("<document name=\"{}\" path=\"{}\"{title}>\n{}\n</document>", self.filename, self.path, self.text)
        }
    }

    pub fn is_image(&self) -> bool {
        self.media_type.starts_with("image/") && !self.data.is_empty()
    }

    pub fn is_pdf(&self) -> bool {
        self.media_type == "application/pdf" && !self.data.is_empty()
    }
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

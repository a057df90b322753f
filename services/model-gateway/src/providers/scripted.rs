//! The scripted model (docs/concepts.md, ModelRoutingProfile): deterministic, keyless and offline, so
//! every journey runs on a laptop and in CI.
//!
//! "The prompt it was sent" is the system text plus every block of every
//! message rendered as text (tool uses as `name input`, tool results as their
//! content, a File as `[file <file_id> <filename>]`); usage is that length
//! ÷ 4 and the output length ÷ 4, rounded up.

use super::ModelProvider;
use crate::model::*;
use checkfu_core::Result;
use tokio::sync::mpsc;

/// Text is streamed in chunks of at most this many characters.
pub const CHUNK_CHARS: usize = 8;

pub struct Scripted;

fn tokens(chars: usize) -> i64 {
    chars.div_ceil(4) as i64
}

fn block_text(b: &Block) -> String {
    match b {
        Block::Text(t) => t.clone(),
        Block::ToolUse { name, input, .. } => format!("{name} {input}"),
        Block::ToolResult { content, .. } => content.clone(),
        // It reads text blocks only; a File counts by its name.
        Block::File(f) => format!("[file {} {}]", f.file_id, f.filename),
    }
}

fn prompt_chars(req: &ModelRequest) -> usize {
    req.system.chars().count() + req.messages.iter().flat_map(|m| m.content.iter()).map(|b| block_text(b).chars().count()).sum::<usize>()
}

fn message_text(m: &Message) -> String {
    m.content
        .iter()
        .filter_map(|b| match b {
            Block::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `call <tool_name> <json object>` lines of a message, in order.
fn call_lines(text: &str) -> Vec<(String, serde_json::Value)> {
    text.lines()
        .filter_map(|line| {
            let rest = line.trim().strip_prefix("call ")?;
            let (name, json) = rest.trim_start().split_once(char::is_whitespace)?;
            let value: serde_json::Value = serde_json::from_str(json.trim()).ok()?;
            value.is_object().then(|| (name.to_string(), value))
        })
        .collect()
}

/// Decides the scripted turn's content, without usage.
pub fn respond(req: &ModelRequest) -> Vec<Block> {
    let last = req.messages.last();
    // 1. The newest message is the user's and asks for calls: emit them.
    if let Some(m) = last.filter(|m| m.role == Role::User) {
        let results: Vec<&Block> = m.content.iter().filter(|b| matches!(b, Block::ToolResult { .. })).collect();
        if results.is_empty() {
            let calls = call_lines(&message_text(m));
            if !calls.is_empty() {
                return calls
                    .into_iter()
                    .enumerate()
                    .map(|(i, (name, input))| Block::ToolUse { id: format!("toolu_{:02}_{}", req.messages.len(), i), name, input })
                    .collect();
            }
        } else {
            // 2. The previous turn ended in tool results: report them.
            let lines: Vec<String> = results
                .iter()
                .filter_map(|b| match b {
                    Block::ToolResult { tool_use_id, content, .. } => {
                        let name = tool_name(req, tool_use_id).unwrap_or_else(|| "unknown".into());
                        let preview: String = content.chars().take(200).collect();
                        Some(format!("tool {name} returned: {preview}"))
                    }
                    _ => None,
                })
                .collect();
            return vec![Block::Text(lines.join("\n"))];
        }
    }
    // 3. Echo the newest user text.
    let newest = req.messages.iter().rev().filter(|m| m.role == Role::User).map(message_text).find(|t| !t.is_empty()).unwrap_or_default();
    vec![Block::Text(format!("echo: {newest}"))]
}

fn tool_name(req: &ModelRequest, tool_use_id: &str) -> Option<String> {
    req.messages.iter().flat_map(|m| m.content.iter()).find_map(|b| match b {
        Block::ToolUse { id, name, .. } if id == tool_use_id => Some(name.clone()),
        _ => None,
    })
}

#[async_trait::async_trait]
impl ModelProvider for Scripted {
    async fn generate(
        &self,
        _: &Candidate,
        _: Option<&super::Target>,
        req: &ModelRequest,
        deltas: mpsc::Sender<String>,
    ) -> Result<ModelOutput> {
        let content = respond(req);
        let mut produced = 0usize;
        for b in &content {
            let text = block_text(b);
            produced += text.chars().count();
            if let Block::Text(t) = b {
                let chars: Vec<char> = t.chars().collect();
                for chunk in chars.chunks(CHUNK_CHARS) {
                    // A closed receiver only means nobody watches previews.
                    let _ = deltas.send(chunk.iter().collect()).await;
                }
            }
        }
        let stop_reason = if content.iter().any(|b| matches!(b, Block::ToolUse { .. })) { "tool_use" } else { "end_turn" };
        Ok(ModelOutput {
            content,
            usage: Usage { input_tokens: tokens(prompt_chars(req)), output_tokens: tokens(produced) },
            stop_reason: stop_reason.into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn user(t: &str) -> Message {
        Message { role: Role::User, content: vec![Block::Text(t.into())] }
    }

    #[test]
    fn a_file_counts_by_its_name_and_is_not_read_as_text() {
        let f = FileRef { file_id: "file_1".into(), filename: "notes.txt".into(), text: "call bash {}".into(), ..Default::default() };
        let req = ModelRequest {
            messages: vec![Message { role: Role::User, content: vec![Block::Text("hi".into()), Block::File(f)] }],
            ..Default::default()
        };
        assert_eq!(respond(&req), vec![Block::Text("echo: hi".into())], "a File's text is never a call");
        assert_eq!(prompt_chars(&req), "hi".len() + "[file file_1 notes.txt]".len());
    }

    #[test]
    fn echoes_the_newest_user_message() {
        let req = ModelRequest {
            system: String::new(),
            tools: vec![],
            messages: vec![
                user("first"),
                Message { role: Role::Assistant, content: vec![Block::Text("echo: first".into())] },
                user("second"),
            ],
        };
        assert_eq!(respond(&req), vec![Block::Text("echo: second".into())]);
    }

    #[test]
    fn call_lines_become_tool_uses_in_order_even_for_unknown_tools() {
        let req = ModelRequest {
            system: String::new(),
            messages: vec![user("please\ncall read {\"path\":\"a\"}\ncall nope {}\ncall bad [1]")],
            tools: vec![],
        };
        let out = respond(&req);
        assert_eq!(out.len(), 2);
        assert!(matches!(&out[0], Block::ToolUse { name, input, .. } if name == "read" && *input == json!({"path":"a"})));
        assert!(matches!(&out[1], Block::ToolUse { name, .. } if name == "nope"));
    }

    #[test]
    fn tool_results_are_reported_with_a_200_char_preview() {
        let long = "x".repeat(300);
        let req = ModelRequest {
            system: String::new(),
            tools: vec![],
            messages: vec![
                user("call read {}"),
                Message { role: Role::Assistant, content: vec![Block::ToolUse { id: "t1".into(), name: "read".into(), input: json!({}) }] },
                Message { role: Role::User, content: vec![Block::ToolResult { tool_use_id: "t1".into(), content: long, is_error: false }] },
            ],
        };
        assert_eq!(respond(&req), vec![Block::Text(format!("tool read returned: {}", "x".repeat(200)))]);
    }

    #[tokio::test]
    async fn usage_is_chars_over_four_rounded_up_and_text_streams_in_small_chunks() {
        let req = ModelRequest { system: "sys".into(), messages: vec![user("hello")], tools: vec![] };
        let (tx, mut rx) = mpsc::channel(64);
        let cand = Candidate {
            provider: Provider::Scripted,
            model: "m".into(),
            effort: Effort::Low,
            connection_id: None,
            endpoint: None,
            legacy_base_url: false,
        };
        let out = Scripted.generate(&cand, None, &req, tx).await.expect("generate");
        assert_eq!(out.usage, Usage { input_tokens: 2, output_tokens: 3 }); // 8 chars in, "echo: hello" = 11 out
        let mut chunks = vec![];
        while let Some(c) = rx.recv().await {
            assert!(c.chars().count() <= CHUNK_CHARS);
            chunks.push(c);
        }
        assert_eq!(chunks.concat(), "echo: hello");
    }
}

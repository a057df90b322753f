//! The built-in tools an agent may declare (`{"type":"builtin","name":...}`,
//! api.md §5): one list for the services that check declarations and the
//! clients that offer or explain them.

/// Every built-in tool's name.
pub const BUILTIN: &[&str] = &["bash", "read", "write", "edit", "glob", "grep", "web_fetch"];

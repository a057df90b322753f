//! What the model is told about each builtin tool: a description and the
//! JSON Schema of its input, so any model — not only the scripted one —
//! calls it with the arguments the plane running it reads.
//!
//! The managed plane's workspace reads Checkfu's argument names; an
//! external_tools Session's sandbox calls are run by a CMA worker (api.md
//! §17.13), whose `agent_toolset_20260401` reads CMA's (`file_path`,
//! `old_string`, ...), so the model is offered those.

use serde_json::{Value, json};

fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

/// `(description, input schema)` of builtin `name`, as the plane running it
/// reads it; `None` for a name that is not a builtin.
pub fn builtin(name: &str, external: bool) -> Option<(&'static str, Value)> {
    let s = |d: &str| json!({"type": "string", "description": d});
    let path = if external { "file_path" } else { "path" };
    let file = s("the file's path, relative to the workspace");
    Some(match name {
        "bash" => {
            let mut props = json!({"command": s("the shell command to run")});
            if external {
                props["restart"] = json!({"type": "boolean", "description": "restart the shell first"});
                props["timeout_ms"] = json!({"type": "integer", "description": "how long the command may run"});
            }
            ("Runs a shell command in the Session's workspace and returns its output.", object(props, &["command"]))
        }
        "read" => {
            let mut props = json!({ path: file });
            if external {
                props["view_range"] = json!({"type": "array", "items": {"type": "integer"}, "description": "[first, last] line to show"});
            }
            ("Reads a text file of the workspace.", object(props, &[path]))
        }
        "write" => (
            "Writes a file of the workspace whole, creating it and its folders.",
            object(json!({ path: file, "content": s("the new content") }), &[path, "content"]),
        ),
        "edit" => {
            let (old, new) = if external { ("old_string", "new_string") } else { ("old", "new") };
            let mut props = json!({ path: file, old: s("the text to replace (it must occur once)"), new: s("the replacement") });
            if external {
                props["replace_all"] = json!({"type": "boolean", "description": "replace every occurrence"});
            }
            ("Replaces text in a file of the workspace.", object(props, &[path, old, new]))
        }
        "glob" => {
            let mut props = json!({"pattern": s("a glob such as **/*.rs")});
            if external {
                props["path"] = s("the folder to search, relative to the workspace");
            }
            ("Lists the workspace's files matching a glob.", object(props, &["pattern"]))
        }
        "grep" => {
            let props = json!({"pattern": s("a regular expression"), "path": s("a file or folder to search, relative to the workspace")});
            ("Searches the workspace's files for lines matching a regular expression.", object(props, &["pattern"]))
        }
        "web_fetch" => {
            ("Fetches a URL the Session's sandbox profile allows and returns its text.", object(json!({"url": s("the URL")}), &["url"]))
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::builtin;

    #[test]
    fn each_plane_is_told_the_arguments_it_reads() {
        let (_, managed) = builtin("edit", false).expect("a builtin");
        assert_eq!(managed["required"], serde_json::json!(["path", "old", "new"]), "the workspace's names");
        let (_, external) = builtin("edit", true).expect("a builtin");
        assert_eq!(external["required"], serde_json::json!(["file_path", "old_string", "new_string"]), "agent_toolset_20260401's");
        assert_eq!(builtin("read", true).expect("read").1["required"], serde_json::json!(["file_path"]));
        for name in ["bash", "read", "write", "edit", "glob", "grep", "web_fetch"] {
            let (d, schema) = builtin(name, false).expect(name);
            assert!(!d.is_empty() && schema["type"] == "object", "{name}");
        }
        assert!(builtin("lookup", false).is_none());
    }
}

//! The mesh contract carries JSON text only where docs/architecture.md says
//! why ("JSON on the mesh"): every `*json*` string field of a .proto that
//! is not deprecated is named there as `Message.field`, either as free JSON
//! users author or as a structured value still to be typed.
#![cfg(test)]

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace").to_path_buf()
}

/// `(file, Message.field, deprecated)` of every `*json*` string field.
fn json_fields() -> Vec<(String, String, bool)> {
    let mut files = vec![];
    let mut dirs = vec![root().join("proto/checkfu")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("proto dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "proto") {
                files.push(p);
            }
        }
    }
    let mut out = vec![];
    for f in files {
        let text = std::fs::read_to_string(&f).expect("proto");
        let mut messages: Vec<String> = vec![];
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or_default();
            // Statements and braces in the order they appear on the line.
            let mut rest = code;
            while !rest.trim().is_empty() {
                let rest_trim = rest.trim_start();
                if let Some(after) = rest_trim.strip_prefix("message ") {
                    let name: String = after.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                    messages.push(name);
                    rest = after.split_once('{').map_or("", |(_, r)| r);
                } else if let Some(after) = rest_trim.strip_prefix('}') {
                    messages.pop();
                    rest = after;
                } else {
                    let (stmt, after) = rest_trim.split_once([';', '}']).unwrap_or((rest_trim, ""));
                    let closed = rest_trim[stmt.len()..].starts_with('}');
                    let words: Vec<&str> = stmt.split_whitespace().collect();
                    if let Some(i) = words.iter().position(|w| *w == "string")
                        && let Some(name) = words.get(i + 1)
                        && name.contains("json")
                        && let Some(m) = messages.last()
                    {
                        out.push((
                            f.strip_prefix(root()).unwrap().display().to_string(),
                            format!("{m}.{name}"),
                            stmt.contains("deprecated = true"),
                        ));
                    }
                    if closed {
                        messages.pop();
                    }
                    rest = after;
                }
            }
        }
    }
    out
}

#[test]
fn every_json_field_on_the_mesh_says_why() {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).expect("docs/architecture.md");
    let section = doc.split("### JSON on the mesh").nth(1).and_then(|s| s.split("\n## ").next()).expect("the section");
    let fields = json_fields();
    assert!(fields.len() > 50, "the .proto files were read ({})", fields.len());
    assert!(fields.iter().any(|(_, f, d)| f == "Session.stop_reason_json" && *d), "deprecated fields are seen as such");
    let unnamed: Vec<String> = fields
        .iter()
        .filter(|(_, field, deprecated)| !deprecated && !section.contains(&format!("`{field}`")))
        .map(|(file, field, _)| format!("{file}: {field}"))
        .collect();
    assert!(
        unnamed.is_empty(),
        "JSON text on the mesh that docs/architecture.md does not account for (type it, or say why it stays free JSON):\n{}",
        unnamed.join("\n")
    );
}

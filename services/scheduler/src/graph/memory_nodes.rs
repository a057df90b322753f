//! Memory nodes as a document writes them (api.md §18.7):
//! `step_memory_read {memoryStore, path, atVersion?}` and
//! `step_memory_write {memoryStore, path, inputBindings:{content,
//! expectedSha256?}, expectedSha256?}`.
//!
//! A write is always a compare-and-set: it binds the sha it expects (read
//! from an earlier Memory read, say) or says `expectedSha256: null` — create
//! only. Anything else is refused when planned (`memory_write_unconditional`)
//! rather than left to overwrite what someone else wrote.

use super::node_parts::{Binding, NodeError, fields};
use serde_json::{Map, Value};

/// A path's most bytes, as the memory service allows.
const MAX_PATH_BYTES: usize = 1_024;

#[derive(Debug, Clone, PartialEq)]
pub struct MemoryStep {
    /// The store's id (`mstr_…`).
    pub store: String,
    pub path: String,
    /// A read's `atVersion` (the head when absent).
    pub at_version: Option<i64>,
    /// A write's bindings; `None` for a read.
    pub write: Option<MemoryWrite>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MemoryWrite {
    pub content: Binding,
    /// The sha the document must hold; `None`: it must be absent.
    pub expected: Option<Binding>,
}

impl MemoryStep {
    pub fn parse(o: &Map<String, Value>, write: bool) -> Result<MemoryStep, NodeError> {
        let bad = |why: &str| ("document_invalid", why.to_string());
        match write {
            true => fields(o, &["memoryStore", "path", "inputBindings", "expectedSha256"])?,
            false => fields(o, &["memoryStore", "path", "atVersion"])?,
        }
        let store = o.get("memoryStore").and_then(Value::as_str).unwrap_or_default();
        checkfu_core::id::MemoryStoreId::check("memoryStore", store).map_err(|_| bad("a memory node names its memoryStore (mstr_…)"))?;
        let path = o.get("path").and_then(Value::as_str).unwrap_or_default();
        if !is_document_path(path) {
            return Err(bad("a memory node's path starts with / and holds segments of [A-Za-z0-9._-] (no . or ..), at most 1,024 bytes"));
        }
        let at_version = match o.get("atVersion") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_i64().filter(|n| *n >= 1).ok_or(bad("atVersion is a store version (1 or more)"))?),
        };
        let write = match write {
            false => None,
            true => Some(MemoryWrite::parse(o)?),
        };
        Ok(MemoryStep { store: store.to_string(), path: path.to_string(), at_version, write })
    }

    /// The bindings it reads.
    pub fn bindings(&self) -> Vec<&Binding> {
        self.write.iter().flat_map(|w| std::iter::once(&w.content).chain(w.expected.as_ref())).collect()
    }
}

impl MemoryWrite {
    fn parse(o: &Map<String, Value>) -> Result<MemoryWrite, NodeError> {
        let bad = |why: &str| ("document_invalid", why.to_string());
        let b = o.get("inputBindings").and_then(Value::as_object).ok_or(bad("a step_memory_write binds inputBindings.content"))?;
        if let Some(k) = b.keys().find(|k| !matches!(k.as_str(), "content" | "expectedSha256")) {
            return Err(("document_invalid", format!("a step_memory_write binds content and expectedSha256, not {k:?}")));
        }
        let content = Binding::parse(b.get("content").ok_or(bad("a step_memory_write binds inputBindings.content"))?)
            .map_err(|why| ("document_invalid", why))?;
        let bound = b.get("expectedSha256").filter(|v| !v.is_null());
        let expected = match (bound, o.get("expectedSha256")) {
            (Some(_), Some(_)) => return Err(bad("expectedSha256 is bound or written null, not both")),
            (Some(v), None) => Some(Binding::parse(v).map_err(|why| ("document_invalid", why))?),
            (None, Some(Value::Null)) => None,
            _ => {
                return Err((
                    "memory_write_unconditional",
                    "a step_memory_write binds inputBindings.expectedSha256 (the sha it read) or writes expectedSha256: null (create only)"
                        .into(),
                ));
            }
        };
        Ok(MemoryWrite { content, expected })
    }
}

/// A memory document path: `/`, then segments of `[A-Za-z0-9._-]` that
/// are not `.` or `..`.
fn is_document_path(path: &str) -> bool {
    let Some(rest) = path.strip_prefix('/') else { return false };
    path.len() <= MAX_PATH_BYTES
        && rest.split('/').all(|seg| {
            !seg.is_empty() && seg != "." && seg != ".." && seg.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value, write: bool) -> Result<MemoryStep, NodeError> {
        MemoryStep::parse(v.as_object().unwrap(), write)
    }

    const STORE: &str = "mstr_01jx0000000000000000000001";

    #[test]
    fn a_read_names_its_store_and_path() {
        let r =
            parse(json!({"kind": "step_memory_read", "id": "r", "memoryStore": STORE, "path": "/n.md", "atVersion": 2}), false).unwrap();
        assert_eq!((r.store.as_str(), r.path.as_str(), r.at_version, r.write), (STORE, "/n.md", Some(2), None));
        for bad in [
            json!({"memoryStore": "nope", "path": "/n.md"}),
            json!({"memoryStore": STORE, "path": "n.md"}),
            json!({"memoryStore": STORE, "path": "/a/../b"}),
            json!({"memoryStore": STORE, "path": "/n.md", "atVersion": 0}),
            json!({"memoryStore": STORE, "path": "/n.md", "content": "x"}),
        ] {
            let mut bad = bad;
            bad["kind"] = json!("step_memory_read");
            assert_eq!(parse(bad.clone(), false).unwrap_err().0, "document_invalid", "{bad}");
        }
    }

    #[test]
    fn a_write_expects_a_bound_sha_or_absence() {
        let content = json!({"sourceNodeId": "hook", "pointer": "/t"});
        let sha = json!({"sourceNodeId": "r", "pointer": "/document/content_sha256"});
        let w = parse(json!({"memoryStore": STORE, "path": "/n.md", "inputBindings": {"content": content, "expectedSha256": sha}}), true)
            .unwrap()
            .write
            .unwrap();
        assert_eq!(w.expected.unwrap().pointer, "/document/content_sha256");
        let create =
            parse(json!({"memoryStore": STORE, "path": "/n.md", "inputBindings": {"content": content}, "expectedSha256": null}), true);
        assert_eq!(create.unwrap().write.unwrap().expected, None, "null: create only");
        let blind = parse(json!({"memoryStore": STORE, "path": "/n.md", "inputBindings": {"content": content}}), true);
        assert_eq!(blind.unwrap_err().0, "memory_write_unconditional");
        let literal =
            parse(json!({"memoryStore": STORE, "path": "/n.md", "inputBindings": {"content": content}, "expectedSha256": "ab"}), true);
        assert_eq!(literal.unwrap_err().0, "memory_write_unconditional", "a written sha is no read");
        let both = json!({"memoryStore": STORE, "path": "/n.md", "inputBindings": {"content": content, "expectedSha256": sha}, "expectedSha256": null});
        assert_eq!(parse(both, true).unwrap_err().0, "document_invalid");
        assert_eq!(parse(json!({"memoryStore": STORE, "path": "/n.md"}), true).unwrap_err().0, "document_invalid", "no content");
    }
}

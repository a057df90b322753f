//! What the model is given of the Files a user message names: their text
//! inline when it is short, images and PDFs as bytes for providers that take
//! them natively, else a line naming where the File lies in the workspace.
//! The runner mounted each File before the Run (`sync.rs`), so it reads
//! them from the workspace, never from the control plane again.

use crate::Runner;
use crate::tree::Tree;
use checkfu_proto::modelgateway::v1 as mg;
use checkfu_proto::runner::v1 as pb;
use futures_util::StreamExt;
use std::collections::HashMap;

/// Text longer than this many characters is named, not inlined.
const MAX_INLINE_CHARS: usize = 100_000;
/// Images and PDFs larger than this are named, not sent.
const MAX_NATIVE_BYTES: u64 = 5 * 1024 * 1024;

/// A mounted File: where it lies, what it is and how large.
struct Mounted {
    path: String,
    media_type: String,
    size: u64,
}

fn is_text(media_type: &str) -> bool {
    media_type.starts_with("text/")
        || matches!(media_type, "application/json" | "application/xml" | "application/yaml" | "application/x-yaml" | "application/toml")
}

fn is_native(media_type: &str) -> bool {
    matches!(media_type, "image/png" | "image/jpeg" | "image/gif" | "image/webp" | "application/pdf")
}

fn mounted(work: &pb::WorkItem) -> HashMap<String, Mounted> {
    let mounts = crate::work_sandbox::of(work).mounts.into_iter().filter(|m| !m.file_id.is_empty());
    mounts
        .map(|m| {
            let media_type = if m.media_type.is_empty() { "application/octet-stream".into() } else { m.media_type };
            (m.file_id, Mounted { path: m.path, media_type, size: m.size_bytes })
        })
        .collect()
}

/// A whole workspace file of at most `max` bytes.
async fn read_whole(tree: &Tree, rel: &str, max: u64) -> Option<Vec<u8>> {
    let mut chunks = tree.read(rel).await.ok()?;
    let mut out = vec![];
    while let Some(c) = chunks.next().await {
        out.extend(c.ok()?);
        if out.len() as u64 > max {
            return None;
        }
    }
    Some(out)
}

impl Runner {
    /// The workspace a Run's tools see, where this runner can read it.
    fn readable_tree(&self, work: &pb::WorkItem) -> Option<Tree> {
        match &self.kubernetes {
            None => Some(Tree::Local(self.cfg.workspaces.join(&work.session_id))),
            Some(_) => {
                let pods = self.pods_opened.lock().unwrap_or_else(|p| p.into_inner());
                pods.get(&work.run_id).map(|sb| Tree::Pod(Box::new(sb.clone())))
            }
        }
    }

    /// Fills in the File blocks of `messages` from the Run's mounts.
    pub(crate) async fn with_files(&self, work: &pb::WorkItem, mut messages: Vec<mg::Message>) -> Vec<mg::Message> {
        use mg::content_block::Block as B;
        let has_files = messages.iter().flat_map(|m| &m.content).any(|b| matches!(b.block, Some(B::File(_))));
        if !has_files {
            return messages;
        }
        let mounts = mounted(work);
        let tree = self.readable_tree(work);
        for b in messages.iter_mut().flat_map(|m| m.content.iter_mut()) {
            let Some(B::File(f)) = &mut b.block else { continue };
            let Some(m) = mounts.get(&f.file_id) else { continue };
            f.filename = m.path.rsplit('/').next().unwrap_or_default().to_string();
            f.path = m.path.clone();
            f.media_type = m.media_type.clone();
            let Some(tree) = &tree else { continue };
            if is_text(&m.media_type) && m.size <= (MAX_INLINE_CHARS * 4) as u64 {
                if let Some(text) = read_whole(tree, &m.path, m.size).await.and_then(|b| String::from_utf8(b).ok())
                    && text.chars().count() <= MAX_INLINE_CHARS
                {
                    f.text = text;
                }
            } else if is_native(&m.media_type)
                && m.size <= MAX_NATIVE_BYTES
                && let Some(bytes) = read_whole(tree, &m.path, m.size).await
            {
                f.data = bytes;
            }
        }
        messages
    }
}

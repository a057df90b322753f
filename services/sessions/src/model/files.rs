//! Session files (captured from the outputs folder when a Run settles) and
//! the Session's sandbox (its workspace snapshot and expiry).

use checkfu_core::id::{FileId, RunId, SessionId};
use checkfu_core::string_enum;
use serde::{Deserialize, Serialize};

/// The most one file may be to be captured.
pub const MAX_FILE_BYTES: i64 = 64 * 1024 * 1024;
/// The most a Session's captured files may hold together.
pub const MAX_SESSION_BYTES: i64 = 256 * 1024 * 1024;
/// The most files a Session keeps.
pub const MAX_SESSION_FILES: usize = 64;
/// The most a content window returns.
pub const MAX_WINDOW_BYTES: i64 = 8 * 1024 * 1024;
/// The most entries one settlement may record (the rest are refused).
pub const MAX_OFFERED: usize = 1_000;
/// A sandbox lives at most this long, whatever the profile says.
pub const MAX_SANDBOX_DAYS: i64 = 30;

string_enum!(FileStatus { Captured = "captured", TooLarge = "too_large", OverCapacity = "over_capacity" });

#[derive(Debug, Clone, PartialEq)]
pub struct SessionFile {
    pub id: FileId,
    pub session_id: SessionId,
    /// Relative to the outputs folder (`report.txt`, `data/a.csv`).
    pub path: String,
    pub size: i64,
    /// Empty for a file too large to be read.
    pub sha256: String,
    pub status: FileStatus,
    pub run_id: RunId,
    pub captured_ms: i64,
}

/// A file a runner found in the outputs folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offered {
    pub path: String,
    pub size: i64,
    pub sha256: String,
}

/// Decides what becomes of each offered file, given what the Session keeps
/// already (`kept`: captured files by path): files are taken in path order;
/// one over the per-file limit is `too_large`; one that does not fit what
/// is left of the Session's count or bytes is `over_capacity`. A path
/// captured before is replaced by its new version.
pub fn decide(kept: &[SessionFile], offered: &[Offered]) -> Vec<(Offered, FileStatus)> {
    let mut by_path: std::collections::BTreeMap<&str, i64> =
        kept.iter().filter(|f| f.status == FileStatus::Captured).map(|f| (f.path.as_str(), f.size)).collect();
    let mut sorted: Vec<&Offered> = offered.iter().collect();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    let mut out = Vec::with_capacity(sorted.len());
    for o in sorted {
        // The new version replaces the old one's row whatever its status.
        by_path.remove(o.path.as_str());
        let status = if o.size > MAX_FILE_BYTES {
            FileStatus::TooLarge
        } else {
            let bytes: i64 = by_path.values().sum::<i64>() + o.size;
            if by_path.len() + 1 > MAX_SESSION_FILES || bytes > MAX_SESSION_BYTES { FileStatus::OverCapacity } else { FileStatus::Captured }
        };
        if status == FileStatus::Captured {
            by_path.insert(o.path.as_str(), o.size);
        }
        out.push((o.clone(), status));
    }
    out
}

/// A path as the outputs folder names it: relative, no `..`, no empty or
/// `.` segments, at most 1,024 bytes.
pub fn valid_path(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= 1024
        && !p.starts_with('/')
        && !p.contains('\0')
        && p.split('/').all(|s| !s.is_empty() && s != "." && s != "..")
}

/// A Session's sandbox as the control plane knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxState {
    pub session_id: SessionId,
    /// The manifest blob of the newest snapshot; empty before the first.
    pub snapshot_sha256: String,
    pub materialized_ms: i64,
    /// Fixed when it first materialised; activity never extends it.
    pub expires_ms: i64,
    /// Profile fields the plane running it does not enforce, with why.
    pub unenforced: Vec<Unenforced>,
    pub updated_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unenforced {
    pub field: String,
    pub reason: String,
}

/// When a sandbox materialised at `now_ms` expires: the earlier of the
/// profile's retention and 30 days.
pub fn expiry(now_ms: i64, retention_days: i64) -> i64 {
    now_ms + retention_days.clamp(1, MAX_SANDBOX_DAYS) * 86_400_000
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offered(path: &str, size: i64) -> Offered {
        Offered { path: path.into(), size, sha256: "x".into() }
    }

    #[test]
    fn files_past_a_limit_are_recorded_with_their_reason() {
        let mut many: Vec<Offered> = (0..65).map(|i| offered(&format!("f{i:02}"), 1)).collect();
        many.push(offered("big", MAX_FILE_BYTES + 1));
        let d = decide(&[], &many);
        let status = |p: &str| d.iter().find(|(o, _)| o.path == p).map(|(_, s)| *s);
        assert_eq!(status("big"), Some(FileStatus::TooLarge));
        assert_eq!(status("f63"), Some(FileStatus::Captured), "the 64th fits");
        assert_eq!(status("f64"), Some(FileStatus::OverCapacity), "the 65th does not");
        let d = decide(&[], &[offered("a", 200 << 20), offered("b", 60 << 20), offered("c", 50 << 20)]);
        assert_eq!(d.iter().map(|(_, s)| *s).collect::<Vec<_>>(), [FileStatus::TooLarge, FileStatus::Captured, FileStatus::Captured]);
        let d =
            decide(&[], &[offered("a", 64 << 20), offered("b", 64 << 20), offered("c", 64 << 20), offered("d", 64 << 20), offered("e", 1)]);
        assert_eq!(d[4].1, FileStatus::OverCapacity, "256 MiB are full");
    }

    #[test]
    fn a_recaptured_path_replaces_its_old_version() {
        let kept: Vec<SessionFile> = (0..64)
            .map(|i| SessionFile {
                id: FileId::mint(),
                session_id: checkfu_core::testing::tid("sess_1"),
                path: format!("f{i:02}"),
                size: 1,
                sha256: "x".into(),
                status: FileStatus::Captured,
                run_id: checkfu_core::testing::tid("run_1"),
                captured_ms: 1,
            })
            .collect();
        assert_eq!(decide(&kept, &[offered("f00", 5)])[0].1, FileStatus::Captured);
        assert_eq!(decide(&kept, &[offered("new", 5)])[0].1, FileStatus::OverCapacity);
    }

    #[test]
    fn paths_stay_inside_the_outputs_folder() {
        assert!(valid_path("a/b.txt"));
        for bad in ["", "/etc/passwd", "../x", "a/../b", "a//b", "./a"] {
            assert!(!valid_path(bad), "{bad:?}");
        }
        assert_eq!(expiry(0, 90), 30 * 86_400_000);
        assert_eq!(expiry(0, 7), 7 * 86_400_000);
    }
}

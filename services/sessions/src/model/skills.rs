//! Skills (api.md §16.6): a named bundle of files opened by `SKILL.md`,
//! kept as immutable versions, and the references an Agent's definition
//! makes to them.

use checkfu_core::id::{EnvironmentId, PrincipalId, SkillId};
use checkfu_core::{Code, Error, Result, sha256_hex, string_enum};
use serde::{Deserialize, Serialize};

/// Files one version holds at most.
pub const MAX_SKILL_FILES: usize = 512;
/// Bytes one version holds at most (413 past it).
pub const MAX_SKILL_BYTES: usize = 8 * 1024 * 1024;
/// A path's length at most, in bytes.
pub const MAX_SKILL_PATH: usize = 256;
/// Skills one definition names at most.
pub const MAX_SKILLS: usize = 500;
/// The folder of the workspace skills are mounted at (`skills/<name>/`).
pub const SKILLS_DIR: &str = "skills";
/// The file that opens a bundle.
pub const SKILL_MD: &str = "SKILL.md";

string_enum!(SkillStatus { Active = "active", Archived = "archived" });

#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    pub id: SkillId,
    pub environment_id: EnvironmentId,
    pub name: String,
    pub description: String,
    pub latest_version: i64,
    pub status: SkillStatus,
    pub created_by: PrincipalId,
    pub created_ms: i64,
    pub updated_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillFile {
    pub path: String,
    pub size_bytes: i64,
    pub sha256: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SkillVersion {
    pub skill_id: SkillId,
    pub version: i64,
    pub name: String,
    pub description: String,
    pub files: Vec<SkillFile>,
    pub created_by: PrincipalId,
    pub created_ms: i64,
}

/// A bundle as checked: its front matter and its files with their bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Bundle {
    pub name: String,
    pub description: String,
    /// In path order.
    pub files: Vec<(SkillFile, Vec<u8>)>,
}

fn path_invalid(path: &str, why: &str) -> Error {
    Error::invalid_field("files.path", format!("{path:?} {why}")).with_reason("path_invalid")
}

/// A relative path of segments `[A-Za-z0-9._-]`, none `.` or `..`, at most
/// 256 bytes.
fn check_path(path: &str) -> Result<()> {
    if path.is_empty() || path.len() > MAX_SKILL_PATH {
        return Err(path_invalid(path, "is not 1 to 256 bytes"));
    }
    for seg in path.split('/') {
        if seg.is_empty() || seg == "." || seg == ".." {
            return Err(path_invalid(path, "is not a relative path of named segments"));
        }
        if !seg.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)) {
            return Err(path_invalid(path, "has a segment outside [A-Za-z0-9._-]"));
        }
    }
    Ok(())
}

/// `name` and `description` from the front matter that opens `SKILL.md`
/// (`checkfu_core::skill_md`), refused as `front_matter_invalid`.
fn front_matter(text: &[u8]) -> Result<(String, String)> {
    checkfu_core::skill_md::front_matter(text)
        .map_err(|why| Error::invalid_field("SKILL.md", format!("SKILL.md's front matter {why}")).with_reason("front_matter_invalid"))
}

impl Bundle {
    /// Checks a bundle as sent: a top directory every path shares is
    /// stripped; paths are checked; `SKILL.md` must be there and open with
    /// front matter; the limits hold.
    pub fn parse(files: Vec<(String, Vec<u8>)>) -> Result<Bundle> {
        if files.len() > MAX_SKILL_FILES {
            return Err(Error::new(Code::PayloadTooLarge, format!("a skill holds at most {MAX_SKILL_FILES} files")));
        }
        let total: usize = files.iter().map(|(_, b)| b.len()).sum();
        if total > MAX_SKILL_BYTES {
            return Err(Error::new(Code::PayloadTooLarge, format!("a skill holds at most {MAX_SKILL_BYTES} bytes")));
        }
        let top = shared_top(&files);
        let mut out: Vec<(SkillFile, Vec<u8>)> = Vec::with_capacity(files.len());
        for (path, bytes) in files {
            let path = match &top {
                Some(t) => path[t.len() + 1..].to_string(),
                None => path,
            };
            check_path(&path)?;
            let f = SkillFile { path, size_bytes: bytes.len() as i64, sha256: sha256_hex(&bytes) };
            out.push((f, bytes));
        }
        out.sort_by(|a, b| a.0.path.cmp(&b.0.path));
        if let Some(w) = out.windows(2).find(|w| w[0].0.path == w[1].0.path) {
            return Err(path_invalid(&w[0].0.path, "is sent twice"));
        }
        let md = out
            .iter()
            .find(|(f, _)| f.path == SKILL_MD)
            .ok_or_else(|| Error::invalid_field("files", "a skill needs a SKILL.md at its top").with_reason("skill_md_missing"))?;
        let (name, description) = front_matter(&md.1)?;
        Ok(Bundle { name, description, files: out })
    }

    pub fn entries(&self) -> Vec<SkillFile> {
        self.files.iter().map(|(f, _)| f.clone()).collect()
    }
}

/// The top directory every path shares (`greeting/` of `greeting/SKILL.md`
/// and `greeting/scripts/hi.sh`), if any.
fn shared_top(files: &[(String, Vec<u8>)]) -> Option<String> {
    let first = files.first()?.0.split_once('/')?.0.to_string();
    files.iter().all(|(p, _)| p.split_once('/').is_some_and(|(t, rest)| t == first && !rest.is_empty())).then_some(first)
}

/// A skill an Agent's definition names (written `{skill_id, version?}` or
/// as the bare id). Publication fills in the version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillRef {
    pub skill_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
}

impl SkillRef {
    pub fn check(&self, field: &str) -> Result<()> {
        SkillId::check(&format!("{field}.skill_id"), &self.skill_id)?;
        if self.version.is_some_and(|v| v < 1) {
            return Err(Error::invalid_field(&format!("{field}.version"), "a skill version is 1 or more"));
        }
        Ok(())
    }
}

/// The refusal of a change to an archived skill.
pub fn skill_archived(s: &Skill) -> Error {
    Error::conflict(format!("skill {} is archived", s.id)).with_reason("skill_archived")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md(name: &str) -> Vec<u8> {
        format!("---\nname: {name}\ndescription: Says hello\n---\n# Greeting\n").into_bytes()
    }

    #[test]
    fn a_bundle_keeps_its_front_matter_and_loses_a_shared_top() {
        let b = Bundle::parse(vec![("greeting/SKILL.md".into(), md("greeting")), ("greeting/scripts/hi.sh".into(), b"echo hi".to_vec())])
            .expect("bundle");
        assert_eq!((b.name.as_str(), b.description.as_str()), ("greeting", "Says hello"));
        let paths: Vec<&str> = b.files.iter().map(|(f, _)| f.path.as_str()).collect();
        assert_eq!(paths, ["SKILL.md", "scripts/hi.sh"]);
        assert_eq!(b.files[1].0.sha256, sha256_hex(b"echo hi"));
    }

    #[test]
    fn bad_bundles_say_why() {
        let reason = |files: Vec<(&str, Vec<u8>)>| {
            let e = Bundle::parse(files.into_iter().map(|(p, b)| (p.to_string(), b)).collect()).expect_err("refused");
            (e.code, e.details["reason"].as_str().unwrap_or_default().to_string())
        };
        assert_eq!(reason(vec![("a.txt", b"x".to_vec())]).1, "skill_md_missing");
        assert_eq!(reason(vec![("SKILL.md", b"# no front matter".to_vec())]).1, "front_matter_invalid");
        assert_eq!(reason(vec![("SKILL.md", md("Bad Name"))]).1, "front_matter_invalid");
        assert_eq!(reason(vec![("SKILL.md", b"---\nname: x\n---\n".to_vec())]).1, "front_matter_invalid");
        assert_eq!(reason(vec![("SKILL.md", md("x")), ("../etc", vec![])]).1, "path_invalid");
        assert_eq!(reason(vec![("SKILL.md", md("x")), ("a b", vec![])]).1, "path_invalid");
        assert_eq!(reason(vec![("SKILL.md", md("x")), ("SKILL.md", md("x"))]).1, "path_invalid");
        assert_eq!(reason(vec![("SKILL.md", md("x")), ("big", vec![0; MAX_SKILL_BYTES])]).0, Code::PayloadTooLarge);
    }
}

//! Files people upload (api.md §16.7) and the copies a Session keeps of the
//! ones it was given.

use checkfu_core::features::Disabled;
use checkfu_core::id::{EnvironmentId, FileId, PrincipalId, SessionId};
use checkfu_core::{Code, Error, Result};
use serde_json::Value;

/// What the installation says about uploads and skills.
#[derive(Debug, Clone)]
pub struct UploadSettings {
    pub disabled: Disabled,
    /// Days a File lives without `expires_in_seconds`; 0 keeps it for ever.
    pub retention_days: i64,
}

impl Default for UploadSettings {
    fn default() -> Self {
        UploadSettings { disabled: Disabled::default(), retention_days: 30 }
    }
}

/// The largest upload.
pub const MAX_UPLOAD_BYTES: u64 = 64 * 1024 * 1024;
/// The longest filename, in bytes.
pub const MAX_FILENAME_BYTES: usize = 255;
/// `expires_in_seconds` lies between an hour and a year.
pub const MIN_EXPIRES_SECONDS: i64 = 3_600;
pub const MAX_EXPIRES_SECONDS: i64 = 31_536_000;
/// File blocks one message may carry.
pub const MAX_FILE_BLOCKS: usize = 20;
/// Images a model is given: these types, at most 5 MiB.
pub const IMAGE_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];
pub const MAX_IMAGE_BYTES: i64 = 5 * 1024 * 1024;
/// The folder of the workspace Files are copied to (`uploads/<id>/<name>`).
pub const UPLOADS_DIR: &str = "uploads";

#[derive(Debug, Clone, PartialEq)]
pub struct UploadedFile {
    pub id: FileId,
    pub environment_id: EnvironmentId,
    pub filename: String,
    pub media_type: String,
    pub size_bytes: i64,
    pub sha256: String,
    pub created_by: PrincipalId,
    pub created_ms: i64,
    /// 0: never.
    pub expires_ms: i64,
}

/// A Session's own copy of a File it was given.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionUpload {
    pub session_id: SessionId,
    pub file_id: FileId,
    pub filename: String,
    pub media_type: String,
    pub size_bytes: i64,
    pub sha256: String,
    pub added_ms: i64,
}

impl SessionUpload {
    /// Where the File appears in the Session's workspace.
    pub fn path(&self) -> String {
        format!("{UPLOADS_DIR}/{}/{}", self.file_id, self.filename)
    }
}

/// A filename as uploaded: 1–255 bytes, no `/` or NUL, and not `.` or `..`
/// (it becomes a path segment in the workspace).
pub fn check_filename(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_FILENAME_BYTES {
        return Err(Error::invalid_field("file.filename", "a filename is 1 to 255 bytes"));
    }
    if name.contains(['/', '\0']) || name == "." || name == ".." {
        return Err(Error::invalid_field("file.filename", "a filename holds no '/' or NUL and is not '.' or '..'"));
    }
    Ok(())
}

/// The media type a part declared (its essence, lower-cased), or
/// `application/octet-stream` when it declared none or nothing valid.
pub fn media_type(declared: &str) -> String {
    let essence = declared.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    let token = |s: &str| !s.is_empty() && s.len() <= 127 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b));
    match essence.split_once('/') {
        Some((t, sub)) if token(t) && token(sub) => essence,
        _ => "application/octet-stream".into(),
    }
}

/// When a File created at `created_ms` expires: after `expires_in_seconds`
/// when given (an hour to a year), else after the installation's retention
/// (`0` days: never, which is `0`).
pub fn upload_expiry(created_ms: i64, expires_in_seconds: Option<i64>, retention_days: i64) -> Result<i64> {
    match expires_in_seconds {
        Some(s) if !(MIN_EXPIRES_SECONDS..=MAX_EXPIRES_SECONDS).contains(&s) => Err(Error::invalid_field(
            "expires_in_seconds",
            format!("expires_in_seconds lies between {MIN_EXPIRES_SECONDS} and {MAX_EXPIRES_SECONDS}"),
        )),
        Some(s) => Ok(created_ms + s * 1000),
        None if retention_days <= 0 => Ok(0),
        None => Ok(created_ms + retention_days * 86_400_000),
    }
}

/// A content block naming a File: `{type:"document"|"image", source:{type:"file", file_id}, title?}`.
#[derive(Debug, Clone, PartialEq)]
pub struct FileBlock {
    pub file_id: FileId,
    pub image: bool,
}

/// The file blocks of a message's content (`content[i]`), checked for shape;
/// other blocks are left to the caller. At most [`MAX_FILE_BLOCKS`].
pub fn file_blocks(content: &Value) -> Result<Vec<FileBlock>> {
    let Some(items) = content.as_array() else { return Ok(vec![]) };
    let mut out = vec![];
    for (i, b) in items.iter().enumerate() {
        let kind = b.get("type").and_then(Value::as_str).unwrap_or_default();
        if kind != "document" && kind != "image" {
            continue;
        }
        let field = format!("payload.content[{i}]");
        let source = b.get("source").filter(|s| s.get("type").and_then(Value::as_str) == Some("file")).ok_or_else(|| {
            Error::invalid_field(&format!("{field}.source"), "a document or image block names a File: source:{type:\"file\", file_id}")
        })?;
        let id = source.get("file_id").and_then(Value::as_str).unwrap_or_default();
        let file_id = FileId::parse(&format!("{field}.source.file_id"), id)?;
        if let Some(t) = b.get("title").filter(|t| !t.is_null())
            && t.as_str().is_none_or(|t| t.len() > 500)
        {
            return Err(Error::invalid_field(&format!("{field}.title"), "a title is a string of at most 500 bytes"));
        }
        if let Some(k) = b.as_object().and_then(|o| o.keys().find(|k| !["type", "source", "title"].contains(&k.as_str()))) {
            return Err(Error::invalid_field(&format!("{field}.{k}"), "a file block holds type, source and title only"));
        }
        out.push(FileBlock { file_id, image: kind == "image" });
    }
    if out.len() > MAX_FILE_BLOCKS {
        return Err(Error::invalid_field("payload.content", format!("a message carries at most {MAX_FILE_BLOCKS} file blocks")));
    }
    Ok(out)
}

/// A File given to a Session must be in its Environment and, as an image,
/// a type and size a model takes.
pub fn check_usable(f: &UploadedFile, environment_id: &EnvironmentId, image: bool) -> Result<()> {
    if &f.environment_id != environment_id {
        return Err(Error::invalid_field("file_id", format!("file {} is not in the Session's environment {environment_id}", f.id))
            .with_reason("other_environment"));
    }
    if image && (!IMAGE_TYPES.contains(&f.media_type.as_str()) || f.size_bytes > MAX_IMAGE_BYTES) {
        return Err(Error::new(
            Code::Invalid,
            format!("file {} is not an image a model takes: png, jpeg, gif or webp of at most 5 MiB", f.id),
        )
        .with_details(serde_json::json!({"field": "source.file_id"})));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn filenames_are_one_segment() {
        assert!(check_filename("notes.txt").is_ok());
        for bad in ["", "a/b", "a\0b", ".", ".."] {
            assert!(check_filename(bad).is_err(), "{bad:?}");
        }
        assert!(check_filename(&"x".repeat(256)).is_err());
        assert!(check_filename(&"x".repeat(255)).is_ok());
    }

    #[test]
    fn media_types_keep_their_essence() {
        assert_eq!(media_type("text/plain; charset=utf-8"), "text/plain");
        assert_eq!(media_type("Image/PNG"), "image/png");
        assert_eq!(media_type(""), "application/octet-stream");
        assert_eq!(media_type("nonsense"), "application/octet-stream");
    }

    #[test]
    fn expiry_is_bounded_and_defaults_to_retention() {
        assert_eq!(upload_expiry(1000, Some(3600), 30).expect("ok"), 1000 + 3_600_000);
        assert!(upload_expiry(0, Some(3599), 30).is_err());
        assert!(upload_expiry(0, Some(31_536_001), 30).is_err());
        assert_eq!(upload_expiry(1000, None, 30).expect("ok"), 1000 + 30 * 86_400_000);
        assert_eq!(upload_expiry(1000, None, 0).expect("ok"), 0, "0 days keeps Files for ever");
    }

    #[test]
    fn file_blocks_are_read_from_content() {
        let id = FileId::mint();
        let c =
            json!([{"type": "text", "text": "hi"}, {"type": "document", "source": {"type": "file", "file_id": id.as_str()}, "title": "n"}]);
        assert_eq!(file_blocks(&c).expect("ok"), vec![FileBlock { file_id: id.clone(), image: false }]);
        assert!(file_blocks(&json!([{"type": "image", "source": {"type": "url", "url": "x"}}])).is_err());
        assert!(file_blocks(&json!([{"type": "image", "source": {"type": "file", "file_id": "nope"}}])).is_err());
        let many: Vec<Value> = (0..21).map(|_| json!({"type": "document", "source": {"type": "file", "file_id": id.as_str()}})).collect();
        assert!(file_blocks(&Value::Array(many)).is_err());
    }
}

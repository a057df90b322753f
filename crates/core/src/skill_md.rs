//! The front matter that opens a skill's `SKILL.md`: a YAML block between
//! `---` lines naming the skill (1–64 of `a-z0-9-`) and describing it
//! (1–1,024 characters). Read where a bundle is uploaded and where an
//! Automation proposes one, with one meaning.

use serde::Deserialize;

#[derive(Deserialize)]
struct FrontMatter {
    name: Option<String>,
    description: Option<String>,
}

/// `(name, description)`, or why the front matter cannot be read (a phrase
/// that follows "the front matter …").
pub fn front_matter(text: &[u8]) -> Result<(String, String), String> {
    let text = std::str::from_utf8(text).map_err(|_| "is not UTF-8".to_string())?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text.strip_prefix("---").and_then(|r| r.strip_prefix('\n').or_else(|| r.strip_prefix("\r\n")));
    let rest = rest.ok_or("is missing: the file opens with a line '---'")?;
    let lines = rest.split('\n').scan(0usize, |at, l| {
        let start = *at;
        *at += l.len() + 1;
        Some((start, l))
    });
    let close = lines.filter(|(_, l)| l.trim_end() == "---").map(|(s, _)| s).next().ok_or("is not closed by '---'")?;
    let fm: FrontMatter = serde_saphyr::from_str(&rest[..close]).map_err(|e| format!("is not valid YAML: {e}"))?;
    let name = fm.name.unwrap_or_default();
    if name.is_empty() || name.len() > 64 || !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
        return Err("needs a name of 1 to 64 characters of a-z, 0-9 and '-'".into());
    }
    let description = fm.description.unwrap_or_default();
    let chars = description.chars().count();
    if chars == 0 || chars > 1024 {
        return Err("needs a description of 1 to 1,024 characters".into());
    }
    Ok((name, description))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_and_a_description_between_dashes() {
        assert_eq!(front_matter(b"---\nname: greet\ndescription: Says hi\n---\n# Greet\n"), Ok(("greet".into(), "Says hi".into())));
        assert!(front_matter(b"# no front matter").is_err());
        assert!(front_matter(b"---\nname: Bad Name\ndescription: x\n---\n").is_err());
        assert!(front_matter(b"---\nname: x\n---\n").is_err(), "no description");
        assert!(front_matter(b"---\nname: x\ndescription: y\n").is_err(), "not closed");
    }
}

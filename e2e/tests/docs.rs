//! The docs stand alone: every contract section the code or the docs cite
//! (`api.md §12.7`, or a bare `§12.7`) has its heading in
//! docs/api.md, no file points outside the repository, and every
//! link between the docs' pages reaches a page and a heading that exist.
#![cfg(test)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace").to_path_buf()
}

/// Every text file of the repository, without build outputs and installed
/// packages (they are not the repository's words).
fn text_files() -> Vec<(PathBuf, String)> {
    const SKIP: [&str; 6] = [".git", "target", "node_modules", "build-test", "dist", ".checkfu"];
    let mut out = vec![];
    let mut dirs = vec![root()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if path.is_dir() {
                if !SKIP.contains(&name.as_str()) {
                    dirs.push(path);
                }
            } else if let Ok(text) = std::fs::read_to_string(&path) {
                out.push((path, text));
            }
        }
    }
    out
}

/// The section numbers cited in `text`: `§` and a dotted number, except
/// an RFC's (`RFC 6749 §5.2`).
fn citations(text: &str) -> Vec<String> {
    let mut found = vec![];
    for (at, _) in text.match_indices('§') {
        let number: String = text[at + '§'.len_utf8()..].chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
        let number = number.trim_end_matches('.').to_string();
        let before = &text[text[..at].char_indices().rev().nth(12).map(|(i, _)| i).unwrap_or(0)..at];
        if !number.is_empty() && !before.contains("RFC ") {
            found.push(number);
        }
    }
    found
}

/// A heading's anchor as the usual Markdown renderers make it.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' | '-' => Some('-'),
            '_' => Some('_'),
            c if c.is_alphanumeric() => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

fn headings(markdown: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = vec![];
    for line in markdown.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.push(line.trim_start_matches('#').trim().to_string());
        }
    }
    out
}

#[test]
fn every_cited_section_is_in_the_repository() {
    let contract = std::fs::read_to_string(root().join("docs/api.md")).unwrap();
    let sections: BTreeSet<String> =
        headings(&contract).iter().filter_map(|h| h.strip_prefix('§')).map(|h| h.split(' ').next().unwrap_or("").to_string()).collect();
    assert!(sections.contains("17.13") && sections.contains("1"), "docs/api.md has a heading per section: {sections:?}");
    let outside = ["..", "/shared"].concat();
    let mut missing = BTreeSet::new();
    let mut pointing_out = vec![];
    let mut cited = 0;
    for (path, text) in text_files() {
        let shown = path.strip_prefix(root()).unwrap().display().to_string();
        if text.contains(&outside) {
            pointing_out.push(shown.clone());
        }
        for n in citations(&text) {
            cited += 1;
            if !sections.contains(&n) {
                missing.insert(format!("§{n} in {shown}"));
            }
        }
    }
    assert!(cited > 100, "the scan reads the code's citations (found {cited})");
    assert!(pointing_out.is_empty(), "files that point outside the repository: {pointing_out:?}");
    assert!(missing.is_empty(), "cited sections docs/api.md does not hold: {missing:?}");
}

#[test]
fn links_between_the_docs_reach_a_page_and_a_heading() {
    let docs = root().join("docs");
    let mut broken = vec![];
    let mut checked = 0;
    for entry in std::fs::read_dir(&docs).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (at, _) in text.match_indices("](") {
            let target: String = text[at + 2..].chars().take_while(|c| *c != ')').collect();
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let page = if file.is_empty() { path.clone() } else { docs.join(file) };
            checked += 1;
            let Ok(body) = std::fs::read_to_string(&page) else {
                if !page.exists() {
                    broken.push(format!("{}: {target}", path.display()));
                }
                continue;
            };
            if !anchor.is_empty() && page.extension().is_some_and(|e| e == "md") && !headings(&body).iter().any(|h| slug(h) == anchor) {
                broken.push(format!("{}: {target}", path.display()));
            }
        }
    }
    assert!(checked > 50, "the docs link to each other (found {checked})");
    assert!(broken.is_empty(), "links to no page or no heading: {broken:#?}");
}

#[test]
fn the_scan_tells_a_section_from_an_rfc_and_slugs_like_a_renderer() {
    assert_eq!(citations("see api.md §12.7. And §5, not RFC 6749 §5.2."), ["12.7", "5"]);
    assert_eq!(slug("Budgets — what a Session may spend"), "budgets--what-a-session-may-spend");
    assert_eq!(slug("Home — `/console/`"), "home--console");
    assert_eq!(slug("§12.7 AutomationGraph"), "127-automationgraph");
}

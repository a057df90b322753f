//! The deterministic pass every Dream ends with (api.md §13.5): a non-empty
//! line equal to an earlier one in its document is removed, then documents
//! with equal content collapse to the lexicographically smallest path.
//! Lines go first so two documents that differ only by repeats still
//! collapse: the pass is idempotent (run twice, it changes nothing more).

use std::collections::{BTreeMap, HashSet};

/// Documents by path; a `BTreeMap` orders paths by byte, as the store does.
pub type Tree = BTreeMap<String, String>;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Curated {
    pub tree: Tree,
    pub duplicate_documents_removed: i64,
    pub duplicate_lines_removed: i64,
}

/// The document without repeats of its earlier non-empty lines (a line of
/// only whitespace counts as empty and stays), and how many it lost.
pub fn dedupe_lines(content: &str) -> (String, i64) {
    let mut seen = HashSet::new();
    let mut removed = 0;
    let kept: Vec<&str> = content
        .split('\n')
        .filter(|line| {
            if line.trim().is_empty() || seen.insert(*line) {
                true
            } else {
                removed += 1;
                false
            }
        })
        .collect();
    (kept.join("\n"), removed)
}

pub fn curate(tree: &Tree) -> Curated {
    let mut out = Curated::default();
    let mut by_content: HashSet<String> = HashSet::new();
    for (path, content) in tree {
        let (content, removed) = dedupe_lines(content);
        out.duplicate_lines_removed += removed;
        // Paths come smallest first: the first holder of a content keeps it.
        if by_content.insert(content.clone()) {
            out.tree.insert(path.clone(), content);
        } else {
            out.duplicate_documents_removed += 1;
        }
    }
    out
}

/// The changes from `before` to `after`: `(path, Some(content))` to write,
/// `(path, None)` to delete, by path.
pub fn diff(before: &Tree, after: &Tree) -> Vec<(String, Option<String>)> {
    let mut out: Vec<(String, Option<String>)> = before.keys().filter(|p| !after.contains_key(*p)).map(|p| (p.clone(), None)).collect();
    out.extend(after.iter().filter(|(p, c)| before.get(*p) != Some(*c)).map(|(p, c)| (p.clone(), Some(c.clone()))));
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(docs: &[(&str, &str)]) -> Tree {
        docs.iter().map(|(p, c)| (p.to_string(), c.to_string())).collect()
    }

    #[test]
    fn repeated_non_empty_lines_go_and_blank_ones_stay() {
        assert_eq!(dedupe_lines("a\nb\na\n\n\nb\nc\n"), ("a\nb\n\n\nc\n".to_string(), 2));
        assert_eq!(dedupe_lines("x\n  \n  \nx"), ("x\n  \n  ".to_string(), 1));
        assert_eq!(dedupe_lines(""), (String::new(), 0));
    }

    #[test]
    fn equal_documents_collapse_to_the_smallest_path() {
        let c = curate(&tree(&[("/b.md", "same"), ("/a.md", "same"), ("/c.md", "other"), ("/B.md", "same")]));
        assert_eq!(c.tree, tree(&[("/B.md", "same"), ("/c.md", "other")]), "uppercase sorts first by byte");
        assert_eq!(c.duplicate_documents_removed, 2);
    }

    #[test]
    fn documents_equal_once_their_repeats_go_collapse_too_and_the_pass_is_idempotent() {
        let c = curate(&tree(&[("/a.md", "x\nx\n"), ("/b.md", "x\n")]));
        assert_eq!(c.tree, tree(&[("/a.md", "x\n")]));
        assert_eq!((c.duplicate_lines_removed, c.duplicate_documents_removed), (1, 1));
        assert_eq!(curate(&c.tree).tree, c.tree);
    }

    #[test]
    fn the_diff_names_deletions_and_writes_by_path() {
        let before = tree(&[("/a.md", "1"), ("/b.md", "2"), ("/c.md", "3")]);
        let after = tree(&[("/a.md", "1"), ("/c.md", "4"), ("/d.md", "5")]);
        assert_eq!(
            diff(&before, &after),
            vec![("/b.md".into(), None), ("/c.md".into(), Some("4".into())), ("/d.md".into(), Some("5".into()))]
        );
    }
}

//! List paging: `limit` (default 20, at most 100) and an opaque `page` token
//! that encodes the last id returned. Newest first means descending id order.

use crate::error::{Error, Result};

pub const DEFAULT_LIMIT: u32 = 20;
pub const MAX_LIMIT: u32 = 100;

/// A validated page request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    pub limit: u32,
    /// Return only items whose id sorts before this one.
    pub before_id: Option<String>,
}

impl PageRequest {
    /// `limit == 0` means the default; anything over `max` is refused.
    pub fn parse(limit: u32, page: &str, max: u32, default: u32) -> Result<Self> {
        if limit > max {
            return Err(Error::invalid_field("limit", format!("limit must be between 1 and {max}")));
        }
        let before_id = if page.is_empty() { None } else { Some(decode_token(page)?) };
        Ok(PageRequest { limit: if limit == 0 { default } else { limit }, before_id })
    }

    pub fn standard(limit: u32, page: &str) -> Result<Self> {
        Self::parse(limit, page, MAX_LIMIT, DEFAULT_LIMIT)
    }

    /// The id a page's rows sort before: the token's, or past every id (ids
    /// are ASCII letters, digits and `_`).
    pub fn before(&self) -> String {
        self.before_id.clone().unwrap_or_else(|| "\u{7f}".into())
    }

    /// Fetch one more than asked to learn whether another page exists.
    pub fn fetch_limit(&self) -> i64 {
        i64::from(self.limit) + 1
    }

    /// Trims the extra row and produces the next page token.
    pub fn finish<T>(&self, rows: Vec<T>, id_of: impl Fn(&T) -> &str) -> (Vec<T>, String) {
        self.trim(rows, |r| encode_token(id_of(r)))
    }

    /// For a list paged by a number (versions, revisions; newest first):
    /// the number this page's rows are below, `None` on the first page.
    pub fn before_number(&self) -> Result<Option<i64>> {
        self.before_id.as_deref().map(|b| b.parse::<i64>().map_err(|_| not_a_token())).transpose()
    }

    /// [`PageRequest::finish`] for a list paged by a number.
    pub fn finish_numbered<T>(&self, rows: Vec<T>, number_of: impl Fn(&T) -> i64) -> (Vec<T>, String) {
        self.trim(rows, |r| encode_token(&number_of(r).to_string()))
    }

    fn trim<T>(&self, mut rows: Vec<T>, token_of: impl Fn(&T) -> String) -> (Vec<T>, String) {
        if rows.len() > self.limit as usize {
            rows.truncate(self.limit as usize);
            let next = rows.last().map(token_of).unwrap_or_default();
            (rows, next)
        } else {
            (rows, String::new())
        }
    }
}

fn not_a_token() -> Error {
    Error::invalid_field("page", "page is not a token this API issued")
}

pub fn encode_token(id: &str) -> String {
    format!("p1{}", hex::encode(id))
}

pub fn decode_token(token: &str) -> Result<String> {
    token
        .strip_prefix("p1")
        .and_then(|h| hex::decode(h).ok())
        // Any bytes position the cursor (ids compare as text), so any
        // token of the documented form is accepted.
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .ok_or_else(not_a_token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paging_round_trip() {
        let p = PageRequest::standard(2, "").expect("valid");
        let (rows, next) = p.finish(vec!["c", "b", "a"], |s| s);
        assert_eq!(rows, vec!["c", "b"]);
        let p2 = PageRequest::standard(2, &next).expect("valid");
        assert_eq!(p2.before_id.as_deref(), Some("b"));
        assert!(PageRequest::standard(101, "").is_err());
        assert!(PageRequest::standard(1, "garbage").is_err());
        assert_eq!(PageRequest::standard(0, "").expect("valid").limit, 20);
    }

    #[test]
    fn numbered_paging_round_trip() {
        let first = PageRequest::standard(2, "").expect("valid");
        assert_eq!(first.before_number().expect("first page"), None);
        let (rows, next) = first.finish_numbered(vec![9, 8, 7], |n| *n);
        assert_eq!(rows, vec![9, 8]);
        assert_eq!(PageRequest::standard(2, &next).expect("valid").before_number().expect("number"), Some(8));
        let (_, last) = first.finish_numbered(vec![2], |n| *n);
        assert_eq!(last, "", "no token after the last page");
        let not_numbered = PageRequest::standard(2, &encode_token("agt_1")).expect("a token");
        assert!(not_numbered.before_number().is_err(), "an id token is no number");
    }
}

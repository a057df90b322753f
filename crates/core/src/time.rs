//! Timestamps are stored as integer milliseconds since the epoch (portable
//! across SQLite and PostgreSQL) and shown as RFC 3339 UTC with milliseconds.

use time::OffsetDateTime;
use time::macros::format_description;

pub fn now_ms() -> i64 {
    (OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
}

/// `2026-11-30T12:00:00.123Z`.
pub fn rfc3339(ms: i64) -> String {
    let fmt = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok().and_then(|t| t.format(&fmt).ok()).unwrap_or_default()
}

/// Empty for "never" (a zero or negative timestamp).
pub fn rfc3339_opt(ms: Option<i64>) -> String {
    ms.filter(|m| *m > 0).map(rfc3339).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_utc_millis() {
        assert_eq!(super::rfc3339(1_796_040_000_123), "2026-11-30T12:00:00.123Z");
    }
}

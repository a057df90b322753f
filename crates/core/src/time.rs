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

/// An RFC 3339 timestamp with an explicit offset (`Z` or `±hh:mm`) and at
/// most `max_fraction` fraction digits, as milliseconds; `None` otherwise.
pub fn parse_rfc3339(s: &str, max_fraction: usize) -> Option<i64> {
    let time_part = s.get(s.find(['T', 't'])? + 1..)?;
    if let Some(dot) = time_part.find('.') {
        let digits = time_part[dot + 1..].bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > max_fraction {
            return None;
        }
    }
    let t = OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_utc_millis() {
        assert_eq!(super::rfc3339(1_796_040_000_123), "2026-11-30T12:00:00.123Z");
    }

    #[test]
    fn parses_offsets_and_bounds_fractions() {
        assert_eq!(super::parse_rfc3339("2026-11-30T14:00:00.123+02:00", 3), Some(1_796_040_000_123));
        assert_eq!(super::parse_rfc3339("2026-11-30T12:00:00Z", 3), Some(1_796_040_000_000));
        assert_eq!(super::parse_rfc3339("2026-11-30T12:00:00.1234Z", 3), None, "four fraction digits");
        assert_eq!(super::parse_rfc3339("2026-11-30T12:00:00", 3), None, "no offset");
        assert_eq!(super::parse_rfc3339("2026-11-30", 3), None);
    }
}

//! RFC 3339 timestamps without a date library.

use std::time::{SystemTime, UNIX_EPOCH};

/// `t` as RFC 3339 in UTC, whole seconds: `2026-11-28T11:00:00Z`.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    let secs: i64 = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        // Before 1970: round down to the whole second.
        Err(e) => {
            let d = e.duration();
            let s = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            if d.subsec_nanos() > 0 {
                -s.saturating_add(1)
            } else {
                -s
            }
        }
    };
    from_unix(secs)
}

/// Seconds since the Unix epoch as RFC 3339 in UTC.
pub(crate) fn from_unix(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Howard Hinnant's `civil_from_days`: days since 1970-01-01 → (year, month, day) in the
/// proleptic Gregorian calendar.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    // Clamp to a range where the arithmetic cannot overflow (±25 million years).
    let z = z.clamp(-10_000_000_000, 10_000_000_000) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11]
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32; // [1, 31]
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32; // [1, 12]
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn known_dates() {
        assert_eq!(from_unix(0), "1970-01-01T00:00:00Z");
        assert_eq!(from_unix(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(from_unix(1_795_863_600), "2026-11-28T11:00:00Z");
        assert_eq!(from_unix(-1), "1969-12-31T23:59:59Z");
        assert_eq!(from_unix(-86_400 * 365), "1969-01-01T00:00:00Z");
        assert_eq!(from_unix(253_402_300_799), "9999-12-31T23:59:59Z");
        // Never panics at the extremes.
        let _ = from_unix(i64::MAX);
        let _ = from_unix(i64::MIN);
    }

    #[test]
    fn system_times() {
        let t = UNIX_EPOCH + Duration::from_millis(1_795_863_600_999);
        assert_eq!(rfc3339(t), "2026-11-28T11:00:00Z");
        let before = UNIX_EPOCH - Duration::from_millis(500);
        assert_eq!(rfc3339(before), "1969-12-31T23:59:59Z");
    }
}

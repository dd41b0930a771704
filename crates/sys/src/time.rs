//! Wall-clock time stamps as RFC 3339 text (UTC, milliseconds), as `ip monitor -ts` stamps its
//! lines; no calendar library for one conversion.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, as `2026-12-04T19:05:00.123Z`.
pub fn rfc3339_now() -> String {
    // a clock before 1970 is a broken clock: stamp the epoch rather than fail a line
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339_ms(d.as_millis())
}

/// Milliseconds since the epoch as RFC 3339 UTC text.
pub fn rfc3339_ms(ms: u128) -> String {
    let secs = ms / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX / 2);
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        ms % 1000
    )
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (H. Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m as u32, d as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        // date -u -d @951782400 → 2000-02-29 00:00:00 (a leap day of a century leap year)
        assert_eq!(rfc3339_ms(951_782_400_007), "2000-02-29T00:00:00.007Z");
        // date -u -d @1796411100.5
        assert_eq!(rfc3339_ms(1_796_411_100_500), "2026-12-04T19:05:00.500Z");
        assert_eq!(rfc3339_ms(4_107_542_399_999), "2100-02-28T23:59:59.999Z");
    }

    #[test]
    fn now_has_the_shape() {
        let s = rfc3339_now();
        assert_eq!(s.len(), 24, "{s}");
        assert!(s.ends_with('Z') && s.as_bytes()[10] == b'T', "{s}");
    }
}

//! Windows time values as text.

/// 100 ns intervals between 1601-01-01 and 1970-01-01.
const EPOCH_DIFF_100NS: u64 = 116_444_736_000_000_000;

/// Format a FILETIME (100 ns units since 1601-01-01 UTC) as ISO-8601 UTC with all seven
/// fractional digits, e.g. `2021-02-21T01:38:22.9877657Z`. Values before 1970 are formatted
/// too (proleptic Gregorian calendar).
pub fn filetime_to_iso8601(ft: u64) -> String {
    let frac = ft % 10_000_000;
    let secs_since_1601 = ft / 10_000_000;
    let days = (secs_since_1601 / 86_400) as i64;
    let sod = secs_since_1601 % 86_400;
    // Days from 1601-01-01 to 1970-01-01.
    let (y, m, d) = civil_from_days(days - 134_774);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{frac:07}Z",
        sod / 3600,
        (sod / 60) % 60,
        sod % 60
    )
}

/// Seconds since the Unix epoch for a FILETIME, if it is not before 1970.
pub fn filetime_to_unix_seconds(ft: u64) -> Option<u64> {
    ft.checked_sub(EPOCH_DIFF_100NS).map(|v| v / 10_000_000)
}

/// Format a duration in 100 ns units as `Dd HH:MM:SS.fffffff`.
pub fn duration_100ns(v: u64) -> String {
    let frac = v % 10_000_000;
    let s = v / 10_000_000;
    format!(
        "{}d {:02}:{:02}:{:02}.{frac:07}",
        s / 86_400,
        (s / 3600) % 24,
        (s / 60) % 60,
        s % 60
    )
}

/// Howard Hinnant's days → civil date, days counted from 1970-01-01.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_filetimes() {
        // The real triage dump's SystemTime (crash-dump-format.md §2.1: 2021-02-21 01:38:22 UTC).
        assert_eq!(
            filetime_to_iso8601(132583451029877657),
            "2021-02-21T01:38:22.9877657Z"
        );
        assert_eq!(filetime_to_iso8601(0), "1601-01-01T00:00:00.0000000Z");
        assert_eq!(
            filetime_to_iso8601(EPOCH_DIFF_100NS),
            "1970-01-01T00:00:00.0000000Z"
        );
        // 2000-02-29 (leap day) 12:34:56.789 = Unix 951827696.
        assert_eq!(
            filetime_to_iso8601(EPOCH_DIFF_100NS + 9_518_276_967_890_000),
            "2000-02-29T12:34:56.7890000Z"
        );
        assert_eq!(
            filetime_to_iso8601(u64::MAX),
            "60056-05-28T05:36:10.9551615Z"
        );
        assert_eq!(
            filetime_to_unix_seconds(132583451029877657),
            Some(1613871502)
        );
        assert_eq!(duration_100ns(37470697), "0d 00:00:03.7470697");
        assert_eq!(duration_100ns(7967053432), "0d 00:13:16.7053432");
    }
}

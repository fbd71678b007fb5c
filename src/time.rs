//! Windows time values as text.

/// 100 ns intervals between 1601-01-01 and 1970-01-01.
const EPOCH_DIFF_100NS: u64 = 116_444_736_000_000_000;

/// Format a FILETIME (100 ns units since 1601-01-01 UTC) as ISO-8601 UTC with all seven
/// fractional digits, e.g. `2021-02-21T01:38:22.9877657Z`. Values before 1970 are formatted
/// too (proleptic Gregorian calendar).
pub fn filetime_to_iso8601(ft: u64) -> String {
    let frac = ft % 10_000_000;
    let secs_since_1601 = ft / 10_000_000;
    // A listing's rows come in time order, many per second: the date and time of day are
    // computed once per second (the last second's text is kept per thread), and the usual
    // text (a four-digit year: 28 bytes) is put together in a fixed array, made a string once.
    thread_local! {
        static LAST: std::cell::Cell<(u64, [u8; 20])> = const { std::cell::Cell::new((u64::MAX, [0; 20])) };
    }
    let (second, prefix) = LAST.with(|l| l.get());
    let prefix = if second == secs_since_1601 {
        prefix
    } else {
        let mut o = String::with_capacity(29);
        push_second(&mut o, secs_since_1601);
        match <[u8; 20]>::try_from(o.as_bytes()) {
            Ok(prefix) => {
                LAST.with(|l| l.set((secs_since_1601, prefix)));
                prefix
            }
            // More than four year digits.
            Err(_) => {
                push_digits(&mut o, frac, 7);
                o.push('Z');
                return o;
            }
        }
    };
    let mut text = [0u8; 28];
    text[..20].copy_from_slice(&prefix);
    write_digits(&mut text[20..27], frac);
    text[27] = b'Z';
    // Not checked again in release builds (about a hundred instructions of every row of a
    // listing); in debug builds, and by the tests, that it is ASCII.
    debug_assert!(text.is_ascii());
    // SAFETY: `text` is the 20 bytes of a whole `String` (`push_second`'s text: valid UTF-8
    // that ends on a character boundary; in fact ASCII digits and separators) followed by
    // ASCII digits and `Z`, so it is valid UTF-8.
    unsafe { std::str::from_utf8_unchecked(&text) }.to_owned()
}

/// `YYYY-MM-DDTHH:MM:SS.` of a second since 1601 (more year digits after year 9999).
fn push_second(o: &mut String, secs_since_1601: u64) {
    let days = (secs_since_1601 / 86_400) as i64;
    let sod = secs_since_1601 % 86_400;
    // Days from 1601-01-01 to 1970-01-01.
    let (y, m, d) = civil_from_days(days - 134_774);
    // Written digit by digit (a listing formats millions of these; `format!` was a tenth of
    // its time); the same text as `{y:04}-{m:02}-{d:02}T{h:02}:{m:02}:{s:02}.{frac:07}Z`.
    push_digits(o, y.unsigned_abs(), 4);
    o.push('-');
    push_digits(o, u64::from(m), 2);
    o.push('-');
    push_digits(o, u64::from(d), 2);
    o.push('T');
    push_digits(o, sod / 3600, 2);
    o.push(':');
    push_digits(o, (sod / 60) % 60, 2);
    o.push(':');
    push_digits(o, sod % 60, 2);
    o.push('.');
}

/// Push `v` in decimal, zero-padded to at least `width` digits.
fn push_digits(o: &mut String, v: u64, width: usize) {
    let mut digits = 1;
    while digits < 20 && 10u64.pow(digits as u32) <= v {
        digits += 1;
    }
    let mut buf = [b'0'; 20];
    let n = digits.max(width).min(20);
    write_digits(&mut buf[20 - n..], v);
    // ASCII digits only: always valid UTF-8.
    o.push_str(std::str::from_utf8(&buf[20 - n..]).unwrap_or_default());
}

/// `v`'s last `dst.len()` decimal digits into `dst`, zero-padded on the left.
fn write_digits(dst: &mut [u8], mut v: u64) {
    for d in dst.iter_mut().rev() {
        *d = b'0' + (v % 10) as u8;
        v /= 10;
    }
}

/// The last valid FILETIME: 30828-09-14T02:48:05.4775807Z (0x7FFFFFFFFFFFFFFF: FILETIMEs are
/// signed 64-bit counts to Windows, `FileTimeToSystemTime` refuses anything at or above 2^63).
/// Every u64 is on or after 1601-01-01, so a FILETIME is outside 1601..=30828-09-14 exactly
/// when it is past this.
pub(crate) const MAX_FILETIME: u64 = 0x7FFF_FFFF_FFFF_FFFF;

/// A FILETIME as text: ISO-8601 UTC when it is a valid FILETIME ([`MAX_FILETIME`]), else
/// `not a valid FILETIME (raw 0x...)`: an impossible time is never shown as a date.
pub(crate) fn filetime_text(ft: u64) -> String {
    if ft > MAX_FILETIME {
        format!("not a valid FILETIME (raw {ft:#x})")
    } else {
        filetime_to_iso8601(ft)
    }
}

/// The FILETIME of `y`-01-01 00:00 UTC (1601 ≤ y).
pub(crate) fn filetime_of_year(y: i64) -> u64 {
    // Days from 1601-01-01 to y-01-01, proleptic Gregorian.
    let days = |y: i64| {
        let p = y - 1;
        365 * p + p / 4 - p / 100 + p / 400
    };
    ((days(y) - days(1601)) as u64) * 86_400 * 10_000_000
}

/// The earliest year a kernel of NT build `build` can have run in: the year of the first
/// preview builds of its release (Windows 2000's 2195 for anything older or unknown).
pub(crate) fn build_first_year(build: u32) -> i64 {
    const YEARS: &[(u32, i64)] = &[
        (26100, 2024),
        (22621, 2022),
        (22000, 2021),
        (20348, 2021),
        (19041, 2019),
        (17763, 2018),
        (16299, 2017),
        (15063, 2016),
        (14393, 2016),
        (10240, 2015),
        (9600, 2013),
        (9200, 2011),
        (7600, 2009),
        (6000, 2005),
        (3790, 2002),
        (2600, 2001),
    ];
    YEARS
        .iter()
        .find(|(b, _)| build >= *b)
        .map_or(1999, |&(_, y)| y)
}

/// Why the dump's SystemTime `ft` cannot be right: not a FILETIME, before kernel build
/// `build` existed ([`build_first_year`]), or after the file holding it was written
/// (`written`, a FILETIME; a day of slack for clocks). None when it is plausible.
pub(crate) fn implausible_dump_time(
    ft: u64,
    build: u32,
    written: Option<u64>,
) -> Option<(&'static str, String)> {
    if ft > MAX_FILETIME {
        return Some((
            "not_a_filetime",
            format!("{ft:#x} is past the last valid FILETIME (30828-09-14)"),
        ));
    }
    let first = build_first_year(build);
    if ft < filetime_of_year(first) {
        return Some((
            "before_build",
            format!(
                "{} is before build {build} existed ({first})",
                filetime_to_iso8601(ft)
            ),
        ));
    }
    const DAY: u64 = 86_400 * 10_000_000;
    if let Some(w) = written {
        if ft > w.saturating_add(DAY) {
            return Some((
                "after_file_written",
                format!(
                    "{} is after the file was written ({})",
                    filetime_to_iso8601(ft),
                    filetime_to_iso8601(w)
                ),
            ));
        }
    }
    None
}

/// A `SystemTime` (a file's modification time) as a FILETIME.
pub(crate) fn filetime_of_system_time(t: std::time::SystemTime) -> Option<u64> {
    let s = t.duration_since(std::time::UNIX_EPOCH).ok()?;
    (s.as_nanos() / 100)
        .try_into()
        .ok()
        .and_then(|v: u64| v.checked_add(EPOCH_DIFF_100NS))
}

/// Format a duration in 100 ns units as `Dd HH:MM:SS.fffffff`.
pub(crate) fn duration_100ns(v: u64) -> String {
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

/// Parse a duration such as `250ms`, `2s`, `1.5s`, `100us`, `2m` or `500ns` into 100 ns units
/// (a bare number is seconds). Fractions below 100 ns are rejected rather than rounded.
pub fn parse_duration(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    // 100 ns units per unit.
    let (mult, div): (u64, u64) = match unit.trim() {
        "" | "s" | "sec" => (10_000_000, 1),
        "ms" => (10_000, 1),
        "us" | "µs" => (10, 1),
        "ns" => (1, 100),
        "m" | "min" => (600_000_000, 1),
        "h" => (36_000_000_000, 1),
        u => {
            return Err(format!(
                "unknown duration unit {u:?} in {text:?} (ns, us, ms, s, m, h)"
            ))
        }
    };
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() && frac.is_empty() {
        return Err(format!("no number in duration {text:?}"));
    }
    let parse = |s: &str| -> Result<u64, String> {
        if s.is_empty() {
            Ok(0)
        } else {
            s.parse::<u64>()
                .map_err(|_| format!("bad duration {text:?}"))
        }
    };
    let too_big = || format!("duration {text:?} is too large");
    let whole = parse(int)?.checked_mul(mult).ok_or_else(too_big)?;
    // The fraction, exactly: frac_digits * mult / 10^len.
    let frac = frac.get(..12).unwrap_or(frac);
    let scale = 10u128.pow(frac.len() as u32);
    let f = u128::from(parse(frac)?) * u128::from(mult);
    if f % scale != 0 {
        return Err(format!("duration {text:?} is finer than 100 ns"));
    }
    let total = whole
        .checked_add(u64::try_from(f / scale).map_err(|_| too_big())?)
        .ok_or_else(too_big)?;
    if total % div != 0 {
        return Err(format!("duration {text:?} is finer than 100 ns"));
    }
    Ok(total / div)
}

/// Parse a UTC time given on the command line into a FILETIME: `YYYY-MM-DD`, or
/// `YYYY-MM-DDTHH:MM:SS` with up to seven fractional digits and an optional `Z` (as the
/// output prints times; a space may stand for the `T`). Years 1601-30827; no time zones other
/// than UTC (an offset is refused, not guessed).
pub fn parse_utc(text: &str) -> Result<u64, String> {
    // The value itself is quoted by the caller's error.
    let bad = || "not a UTC time (YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS[.fffffff][Z])".to_string();
    let t = text.trim();
    let t = t.strip_suffix('Z').unwrap_or(t);
    let (date, clock) = match t.split_once(['T', ' ']) {
        Some((d, c)) => (d, Some(c)),
        None => (t, None),
    };
    let num = |s: &str, len: usize| -> Result<u64, String> {
        if s.len() == len && s.bytes().all(|b| b.is_ascii_digit()) {
            s.parse().map_err(|_| bad())
        } else {
            Err(bad())
        }
    };
    let mut d = date.split('-');
    let (Some(y), Some(m), Some(dd), None) = (d.next(), d.next(), d.next(), d.next()) else {
        return Err(bad());
    };
    let (y, m, dd) = (num(y, y.len().clamp(4, 5))?, num(m, 2)?, num(dd, 2)?);
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1601..=30827).contains(&y)
        || !(1..=12).contains(&m)
        || dd == 0
        || dd > month_days[m as usize - 1]
    {
        return Err(bad());
    }
    let mut ticks: u64 = 0;
    if let Some(c) = clock {
        let (hms, frac) = c.split_once('.').unwrap_or((c, ""));
        let mut p = hms.split(':');
        let (Some(h), Some(mi), Some(sec), None) = (p.next(), p.next(), p.next(), p.next()) else {
            return Err(bad());
        };
        let (h, mi, sec) = (num(h, 2)?, num(mi, 2)?, num(sec, 2)?);
        if h > 23 || mi > 59 || sec > 59 || frac.len() > 7 || (c.contains('.') && frac.is_empty()) {
            return Err(bad());
        }
        let f = if frac.is_empty() {
            0
        } else {
            num(frac, frac.len())?
        };
        ticks = ((h * 60 + mi) * 60 + sec) * 10_000_000 + f * 10u64.pow(7 - frac.len() as u32);
    }
    let days_before_month: u64 = month_days[..m as usize - 1].iter().sum();
    let day_of_year = days_before_month + dd - 1;
    Ok(filetime_of_year(y as i64) + day_of_year * 86_400 * 10_000_000 + ticks)
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
    fn utc_times_parse_back() {
        for t in [
            "2021-02-21T01:38:22.9877657Z",
            "1601-01-01T00:00:00.0000000Z",
            "2024-02-29T23:59:59.0000001Z",
            "30827-12-31T23:59:59.9999999Z",
        ] {
            assert_eq!(filetime_to_iso8601(parse_utc(t).unwrap()), t);
        }
        assert_eq!(parse_utc("1601-01-01"), Ok(0));
        assert_eq!(
            parse_utc("2021-02-21 01:38:22.5"),
            parse_utc("2021-02-21T01:38:22.5000000Z")
        );
        assert_eq!(parse_utc("2021-02-21T01:38:22Z").unwrap() % 10_000_000, 0);
        for bad in [
            "2021-02-29",
            "2021-13-01",
            "1600-12-31",
            "2021-02-21T24:00:00",
            "2021-02-21T01:38:22.12345678",
            "2021-02-21T01:38:22.",
            "2021-02-21T01:38:22+01:00",
            "21-02-21",
            "",
            "2021-02-21T01:38",
        ] {
            assert!(parse_utc(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(2_500_000));
        assert_eq!(parse_duration("2s"), Ok(20_000_000));
        assert_eq!(parse_duration("2"), Ok(20_000_000));
        assert_eq!(parse_duration("1.5s"), Ok(15_000_000));
        assert_eq!(parse_duration("0.0000001s"), Ok(1));
        assert_eq!(parse_duration("100us"), Ok(1000));
        assert_eq!(parse_duration("300ns"), Ok(3));
        assert_eq!(parse_duration("2m"), Ok(1_200_000_000));
        assert_eq!(parse_duration("1h"), Ok(36_000_000_000));
        assert!(parse_duration("150ns").is_err());
        assert!(parse_duration("0.00000001s").is_err());
        assert!(parse_duration("ms").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("99999999999999999999s").is_err());
        assert!(parse_duration("9999999999999h").is_err());
    }

    /// The digit-by-digit formatter gives the text of the `format!` it replaced, over the
    /// whole u64 range (every u64 is on or after 1601: years 1601 to 60056), for times in the
    /// second it formatted last and in others.
    #[test]
    fn iso8601_matches_format() {
        let reference = |ft: u64| {
            let frac = ft % 10_000_000;
            let secs = ft / 10_000_000;
            let sod = secs % 86_400;
            let (y, m, d) = civil_from_days((secs / 86_400) as i64 - 134_774);
            format!(
                "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{frac:07}Z",
                sod / 3600,
                (sod / 60) % 60,
                sod % 60
            )
        };
        let mut x = 0x9E37_79B9_7F4A_7C15_u64;
        let mut cases = vec![
            0,
            1,
            9_999_999,
            10_000_000,
            u64::MAX,
            MAX_FILETIME,
            132583451029877657,
        ];
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            cases.push(x);
            // The same second again (the cached date and time of day), its last tick, the
            // next second's first.
            cases.push(x.saturating_add(1));
            cases.push(x - x % 10_000_000 + 9_999_999);
            cases.push((x - x % 10_000_000).saturating_add(10_000_000));
            cases.push(x >> (x % 64));
        }
        for ft in cases {
            assert_eq!(filetime_to_iso8601(ft), reference(ft), "{ft:#x}");
        }
    }

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
        assert_eq!(duration_100ns(37470697), "0d 00:00:03.7470697");
        assert_eq!(
            filetime_to_iso8601(MAX_FILETIME),
            "30828-09-14T02:48:05.4775807Z"
        );
        assert_eq!(filetime_text(MAX_FILETIME), "30828-09-14T02:48:05.4775807Z");
        assert_eq!(
            filetime_text(1 << 63),
            "not a valid FILETIME (raw 0x8000000000000000)"
        );
        assert_eq!(filetime_of_year(1601), 0);
        assert_eq!(
            filetime_to_iso8601(filetime_of_year(2019)),
            "2019-01-01T00:00:00.0000000Z"
        );
        assert_eq!(
            filetime_to_iso8601(filetime_of_year(2000)),
            "2000-01-01T00:00:00.0000000Z"
        );
        assert_eq!(duration_100ns(7967053432), "0d 00:13:16.7053432");
    }

    #[test]
    fn dump_times_are_checked() {
        let d1 = 132_583_451_029_877_657; // 2021-02-21, build 19041
        assert_eq!(implausible_dump_time(d1, 19041, None), None);
        assert_eq!(implausible_dump_time(d1, 19041, Some(d1 + 1)), None);
        assert_eq!(
            implausible_dump_time(1 << 63, 19041, None).unwrap().0,
            "not_a_filetime"
        );
        // 2018 for a 19041 kernel: before the build existed.
        let y2018 = filetime_of_year(2018);
        assert_eq!(
            implausible_dump_time(y2018, 19041, None).unwrap().0,
            "before_build"
        );
        assert_eq!(implausible_dump_time(y2018, 17763, None), None);
        // Two days after the file was written.
        let (flag, why) = implausible_dump_time(d1 + 2 * 864_000_000_000, 19041, Some(d1)).unwrap();
        assert_eq!(flag, "after_file_written");
        assert!(why.contains("2021-02-23T01:38:22"), "{why}");
        assert_eq!(build_first_year(0), 1999);
        assert_eq!(build_first_year(22631), 2022);
    }
}

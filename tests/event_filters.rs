//! `events` filters (issue 29 item 3): each filter on the sample gives exactly the rows of
//! the unfiltered listing that the filter's definition selects (computed here from the
//! unfiltered JSON), rows whose value is unknown are left out and counted in a warning, and
//! bad filter values are refused before anything is listed.

mod common;
use common::{etwdump, listing_json};
use serde_json::Value;

const DUMP: &str = "tests/data/sample-x64-etw.dmp";
const PDB: &str = "tests/fixtures/x64-19041/ntkrnlmp.pdb";

fn listing(extra: &[&str]) -> (Vec<Value>, Vec<String>) {
    let mut args = vec!["events", DUMP, "--pdb", PDB, "--format", "json"];
    args.extend_from_slice(extra);
    listing_json(&args)
}

/// The FILETIME of an ISO-8601 time as the rows print it (independent of the tool's parser).
fn filetime(t: &str) -> u64 {
    let (date, clock) = t.trim_end_matches('Z').split_once('T').unwrap();
    let d: Vec<i64> = date.split('-').map(|x| x.parse().unwrap()).collect();
    let (hms, frac) = clock.split_once('.').unwrap();
    let c: Vec<u64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
    // Days from 1601-01-01 (proleptic Gregorian).
    let days_to = |y: i64| 365 * (y - 1) + (y - 1) / 4 - (y - 1) / 100 + (y - 1) / 400;
    let leap = d[0] % 4 == 0 && (d[0] % 100 != 0 || d[0] % 400 == 0);
    let month = [
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
    let doy: i64 = month[..(d[1] - 1) as usize].iter().sum::<i64>() + d[2] - 1;
    let days = (days_to(d[0]) - days_to(1601) + doy) as u64;
    ((days * 86_400 + c[0] * 3600 + c[1] * 60 + c[2]) * 10_000_000) + frac.parse::<u64>().unwrap()
}

fn count_warning(w: &[String], what: &str) -> Option<u64> {
    w.iter()
        .find(|m| m.contains(&format!("records left out by {what}")))
        .map(|m| m.split_whitespace().next().unwrap().parse().unwrap())
}

#[test]
fn each_filter_selects_exactly_its_rows() {
    let (all, _) = listing(&[]);
    assert_eq!(all.len(), 2925);
    let pid = all.iter().find_map(|r| r["pid"].as_u64()).unwrap();
    let tid = all.iter().find_map(|r| r["tid"].as_u64()).unwrap();
    let provider = all
        .iter()
        .find_map(|r| r["provider"].as_str())
        .unwrap()
        .to_string();
    // Rows come per buffer, not in time order: the window is between two quantiles.
    let mut times: Vec<String> = all
        .iter()
        .filter_map(|r| r["time"].as_str().map(str::to_string))
        .collect();
    times.sort();
    let (t0, t1) = (
        times[times.len() / 4].clone(),
        times[times.len() / 2].clone(),
    );
    let (f0, f1) = (filetime(&t0), filetime(&t1));
    let in_window = |r: &Value| {
        r["time_flag"].is_null()
            && r["time"]
                .as_str()
                .is_some_and(|t| (f0..=f1).contains(&filetime(t)))
    };
    type Pick<'a> = Box<dyn Fn(&Value) -> bool + 'a>;
    let cases: Vec<(Vec<String>, Pick)> = vec![
        (
            vec!["--pid".into(), pid.to_string()],
            Box::new(|r| r["pid"].as_u64() == Some(pid)),
        ),
        (
            vec!["--tid".into(), tid.to_string()],
            Box::new(|r| r["tid"].as_u64() == Some(tid)),
        ),
        (
            vec!["--hook".into(), "0x0524".into()],
            Box::new(|r| r["hook"] == "0x0524"),
        ),
        (
            vec!["--hook".into(), "CONTEXTSWAP,0x0f33".into()],
            Box::new(|r| r["hook"] == "0x0524" || r["hook"] == "0x0f33"),
        ),
        (
            vec!["--provider".into(), provider.to_uppercase()],
            Box::new(|r| r["provider"] == provider.as_str()),
        ),
        (
            vec!["--event-id".into(), "48".into()],
            Box::new(|r| r["event_id"] == 48),
        ),
        (
            vec!["--since".into(), t0.clone(), "--until".into(), t1.clone()],
            Box::new(in_window),
        ),
        (
            vec![
                "--hook".into(),
                "0x0524".into(),
                "--since".into(),
                t0.clone(),
                "--until".into(),
                t1.clone(),
            ],
            Box::new(|r| r["hook"] == "0x0524" && in_window(r)),
        ),
    ];
    for (args, pick) in &cases {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let (got, _) = listing(&a);
        let want: Vec<&Value> = all.iter().filter(|r| pick(r)).collect();
        assert!(
            !want.is_empty() && want.len() < all.len(),
            "{args:?}: {} rows",
            want.len()
        );
        assert_eq!(got.iter().collect::<Vec<_>>(), want, "{args:?}");
    }
}

#[test]
fn unknown_values_are_left_out_and_counted() {
    let (all, _) = listing(&[]);
    // --pid: the rows without a process id (PERFINFO records) are counted, not matched.
    let pid = all.iter().find_map(|r| r["pid"].as_u64()).unwrap();
    let (_, w) = listing(&["--pid", &pid.to_string()]);
    let no_pid = all.iter().filter(|r| r["pid"].is_null()).count() as u64;
    assert_eq!(count_warning(&w, "--pid"), Some(no_pid));
    // Combined with --hook, only the hook's rows without a pid are counted.
    let (_, w) = listing(&["--pid", &pid.to_string(), "--hook", "0x0524"]);
    let n = all
        .iter()
        .filter(|r| r["pid"].is_null() && r["hook"] == "0x0524")
        .count() as u64;
    assert!(n > 0);
    assert_eq!(count_warning(&w, "--pid"), Some(n));
    // Time filters: rows without a UTC time (logger 4's raw clock) are counted.
    let (_, w) = listing(&["--since", "2000-01-01"]);
    let untimed = all
        .iter()
        .filter(|r| r["time"].is_null() || !r["time_flag"].is_null())
        .count() as u64;
    assert!(untimed > 0);
    assert_eq!(count_warning(&w, "--since/--until/--last"), Some(untimed));
}

#[test]
fn last_counts_back_from_the_dump_time() {
    let (all, _) = listing(&[]);
    let info = common::info_json(std::path::Path::new(DUMP));
    let dump_time = info["system_time_raw"].as_u64().unwrap();
    // The sample's last record is about 259 ms before the dump's SystemTime.
    let since = dump_time - 2_600_000;
    let (got, _) = listing(&["--last", "260ms"]);
    let want: Vec<&Value> = all
        .iter()
        .filter(|r| {
            r["time_flag"].is_null() && r["time"].as_str().is_some_and(|t| filetime(t) >= since)
        })
        .collect();
    assert!(!want.is_empty() && want.len() < all.len(), "{}", want.len());
    assert_eq!(got.iter().collect::<Vec<_>>(), want);
    assert!(listing(&["--last", "250ms"]).0.is_empty());
}

#[test]
fn bad_filter_values_are_refused() {
    for (args, msg) in [
        (
            vec!["--provider", "No\u{1b}Such"],
            "--provider No\\u{1b}Such: neither a GUID nor a provider name",
        ),
        (vec!["--hook", "NOPE"], "--hook NOPE: neither a hook id"),
        (vec!["--since", "2021-02-30"], "not a UTC time"),
        (vec!["--last", "5parsecs"], "unknown duration unit"),
    ] {
        let mut a = vec!["events", DUMP, "--pdb", PDB];
        a.extend_from_slice(&args);
        let r = etwdump(&a);
        assert!(!r.status.success(), "{args:?}");
        assert!(r.stdout.is_empty(), "{args:?}");
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(err.contains(msg), "{args:?}: {err}");
    }
}

fn switches(extra: &[&str]) -> (Vec<Value>, Vec<String>) {
    let mut args = vec!["cswitch", DUMP, "--pdb", PDB, "--format", "json"];
    args.extend_from_slice(extra);
    listing_json(&args)
}

/// `cswitch` filters: a switch is kept when its old or new thread (process) matches; each
/// filter gives exactly the unfiltered rows its definition selects; `old_pid`/`new_pid` agree
/// with the process column's "name (pid)".
#[test]
fn cswitch_filters_select_either_side() {
    let (all, _) = switches(&[]);
    assert_eq!(all.len(), 1435);
    for r in &all {
        for side in ["old", "new"] {
            let (pid, name) = (&r[format!("{side}_pid")], &r[format!("{side}_process")]);
            match (pid.as_u64(), name.as_str()) {
                (Some(0), Some(n)) => assert_eq!(n, "Idle"),
                (Some(p), Some(n)) => assert!(n.ends_with(&format!(" ({p})")), "{n} {p}"),
                (None, n) => assert!(n.is_none(), "{r}"),
                (Some(p), None) => panic!("pid {p} without a process name: {r}"),
            }
        }
    }
    let pid = 4836u64;
    let tid = all[all.len() / 2]["new_tid"].as_u64().unwrap();
    let mut times: Vec<String> = all
        .iter()
        .filter_map(|r| r["time"].as_str().map(str::to_string))
        .collect();
    times.sort();
    let (t0, t1) = (
        times[times.len() / 3].clone(),
        times[2 * times.len() / 3].clone(),
    );
    let (f0, f1) = (filetime(&t0), filetime(&t1));
    type Pick<'a> = Box<dyn Fn(&Value) -> bool + 'a>;
    let cases: Vec<(Vec<String>, Pick)> = vec![
        (
            vec!["--pid".into(), pid.to_string()],
            Box::new(|r| r["old_pid"] == pid || r["new_pid"] == pid),
        ),
        (
            vec!["--tid".into(), tid.to_string()],
            Box::new(|r| r["old_tid"] == tid || r["new_tid"] == tid),
        ),
        (
            vec!["--since".into(), t0.clone(), "--until".into(), t1.clone()],
            Box::new(|r| {
                r["time_flag"].is_null()
                    && r["time"]
                        .as_str()
                        .is_some_and(|t| (f0..=f1).contains(&filetime(t)))
            }),
        ),
    ];
    for (args, pick) in &cases {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let (got, _) = switches(&a);
        let want: Vec<&Value> = all.iter().filter(|r| pick(r)).collect();
        assert!(
            !want.is_empty() && want.len() < all.len(),
            "{args:?}: {}",
            want.len()
        );
        assert_eq!(got.iter().collect::<Vec<_>>(), want, "{args:?}");
    }
    // Switches between two threads the thread list does not know are counted, not matched.
    let (_, w) = switches(&["--pid", &pid.to_string()]);
    let unknown = all
        .iter()
        .filter(|r| {
            !(r["old_pid"] == pid || r["new_pid"] == pid)
                && (r["old_pid"].is_null() || r["new_pid"].is_null())
        })
        .count();
    assert!(unknown > 0);
    assert!(
        w.iter()
            .any(|m| m.starts_with(&format!("{unknown} switches left out by --pid"))),
        "{w:?}"
    );
}

//! `cswitch --svg`: a per-CPU lane chart. One lane per CPU; each span is the thread that ran
//! between two switches, coloured per process and labelled when wide enough; the time axis is
//! in milliseconds before the dump. Only switches with a UTC time are drawn.

use crate::report::cswitch::SwitchRow;
use std::collections::BTreeMap;
use std::fmt::Write as _;

const WIDTH: f64 = 1200.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const LANE: f64 = 22.0;
const TOP: f64 = 40.0;
/// Ticks on the time axis at most (plus the one at 0).
const MAX_TICKS: usize = 10;

/// The axis step in ms: the smallest 1-2-5 × 10^k (k ≥ −2) giving at most [`MAX_TICKS`] steps
/// over `total_ms`, for any span (an hour or ten thousand years).
fn tick_step(total_ms: f64) -> f64 {
    if !total_ms.is_finite() || total_ms <= 0.0 {
        return 1.0;
    }
    let mut mag = 0.01;
    loop {
        for m in [1.0, 2.0, 5.0] {
            let step = m * mag;
            if total_ms / step <= MAX_TICKS as f64 {
                return step;
            }
        }
        mag *= 10.0;
        if !mag.is_finite() {
            return total_ms;
        }
    }
}

fn escape(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '<' => "&lt;".into(),
            '>' => "&gt;".into(),
            '&' => "&amp;".into(),
            '"' => "&quot;".into(),
            c if c.is_control() => "?".into(),
            c => c.to_string(),
        })
        .collect()
}

/// A stable colour per process name.
fn colour(name: &str) -> String {
    if name == "Idle" {
        return "#d9d9d9".into();
    }
    let h = name
        .bytes()
        .fold(0u32, |a, b| a.wrapping_mul(31).wrapping_add(u32::from(b)));
    format!("hsl({}, 60%, 62%)", h % 360)
}

/// Render the chart; `dump_time` is the dump's FILETIME (the right edge).
pub fn render(rows: &[SwitchRow], dump_time: u64) -> String {
    let mut lanes: BTreeMap<u64, Vec<(u64, &SwitchRow)>> = BTreeMap::new();
    for r in rows {
        if r.time_flag.is_some() {
            continue; // a time after the dump or before boot cannot be drawn (warned)
        }
        if let (Some(cpu), Some(ft)) = (r.cpu, r.filetime) {
            lanes.entry(cpu).or_default().push((ft, r));
        }
    }
    for v in lanes.values_mut() {
        v.sort_by_key(|(t, _)| *t);
    }
    let start = lanes
        .values()
        .filter_map(|v| v.first().map(|(t, _)| *t))
        .min()
        .unwrap_or(dump_time)
        .min(dump_time);
    let span = (dump_time - start).max(1) as f64;
    let x = |t: u64| LEFT + (t.saturating_sub(start)) as f64 / span * (WIDTH - LEFT - RIGHT);
    let height = TOP + LANE * lanes.len().max(1) as f64 + 40.0;
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{LEFT}" y="20" font-size="13">Context switches per CPU (ms before the dump)</text>"#
    );
    for (i, (cpu, evs)) in lanes.iter().enumerate() {
        let y = TOP + LANE * i as f64;
        let _ = writeln!(o, r#"<text x="8" y="{}">CPU {cpu}</text>"#, y + LANE * 0.65);
        // Span k: from switch k to switch k+1 (or the dump), the thread switched in at k.
        for (k, (t, r)) in evs.iter().enumerate() {
            let end = evs.get(k + 1).map_or(dump_time, |(t2, _)| *t2);
            let who = r
                .new_process
                .clone()
                .or_else(|| evs.get(k + 1).and_then(|(_, n)| n.old_process.clone()))
                .unwrap_or_else(|| match r.new_tid {
                    Some(t) => format!("TID {t}"),
                    None => "?".into(),
                });
            let (x0, x1) = (x(*t), x(end.max(*t)));
            let w = (x1 - x0).max(0.5);
            let last = k + 1 == evs.len();
            // After the last recorded switch nothing is known: drawn pale and dashed.
            let (fill, stroke, title) = if last {
                (
                    "#f0f0f0".to_string(),
                    r##"stroke="#999" stroke-dasharray="3,2" stroke-width="0.8""##,
                    format!("{who} switched in; nothing recorded after this switch"),
                )
            } else {
                (
                    colour(&who),
                    r#"stroke="white" stroke-width="0.3""#,
                    who.clone(),
                )
            };
            let _ = writeln!(
                o,
                r#"<rect x="{x0:.2}" y="{:.1}" width="{w:.2}" height="{:.1}" fill="{fill}" {stroke}><title>{}</title></rect>"#,
                y + 2.0,
                LANE - 4.0,
                escape(&title)
            );
            if w > 60.0 {
                let _ = writeln!(
                    o,
                    r#"<text x="{:.2}" y="{:.1}">{}</text>"#,
                    x0 + 3.0,
                    y + LANE * 0.65,
                    escape(
                        &(if last {
                            format!("{who} (then unrecorded)")
                        } else {
                            who.clone()
                        })
                        .chars()
                        .take((w / 6.5) as usize)
                        .collect::<String>()
                    )
                );
            }
        }
    }
    // Time axis: ticks in ms before the dump.
    let axis_y = TOP + LANE * lanes.len().max(1) as f64 + 8.0;
    let _ = writeln!(
        o,
        r#"<line x1="{LEFT}" y1="{axis_y}" x2="{}" y2="{axis_y}" stroke="black"/>"#,
        WIDTH - RIGHT
    );
    let total_ms = span / 10_000.0;
    let step = tick_step(total_ms);
    // At most MAX_TICKS + 1 ticks whatever the span (a wild time range cannot blow it up).
    for i in 0..=MAX_TICKS {
        let ms = step * i as f64;
        if ms > total_ms + 1e-9 {
            break;
        }
        let t = dump_time.saturating_sub((ms * 10_000.0) as u64);
        let xx = x(t);
        let _ = writeln!(
            o,
            r#"<line x1="{xx:.2}" y1="{axis_y}" x2="{xx:.2}" y2="{}" stroke="black"/><text x="{xx:.2}" y="{}" text-anchor="middle">-{}</text>"#,
            axis_y + 5.0,
            axis_y + 18.0,
            if step < 1.0 {
                format!("{ms:.2}")
            } else {
                format!("{ms:.0}")
            }
        );
    }
    let _ = writeln!(o, "</svg>");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_step_bounds_the_axis() {
        assert_eq!(tick_step(0.05), 0.01);
        assert_eq!(tick_step(95.0), 10.0);
        assert_eq!(tick_step(1000.0), 100.0);
        assert_eq!(tick_step(1001.0), 200.0);
        // 300 years: still at most ten steps.
        let ms = 300.0 * 365.25 * 86_400_000.0;
        let step = tick_step(ms);
        assert!(ms / step <= 10.0 && ms / step > 2.0, "{step}");
        assert_eq!(tick_step(f64::INFINITY), 1.0);
    }

    /// A wild span (the dump time centuries after the switches) gives a small chart.
    #[test]
    fn wild_span_stays_small() {
        let row = SwitchRow {
            cpu: Some(0),
            timestamp: 1,
            time: Some("x".into()),
            filetime: Some(1),
            old_tid: 4,
            new_tid: Some(8),
            source: "event",
            ..SwitchRow::default()
        };
        let svg = render(&[row], u64::MAX / 2);
        assert!(svg.len() < 10_000, "{}", svg.len());
        assert!(svg.matches("text-anchor=\"middle\"").count() <= MAX_TICKS + 1);
    }
}

//! `cswitch --svg`: a per-CPU lane chart. One lane per CPU; each span is the thread that ran
//! between two switches, coloured per process (a qualitative palette assigned by time share,
//! so the busiest processes get the most distinct colours; a legend names them); a span
//! where the chain of switches breaks (the next switch's old thread is not the thread that
//! came in: switches are missing) is drawn hatched as unknown, as is the time after a CPU's
//! last recorded switch. The title gives the dump, the CPUs and the UTC range; the axis is in
//! milliseconds (seconds for long spans) before the dump with the UTC times of both ends. Only switches with a UTC time
//! that fits the dump are drawn; with none, the picture says so.

use crate::report::cswitch::SwitchRow;
use crate::time::filetime_to_iso8601;
use std::collections::BTreeMap;
use std::fmt::Write as _;

const WIDTH: f64 = 1200.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const LANE: f64 = 22.0;
const TOP: f64 = 48.0;
/// Ticks on the time axis at most (plus the one at 0).
const MAX_TICKS: usize = 10;
/// Legend entries at most (the rest are "other processes").
const LEGEND_MAX: usize = 20;
/// Kelly's 22 colours of maximum contrast without white and black, in his order: neighbours
/// in the list (the busiest processes) differ in hue and lightness.
const PALETTE: [&str; 20] = [
    "#F3C300", "#875692", "#F38400", "#A1CAF1", "#BE0032", "#C2B280", "#848482", "#008856",
    "#E68FAC", "#0067A5", "#F99379", "#604E97", "#F6A600", "#B3446C", "#DCD300", "#882D17",
    "#8DB600", "#654522", "#E25822", "#2B3D26",
];
/// The idle thread, processes past the palette, and unknown spans.
pub(crate) const IDLE_COLOUR: &str = "#D9D9D9";
pub(crate) const OTHER_COLOUR: &str = "#BBBBBB";
pub const UNKNOWN_FILL: &str = "url(#unknown)";

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

/// What the chart is of (the title line).
pub struct Chart<'a> {
    /// The dump's FILETIME: the right edge.
    pub dump_time: u64,
    /// The dump (a file name), shown in the title; text from the command line, escaped.
    pub dump: &'a str,
}

/// The picture and what went into it.
pub struct Drawn {
    pub svg: String,
    /// Spans drawn (one per switch drawn).
    pub spans: usize,
    /// Processes in the legend, busiest first, with their colour.
    pub legend: Vec<(String, &'static str)>,
}

/// One span of a lane: from one switch to the next (or the dump).
struct Span {
    x0: u64,
    x1: u64,
    /// The process (or "TID n") that ran, None when unknown.
    who: Option<String>,
    title: String,
    /// After the CPU's last recorded switch.
    tail: bool,
}

/// Render the chart of `rows` (each CPU's switches in time order, as `cswitch` gives them).
pub fn render(rows: &[SwitchRow], chart: &Chart<'_>) -> Drawn {
    let dump_time = chart.dump_time;
    let lanes = lanes(rows, dump_time);
    // Spans per lane, and each process's drawn time.
    let mut spans: BTreeMap<u64, Vec<Span>> = BTreeMap::new();
    let mut busy: BTreeMap<String, u64> = BTreeMap::new();
    for (cpu, evs) in &lanes {
        spans.insert(*cpu, lane_spans(evs, dump_time, &mut busy));
    }
    let colours = Colours::by_time_share(busy);
    let start = lanes
        .values()
        .filter_map(|v| v.first().map(|(t, _)| *t))
        .min()
        .unwrap_or(dump_time)
        .min(dump_time);
    let frame = Frame::new(start, dump_time, lanes.len(), &colours);
    let drawn: usize = spans.values().map(Vec::len).sum();
    let mut o = String::new();
    frame.head(&mut o, chart, lanes.len(), drawn);
    frame.lanes(&mut o, &spans, &colours);
    frame.axis(&mut o);
    frame.legend(&mut o, &colours);
    let _ = writeln!(o, "</svg>");
    Drawn {
        svg: o,
        spans: drawn,
        legend: colours.legend,
    }
}

/// Each CPU's switches that can be drawn (a UTC time that fits the dump), with their time (at
/// most the dump's), in time order.
fn lanes(rows: &[SwitchRow], dump_time: u64) -> BTreeMap<u64, Vec<(u64, &SwitchRow)>> {
    let mut lanes: BTreeMap<u64, Vec<(u64, &SwitchRow)>> = BTreeMap::new();
    for r in rows {
        if r.time_flag.is_some() {
            continue; // a time after the dump or before boot cannot be drawn (warned)
        }
        if let (Some(cpu), Some(ft)) = (r.cpu, r.filetime) {
            lanes.entry(cpu).or_default().push((ft.min(dump_time), r));
        }
    }
    for v in lanes.values_mut() {
        v.sort_by_key(|(t, _)| *t);
    }
    lanes
}

/// The spans of one lane (its switches `evs` in time order): each from a switch to the next,
/// the last to the dump; each known process's drawn time is added to `busy`.
fn lane_spans(
    evs: &[(u64, &SwitchRow)],
    dump_time: u64,
    busy: &mut BTreeMap<String, u64>,
) -> Vec<Span> {
    let mut v = Vec::new();
    for (k, (t, r)) in evs.iter().enumerate() {
        let next = evs.get(k + 1);
        let end = next.map_or(dump_time, |(t2, _)| *t2).max(*t);
        let tid = |t: Option<u32>| t.map_or_else(|| "?".to_string(), |t| t.to_string());
        // The chain: the thread switched in here is the one switched out next.
        let broken = matches!((r.new_tid, next), (Some(n), Some((_, nx))) if nx.old_tid != n);
        // Names as the terminal shows them (escaped), then XML-escaped by `escape`.
        let name = r
            .new_process
            .as_ref()
            .or_else(|| next.and_then(|(_, n)| n.old_process.as_ref()))
            .map(|n| n.to_string())
            .or_else(|| {
                r.new_tid
                    .or(next.map(|(_, n)| n.old_tid))
                    .map(|t| format!("TID {t}"))
            });
        let (who, title) = if broken {
            (
                None,
                format!(
                    "unknown: TID {} switched in, TID {} switched out next: switches are missing here",
                    tid(r.new_tid),
                    next.map_or(0, |(_, n)| n.old_tid)
                ),
            )
        } else if next.is_none() {
            (
                None,
                format!(
                    "{} switched in; nothing recorded after this switch",
                    name.clone().unwrap_or_else(|| "?".into())
                ),
            )
        } else {
            (name.clone(), name.clone().unwrap_or_else(|| "?".into()))
        };
        if let Some(w) = &who {
            *busy.entry(w.clone()).or_default() += end - t;
        }
        v.push(Span {
            x0: *t,
            x1: end,
            who,
            title,
            tail: next.is_none(),
        });
    }
    v
}

/// The processes' colours and the legend, by time share.
struct Colours {
    colour_of: BTreeMap<String, &'static str>,
    /// Busiest first, with their colour.
    legend: Vec<(String, &'static str)>,
    /// Processes not in the legend.
    others: bool,
    /// Each process's share of the drawn (known) time, in percent.
    share: BTreeMap<String, f64>,
}

impl Colours {
    /// The busiest processes (by drawn time `busy`) get the palette in order; the idle thread
    /// its own grey, the rest past the palette another.
    fn by_time_share(busy: BTreeMap<String, u64>) -> Colours {
        let mut ranked: Vec<(String, u64)> = busy.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut colour_of: BTreeMap<String, &'static str> = BTreeMap::new();
        let mut legend = Vec::new();
        let mut k = 0;
        for (name, _) in &ranked {
            let c = if name == "Idle" {
                IDLE_COLOUR
            } else if k < PALETTE.len() {
                k += 1;
                PALETTE[k - 1]
            } else {
                OTHER_COLOUR
            };
            colour_of.insert(name.clone(), c);
            if legend.len() < LEGEND_MAX && c != OTHER_COLOUR {
                legend.push((name.clone(), c));
            }
        }
        let others = ranked.len() > legend.len();
        let total: u64 = ranked.iter().map(|(_, t)| *t).sum::<u64>().max(1);
        let share: BTreeMap<String, f64> = ranked
            .iter()
            .map(|(n, t)| (n.clone(), *t as f64 * 100.0 / total as f64))
            .collect();
        Colours {
            colour_of,
            legend,
            others,
            share,
        }
    }
}

/// The picture's geometry: the time range drawn (from `start` to the dump) and where the
/// lanes, the axis and the legend go.
struct Frame {
    start: u64,
    dump_time: u64,
    /// The time range in FILETIME units (at least 1).
    span: f64,
    axis_y: f64,
    height: f64,
}

impl Frame {
    /// The frame of `lanes` lanes from `start` to `dump_time`, with room for the legend.
    fn new(start: u64, dump_time: u64, lanes: usize, colours: &Colours) -> Frame {
        let span = (dump_time - start).max(1) as f64;
        let lanes_h = LANE * lanes.max(1) as f64;
        let axis_y = TOP + lanes_h + 8.0;
        let legend_rows = (colours.legend.len() + 1 + usize::from(colours.others)).div_ceil(4);
        let height = axis_y + 56.0 + 18.0 * legend_rows as f64;
        Frame {
            start,
            dump_time,
            span,
            axis_y,
            height,
        }
    }

    /// The x coordinate of time `t`.
    fn x(&self, t: u64) -> f64 {
        LEFT + (t.saturating_sub(self.start)) as f64 / self.span * (WIDTH - LEFT - RIGHT)
    }

    /// The svg element, the hatch pattern, the background, the title (with "no data" when
    /// nothing is drawn) and the line saying what a span is.
    fn head(&self, o: &mut String, chart: &Chart<'_>, lanes: usize, drawn: usize) {
        let height = self.height;
        let _ = writeln!(
            o,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">"#
        );
        let _ = writeln!(
            o,
            r##"<defs><pattern id="unknown" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#FFFFFF"/><line x1="0" y1="0" x2="0" y2="6" stroke="#999999" stroke-width="2"/></pattern></defs>"##
        );
        let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let title = if drawn == 0 {
            format!(
                "{}: no context switch with a UTC time to draw",
                escape(chart.dump)
            )
        } else {
            format!(
                "{}: context switches on {} CPU{}, {} to {} (the dump)",
                escape(chart.dump),
                lanes,
                if lanes == 1 { "" } else { "s" },
                filetime_to_iso8601(self.start),
                filetime_to_iso8601(self.dump_time)
            )
        };
        let _ = writeln!(o, r#"<text x="8" y="20" font-size="13">{title}</text>"#);
        if drawn == 0 {
            let _ = writeln!(
                o,
                r#"<text x="{LEFT}" y="{}">No data: the dump gave no switch whose time could be converted and fits between boot and the dump (see the warnings).</text>"#,
                TOP + LANE * 0.65
            );
        }
        let _ = writeln!(
            o,
            r##"<text x="8" y="38" fill="#555555">Each span: the thread that ran; hatched: unknown (switches missing, or after the last recorded switch).</text>"##
        );
    }

    /// One lane per CPU: its label and its spans, coloured per process (named when wide
    /// enough), hatched when unknown, dashed after the last recorded switch.
    fn lanes(&self, o: &mut String, spans: &BTreeMap<u64, Vec<Span>>, colours: &Colours) {
        for (i, (cpu, v)) in spans.iter().enumerate() {
            let y = TOP + LANE * i as f64;
            let _ = writeln!(o, r#"<text x="8" y="{}">CPU {cpu}</text>"#, y + LANE * 0.65);
            for sp in v {
                let (x0, x1) = (self.x(sp.x0), self.x(sp.x1));
                let w = (x1 - x0).max(0.5);
                let fill = sp
                    .who
                    .as_ref()
                    .and_then(|n| colours.colour_of.get(n).copied())
                    .unwrap_or(UNKNOWN_FILL);
                let stroke = if sp.tail {
                    r##"stroke="#999999" stroke-dasharray="3,2" stroke-width="0.8""##
                } else {
                    r#"stroke="white" stroke-width="0.3""#
                };
                let _ = writeln!(
                    o,
                    r#"<rect class="span" x="{x0:.2}" y="{:.1}" width="{w:.2}" height="{:.1}" fill="{fill}" {stroke}><title>{}</title></rect>"#,
                    y + 2.0,
                    LANE - 4.0,
                    escape(&sp.title)
                );
                if let (true, Some(n)) = (w > 60.0, &sp.who) {
                    let _ = writeln!(
                        o,
                        r#"<text x="{:.2}" y="{:.1}">{}</text>"#,
                        x0 + 3.0,
                        y + LANE * 0.65,
                        escape(&n.chars().take((w / 6.5) as usize).collect::<String>())
                    );
                }
            }
        }
    }

    /// The time axis: ticks in ms (or s) before the dump; the UTC times of both ends under it.
    fn axis(&self, o: &mut String) {
        let (axis_y, dump_time) = (self.axis_y, self.dump_time);
        let _ = writeln!(
            o,
            r#"<line x1="{LEFT}" y1="{axis_y}" x2="{}" y2="{axis_y}" stroke="black"/>"#,
            WIDTH - RIGHT
        );
        let total_ms = self.span / 10_000.0;
        let step = tick_step(total_ms);
        // Seconds once a step is a second or more.
        let (div, unit) = if step >= 1000.0 {
            (1000.0, "s")
        } else {
            (1.0, "ms")
        };
        // At most MAX_TICKS + 1 ticks whatever the span (a wild time range cannot blow it up).
        for i in 0..=MAX_TICKS {
            let ms = step * i as f64;
            if ms > total_ms + 1e-9 {
                break;
            }
            let t = dump_time.saturating_sub((ms * 10_000.0) as u64);
            let xx = self.x(t);
            let _ = writeln!(
                o,
                r#"<line x1="{xx:.2}" y1="{axis_y}" x2="{xx:.2}" y2="{}" stroke="black"/><text x="{xx:.2}" y="{}" text-anchor="middle">-{}</text>"#,
                axis_y + 5.0,
                axis_y + 18.0,
                if step < 1.0 {
                    format!("{ms:.2}")
                } else {
                    format!("{:.0}", ms / div)
                }
            );
        }
        let _ = writeln!(
            o,
            r##"<text x="{LEFT}" y="{}" fill="#555555">{} UTC</text><text x="{}" y="{}" text-anchor="end" fill="#555555">{unit} before the dump; the dump: {} UTC</text>"##,
            axis_y + 32.0,
            filetime_to_iso8601(self.start),
            WIDTH - RIGHT,
            axis_y + 32.0,
            filetime_to_iso8601(dump_time)
        );
    }

    /// The legend: busiest first, with each process's share of the drawn (known) time, then
    /// "other processes" (when some are not listed) and "unknown"; four a row.
    fn legend(&self, o: &mut String, colours: &Colours) {
        let mut entries: Vec<(String, &str)> = colours
            .legend
            .iter()
            .map(|(n, c)| {
                (
                    format!(
                        "{n} ({:.1}%)",
                        colours.share.get(n.as_str()).copied().unwrap_or(0.0)
                    ),
                    *c,
                )
            })
            .collect();
        if colours.others {
            entries.push(("other processes".into(), OTHER_COLOUR));
        }
        entries.push(("unknown".into(), UNKNOWN_FILL));
        for (i, (label, c)) in entries.iter().enumerate() {
            let lx = LEFT + 280.0 * (i % 4) as f64;
            let ly = self.axis_y + 56.0 + 18.0 * (i / 4) as f64;
            let _ = writeln!(
                o,
                r##"<rect class="key" x="{lx}" y="{}" width="12" height="12" fill="{c}" stroke="#666666" stroke-width="0.5"/><text x="{}" y="{}">{}</text>"##,
                ly - 10.0,
                lx + 16.0,
                ly,
                escape(&label.chars().take(40).collect::<String>())
            );
        }
    }
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
        let svg = render(
            &[row],
            &Chart {
                dump_time: u64::MAX / 2,
                dump: "d",
            },
        )
        .svg;
        assert!(svg.len() < 10_000, "{}", svg.len());
        assert!(svg.matches("text-anchor=\"middle\"").count() <= MAX_TICKS + 1);
    }
}

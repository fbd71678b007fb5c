//! `etwdump cswitch`: context switches per CPU in UTC order, streamed; with `--svg` collected
//! first and drawn as a lane chart.

use super::common::{display, finish, renderer, source, with_kernel};
use super::flags::{KernelArgs, RowFormatArg};
use super::stdout::ThreadedStdout;
use etwdump::kernel::context::KernelContext;
use etwdump::render::output::Renderer;
use etwdump::render::svg;
use etwdump::report::cswitch::{self, Last, SwitchRow};
use etwdump::report::filter::{FilterStats, SwitchFilter};
use etwdump::warning::{Warning, WarningKind};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    kernel: KernelArgs,
    /// Only this CPU
    #[arg(long)]
    cpu: Option<u64>,
    /// Only switches from or to a thread of these processes (the dump's thread list)
    #[arg(long, value_delimiter = ',', value_name = "PID")]
    pid: Vec<u32>,
    /// Only switches from or to these threads
    #[arg(long, value_delimiter = ',', value_name = "TID")]
    tid: Vec<u32>,
    /// Only switches at or after this UTC time (YYYY-MM-DD[THH:MM:SS[.fffffff]][Z])
    #[arg(long, value_name = "TIME", value_parser = etwdump::time::parse_utc)]
    since: Option<u64>,
    /// Only switches at or before this UTC time
    #[arg(long, value_name = "TIME", value_parser = etwdump::time::parse_utc)]
    until: Option<u64>,
    /// Only the switches of the last DURATION before the dump (e.g. 250ms, 2s, 1.5s)
    #[arg(long, value_name = "DURATION", value_parser = etwdump::time::parse_duration)]
    last: Option<u64>,
    /// Also draw a per-CPU lane chart to this SVG file
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Read the buffers that nothing leads to any more (orphaned and stale copies, found
    /// by `scan`) instead of the live sessions'
    #[arg(long)]
    carved: bool,
    /// JSON Lines: keep switches without a known time (by default they are left out, with a
    /// count: Timesketch cannot place a line without a time)
    #[arg(long)]
    keep_untimed: bool,
    /// One row per record, as before issue 26: a switch traced by two sessions (a CSwitch
    /// event and a compact batch or pending block) is two rows. By default it is one row
    /// whose `sources` list every record that saw it (same CPU, same old and new thread,
    /// UTC times within the clocks' resolutions; docs/reference.md "Context switches")
    #[arg(long)]
    per_record: bool,
    #[arg(long, value_enum, default_value = "table")]
    format: RowFormatArg,
}

pub fn run(a: Args, out: &mut ThreadedStdout) -> anyhow::Result<()> {
    let r = renderer(a.format);
    with_kernel(&a.kernel, |ctx| {
        // A CPU the machine does not have is a request that cannot be met, not an empty list.
        if let (Some(cpu), Some(n)) = (a.cpu, ctx.processors_known()) {
            if cpu >= u64::from(n) {
                anyhow::bail!(
                    "--cpu {cpu}: the machine has {n} processors (KeNumberProcessors): give --cpu 0 to {}",
                    n.saturating_sub(1)
                );
            }
        }
        let last = a.last.map(|window| Last {
            window,
            end: ctx.system_time(),
        });
        match &a.svg {
            Some(path) => with_chart(&a, ctx, last, path, r, out),
            None => {
                let mut rows = r
                    .listing::<_, SwitchRow>(out, "cswitch")?
                    .keep_untimed(a.keep_untimed)
                    // Rendered on other threads (docs/performance.md "Rendering").
                    .parallel(0)
                    .giving(ThreadedStdout::give_to);
                let mut w = stream(&a, ctx, last, &mut |s| rows.row_owned(s))?;
                w.extend(rows.untimed_warning()?);
                finish(r, rows, &w)
            }
        }
    })
}

/// The switches of the source `a` asks for that its filters keep, each given to `row`; the
/// warnings (with the count of switches left out for an unknown process or time).
fn stream(
    a: &Args,
    ctx: &KernelContext<'_>,
    last: Option<Last>,
    row: &mut dyn FnMut(SwitchRow) -> std::io::Result<()>,
) -> anyhow::Result<Vec<Warning>> {
    let src = source(ctx, a.carved);
    let filter = SwitchFilter {
        pids: a.pid.clone(),
        tids: a.tid.clone(),
        since: a.since,
        until: a.until,
    };
    let mut stats = FilterStats::default();
    let mut w = cswitch::stream_with(ctx, src, a.cpu, last, a.per_record, &mut |s| {
        if filter.keeps(&s, &mut stats) {
            row(s)
        } else {
            Ok(())
        }
    })?;
    w.extend(stats.warnings("switches"));
    Ok(w)
}

/// `--svg`: the chart needs every row at once: collect them, draw, then list them.
fn with_chart(
    a: &Args,
    ctx: &KernelContext<'_>,
    last: Option<Last>,
    path: &Path,
    r: Renderer,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let mut switches = Vec::new();
    let mut w = stream(a, ctx, last, &mut |s| {
        switches.push(s);
        Ok(())
    })?;
    let (chart, empty) = chart(
        ctx,
        &a.kernel.dump.dump,
        &display(path),
        &switches,
        switches.len() as u64,
    );
    std::fs::write(path, &chart.svg).map_err(|e| anyhow::anyhow!("{}: {e}", display(path)))?;
    let mut rows = r
        .listing::<_, SwitchRow>(out, "cswitch")?
        .keep_untimed(a.keep_untimed);
    for s in &switches {
        rows.row(s)?;
    }
    w.extend(empty);
    w.extend(rows.untimed_warning()?);
    finish(r, rows, &w)
}

/// The lane chart of `switches` (rows of a listing of `listed` switches) of dump `dump`,
/// and the warning when it has no switch to draw (`shown`: the chart's file as the warning
/// names it).
pub fn chart(
    ctx: &KernelContext<'_>,
    dump: &Path,
    shown: &str,
    switches: &[SwitchRow],
    listed: u64,
) -> (svg::Drawn, Option<Warning>) {
    let name = dump
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let chart = svg::render(
        switches,
        &svg::Chart {
            dump_time: ctx.system_time().unwrap_or(0),
            dump: &name,
        },
    );
    let empty = (chart.spans == 0).then(|| {
        Warning::new(
            WarningKind::NotFound,
            format!(
                "{shown}: no context switch with a UTC time that fits the dump to draw ({listed} switches listed); the chart says so"
            ),
        )
    });
    (chart, empty)
}

//! `etwdump scan`: one pass over all physical memory for buffers, pending blocks and logger
//! contexts, live or not; optionally the orphans written as .etl files.

use super::common::{display, finish, overwrite_hint, renderer, with_kernel};
use super::flags::{KernelArgs, RowFormatArg};
use etwdump::etw::carve::Progress;
use etwdump::kernel::context::KernelContext;
use etwdump::report::scan::{Scan, ScanRow};
use etwdump::report::RowFormat;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    kernel: KernelArgs,
    /// Threads reading memory (default: every core)
    #[arg(long)]
    threads: Option<usize>,
    /// Also write each group of orphaned buffers as an .etl file in DIR, with manifest.json
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    output: Option<PathBuf>,
    /// Replace existing files in DIR
    #[arg(long)]
    overwrite: bool,
    /// jsonl: one JSON object per row (warnings as JSON lines on stderr)
    #[arg(long, value_enum, default_value = "table")]
    format: RowFormatArg,
}

pub fn run(a: Args, out: &mut dyn Write) -> anyhow::Result<()> {
    let r = renderer(a.format);
    with_kernel(&a.kernel, |ctx| {
        let bar = progress_bar();
        let scan = scan_watched(ctx, threads(a.threads), &|done, total| {
            if let Some(b) = &bar {
                b.set_length(total);
                b.set_position(done);
            }
        });
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        let mut rows = r.listing::<_, ScanRow>(&mut *out, "scan")?;
        for row in scan.rows() {
            rows.row(&row)?;
        }
        finish(r, rows, scan.warnings())?;
        let Some(dir) = &a.output else { return Ok(()) };
        let m = scan
            .extract(ctx, &display(&a.kernel.dump.dump), dir, a.overwrite)
            .map_err(overwrite_hint)?;
        // What was written, for people: JSON's stderr has only errors and JSON Lines' only
        // JSON warnings (docs/output-contract.md); manifest.json says it all.
        if matches!(r.format(), RowFormat::Json | RowFormat::Jsonl) {
            return Ok(());
        }
        for s in &m.sessions {
            eprintln!(
                "{}: {} carved buffers, {} records, sha256 {}",
                dir.join(&s.file).display(),
                s.buffers,
                s.records,
                s.sha256.as_deref().unwrap_or("not computed")
            );
        }
        Ok(())
    })
}

/// The scan's threads: `n` if given, else every core; 1 to 64.
pub fn threads(n: Option<usize>) -> usize {
    n.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, 64)
}

/// Scan `ctx`'s physical memory on `threads` threads; while it runs, `watch` is given the
/// pages done and the pages in all every 100 ms.
pub fn scan_watched(
    ctx: &KernelContext<'_>,
    threads: usize,
    watch: &(dyn Fn(u64, u64) + Sync),
) -> Scan {
    let progress = Progress::default();
    std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            while !progress.stop.load(Ordering::Relaxed) {
                watch(
                    progress.done.load(Ordering::Relaxed),
                    progress.total.load(Ordering::Relaxed),
                );
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        });
        let r = Scan::run(ctx, threads, &progress);
        progress.stop.store(true, Ordering::Relaxed);
        let _ = watcher.join();
        r
    })
}

/// The scan's progress bar on stderr when stderr is a terminal (None otherwise: silent).
fn progress_bar() -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal().then(|| {
        let b = indicatif::ProgressBar::new(0);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "scan {bar:40} {pos}/{len} pages ({per_sec}, {eta} left)",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    })
}

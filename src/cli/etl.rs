//! `etwdump etl`: the buffers and records of an .etl file; with `--events`, one row per
//! record of every file given, as `events` lists those of a dump.

use super::common::{display, emit, finish};
use super::flags::{FilterArgs, FormatArg, RowFormatArg};
use super::stdout::ThreadedStdout;
use etwdump::etl::reader;
use etwdump::render::output::Renderer;
use etwdump::report::cswitch::{self, SwitchRow};
use etwdump::report::etl::EtlReport;
use etwdump::report::events::{self, EventRow};
use etwdump::report::filter::FilterStats;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The .etl file (several with --events or --cswitch)
    #[arg(required = true, num_args = 1..)]
    file: Vec<PathBuf>,
    /// One row per record of each file's buffers (the columns, filters and formats of
    /// `events`; times converted with the file's own header), instead of the buffer list
    #[arg(long, conflicts_with = "cswitch")]
    events: bool,
    /// One row per context switch of the files' CSwitch events (0x0524) and compact batches
    /// (0x0525), per CPU in UTC order (the columns and formats of `cswitch`; process names
    /// from the files' own Process and Thread events, e.g. the rundown `extract` writes)
    #[arg(long)]
    cswitch: bool,
    /// --cswitch: only this CPU
    #[arg(long, requires = "cswitch")]
    cpu: Option<u64>,
    /// --cswitch: one row per record (a switch kept in two files is two rows)
    #[arg(long, requires = "cswitch")]
    per_record: bool,
    /// JSON Lines (--events, --cswitch): keep rows without a known time
    #[arg(long)]
    keep_untimed: bool,
    #[command(flatten)]
    filter: FilterArgs,
    /// table, json (and csv, jsonl with --events or --cswitch)
    #[arg(long, value_enum, default_value = "table")]
    format: RowFormatArg,
}

pub fn run(a: Args, out: &mut ThreadedStdout) -> anyhow::Result<()> {
    if a.events {
        return run_events(a, out);
    }
    if a.cswitch {
        return run_cswitch(a, out);
    }
    if a.file.len() > 1 {
        anyhow::bail!("several files are read with --events or --cswitch only");
    }
    if a.keep_untimed {
        anyhow::bail!("--keep-untimed: with --events or --cswitch only");
    }
    if a.filter.any() {
        anyhow::bail!("the record filters apply with --events only");
    }
    let format = FormatArg::try_from(a.format)
        .map_err(|f| anyhow::anyhow!("--format {f}: with --events only"))?;
    let name = display(&a.file[0]);
    let bytes = std::fs::read(&a.file[0]).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    let f = reader::read(&bytes);
    if let Some(why) = reader::not_an_etl(&bytes, &f) {
        anyhow::bail!("{name}: not an ETL file: {why}");
    }
    emit(out, format.into(), &EtlReport::new(name, f))
}

/// `--events`: every file's records, streamed through the filters.
fn run_events(a: Args, out: &mut ThreadedStdout) -> anyhow::Result<()> {
    let r = Renderer::from(a.format);
    let filter = a.filter.filter(Err(
        "an .etl file has no dump SystemTime to count back from".to_string(),
    ))?;
    let mut stats = FilterStats::default();
    let mut rows = r
        .listing::<_, EventRow>(out, "etl")?
        .keep_untimed(a.keep_untimed)
        // Rendered on other threads: a third less wall time on a 2-CPU machine
        // (docs/performance.md "Rendering"; context switches gain nothing).
        .parallel(0)
        .giving(ThreadedStdout::give_to);
    let mut warnings = Vec::new();
    let mut failed = None;
    for path in &a.file {
        let name = display(path);
        let mut each = |e: EventRow| {
            if filter.keeps(&e, &mut stats) {
                rows.row_owned(e)
            } else {
                Ok(())
            }
        };
        match stream_file(path, &name, &mut each) {
            Ok(w) => warnings.extend(w),
            Err(e) => {
                failed = Some(anyhow::anyhow!("{name}: {e}"));
                break;
            }
        }
    }
    warnings.extend(stats.warnings("records"));
    warnings.extend(rows.untimed_warning()?);
    // The rows so far are closed properly (valid JSON) before a failed file's error.
    finish(r, rows, &warnings)?;
    failed.map_or(Ok(()), Err)
}

/// `--cswitch`: the context switches of every file, merged per CPU in time order.
fn run_cswitch(a: Args, out: &mut ThreadedStdout) -> anyhow::Result<()> {
    let r = Renderer::from(a.format);
    let (filter, last) = a.filter.switch_filter()?;
    let mut files = Vec::new();
    for path in &a.file {
        let name = display(path);
        let file = std::fs::File::open(path).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        files.push(cswitch::EtlCswitchFile { name, file });
    }
    let mut stats = FilterStats::default();
    let mut rows = r
        .listing::<_, SwitchRow>(out, "etl")?
        .keep_untimed(a.keep_untimed);
    let res = cswitch::stream_etl(files, a.cpu, last, a.per_record, &mut |s| {
        if filter.keeps(&s, &mut stats) {
            rows.row_owned(s)
        } else {
            Ok(())
        }
    });
    let mut warnings = match res {
        Ok(w) => w,
        Err(e) => {
            finish(r, rows, &[])?;
            return Err(e.into());
        }
    };
    warnings.extend(stats.warnings("switches"));
    warnings.extend(rows.untimed_warning()?);
    finish(r, rows, &warnings)
}

/// The records of the .etl file at `path`, streamed to `each`.
fn stream_file(
    path: &std::path::Path,
    name: &str,
    each: &mut dyn FnMut(EventRow) -> std::io::Result<()>,
) -> std::io::Result<Vec<etwdump::warning::Warning>> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    events::stream_etl(name, &mut file, len, each)
}

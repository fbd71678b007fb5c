//! `etwdump collect`: every artefact of a dump in one directory, from one opening of the dump
//! and one loading of its symbols: each artefact made by its command's own model and
//! renderer (the same bytes the command writes, docs/reference.md "collect"), one failing not
//! stopping the others; then `warnings.jsonl`, `index.html` and `collect.json`.

use super::common::{display, overwrite_hint, warn_all, with_kernel};
use super::flags::KernelArgs;
use anyhow::Result;
use etwdump::etw::source::EtwSource;
use etwdump::kernel::context::KernelContext;
use etwdump::render::collect::{index_html, warnings_jsonl, Collected, Index};
use etwdump::render::output::{Render, Renderer};
use etwdump::render::rows::Row;
use etwdump::report::collect::{
    Artefact, CollectedWarning, Collection, FileEntry, OutputDir, OutputFile, Status, Summary,
};
use etwdump::report::cswitch::SwitchRow;
use etwdump::report::extract::Manifest;
use etwdump::report::overview::{LastSwitches, Overview, OverviewBuilder};
use etwdump::report::RowFormat;
use etwdump::warning::{Warning, WarningKind};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    kernel: KernelArgs,
    /// Output directory (created if needed; refused when it exists and is not empty)
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    output: PathBuf,
    /// Write into a DIR that is not empty, replacing the files of an earlier collection
    #[arg(long)]
    overwrite: bool,
    /// Threads of the scan of physical memory (default: every core)
    #[arg(long)]
    threads: Option<usize>,
}

/// Some artefacts failed, the others were written: exit status 1 (main.rs).
#[derive(Debug)]
pub struct Incomplete {
    pub failed: Vec<&'static str>,
    pub total: usize,
    pub dir: String,
}

impl std::fmt::Display for Incomplete {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of {} artefacts failed ({}); the others are written: {}/index.html and collect.json say why",
            self.failed.len(),
            self.total,
            self.failed.join(", "),
            self.dir
        )
    }
}

impl std::error::Error for Incomplete {}

/// Switches the chart keeps in all (spread over the CPUs): past this, it draws the last ones
/// of a window every CPU covers, and says so (the listing has them all).
const CHART_SWITCHES: usize = 100_000;

/// The steps, in order, as the progress bar names them.
const STEPS: [&str; 10] = [
    "info",
    "sessions",
    "buffers",
    "providers",
    "check",
    "etl (extract)",
    "cswitch and overview",
    "events",
    "scan",
    "warnings and index",
];

pub fn run(a: Args, out: &mut dyn Write) -> Result<()> {
    // Refused before the dump is read; checked again when the directory is made.
    OutputDir::check(&a.output, a.overwrite).map_err(overwrite_hint)?;
    with_kernel(&a.kernel, |ctx| {
        let dir = OutputDir::create(&a.output, a.overwrite).map_err(overwrite_hint)?;
        let mut c = Collector {
            ctx,
            dir: &dir,
            dump: &a.kernel.dump.dump,
            overwrite: a.overwrite,
            artefacts: Vec::new(),
            warnings: Vec::new(),
            summary: Summary::default(),
            overview: None,
            extract: None,
            steps: Steps::new(),
        };
        c.info();
        c.sessions();
        c.buffers();
        c.providers();
        c.check();
        c.etl();
        c.switches();
        c.events();
        c.scan(super::scan::threads(a.threads));
        c.finish(out)
    })
}

/// A collection under way.
struct Collector<'c, 'd, 'o> {
    ctx: &'c KernelContext<'d>,
    dir: &'o OutputDir,
    dump: &'o Path,
    overwrite: bool,
    artefacts: Vec<Artefact>,
    /// Each artefact's warnings, by artefact.
    warnings: Vec<(&'static str, Warning)>,
    summary: Summary,
    overview: Option<Overview>,
    extract: Option<Manifest>,
    steps: Steps,
}

/// What an artefact is: its name, in words, the command that writes the same files, and
/// the step of [`STEPS`] that makes it.
struct Spec {
    step: usize,
    name: &'static str,
    title: &'static str,
    command: &'static str,
}

const INFO: Spec = Spec {
    step: 0,
    name: "info",
    title: "What the dump is",
    command: "etwdump info DUMP --format json; etwdump info DUMP",
};
const SESSIONS: Spec = Spec {
    step: 1,
    name: "sessions",
    title: "The ETW sessions",
    command: "etwdump sessions DUMP --format json; --format csv",
};
const BUFFERS: Spec = Spec {
    step: 2,
    name: "buffers",
    title: "Every trace buffer the sessions hold",
    command: "etwdump buffers DUMP --format jsonl",
};
const PROVIDERS: Spec = Spec {
    step: 3,
    name: "providers",
    title: "The registered ETW providers (all of them)",
    command: "etwdump providers DUMP --all --format json",
};
const CHECK: Spec = Spec {
    step: 4,
    name: "check",
    title: "Tamper checks",
    command: "etwdump check DUMP --format json",
};
const ETL: Spec = Spec {
    step: 5,
    name: "etl",
    title: "Each session's buffers as an .etl file, with manifest.json",
    command: "etwdump extract DUMP -o DIR/etl",
};
const OVERVIEW: Spec = Spec {
    step: 6,
    name: "overview",
    title: "The first look: the dump, its sessions, each CPU's last switches",
    command: "etwdump overview DUMP",
};
const CSWITCH: Spec = Spec {
    step: 6,
    name: "cswitch",
    title: "Context switches per CPU in UTC order, and their lane chart",
    command: "etwdump cswitch DUMP --format jsonl; --format csv; --svg FILE",
};
const EVENTS: Spec = Spec {
    step: 7,
    name: "events",
    title: "One row per ETW record",
    command: "etwdump events DUMP --format jsonl",
};
const SCAN: Spec = Spec {
    step: 8,
    name: "scan",
    title: "Every buffer, pending block and logger context in physical memory; the orphans carved as .etl files",
    command: "etwdump scan DUMP --format json -o DIR/scan",
};
const WARNINGS: Spec = Spec {
    step: 9,
    name: "warnings",
    title: "Every warning and note of the artefacts, each once with the artefacts that gave it",
    command: "(stderr of each command with --format jsonl)",
};

/// The files of one artefact, as they are finished.
struct Files<'o> {
    dir: &'o OutputDir,
    done: Vec<FileEntry>,
}

impl<'o> Files<'o> {
    fn new(dir: &'o OutputDir) -> Self {
        Files {
            dir,
            done: Vec::new(),
        }
    }

    fn create(&self, name: &'static str) -> Result<OutputFile> {
        Ok(self.dir.file(name)?)
    }

    fn add(&mut self, f: OutputFile, rows: Option<u64>) -> Result<()> {
        self.done.push(f.finish(rows)?);
        Ok(())
    }

    /// `m` in `format`, written to `name`.
    fn model(
        &mut self,
        name: &'static str,
        format: RowFormat,
        m: &dyn Render,
        rows: Option<u64>,
    ) -> Result<()> {
        let mut f = self.create(name)?;
        Renderer::new(format).model(&mut f, m)?;
        self.add(f, rows)
    }

    /// A listing of `R` rows in `format` written to `name` as `stream` gives them to its
    /// callback (`stream` returns the listing's warnings; the JSON Lines' rows left out for
    /// want of a time add theirs, as the commands do). The rows written and the warnings.
    fn listing<R: Row>(
        &mut self,
        name: &'static str,
        format: RowFormat,
        command: &'static str,
        stream: impl FnOnce(&mut dyn FnMut(&R) -> std::io::Result<()>) -> Result<Vec<Warning>>,
    ) -> Result<(u64, Vec<Warning>)> {
        let mut rows = Renderer::new(format).listing::<_, R>(self.create(name)?, command)?;
        let mut w = stream(&mut |r| rows.row(r))?;
        w.extend(rows.untimed_warning()?);
        let n = rows.rows();
        let file = rows.finish(&w)?;
        self.add(file, Some(n))?;
        Ok((n, w))
    }

    /// An extraction's files in `sub`: manifest.json, then each .etl file (the size, records
    /// and SHA-256 its manifest gives).
    fn extracted(&mut self, sub: &str, m: &Manifest) -> Result<()> {
        self.done
            .push(self.dir.entry(&format!("{sub}/manifest.json"), None)?);
        for s in &m.sessions {
            self.done.push(FileEntry {
                path: format!("{sub}/{}", s.file),
                bytes: s.bytes,
                rows: Some(s.records as u64),
                // collect always hashes what it extracts.
                sha256: s.sha256.clone().unwrap_or_default(),
            });
        }
        Ok(())
    }
}

/// `body`'s result, or why it failed: its error, or the panic it raised (caught: a bug met
/// in one artefact stops no other).
fn attempt<T>(body: impl FnOnce() -> Result<T>) -> Result<T, String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(p) => Err(format!(
            "panicked: {}",
            p.downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".into())
        )),
    }
}

impl<'c, 'd, 'o> Collector<'c, 'd, 'o> {
    /// Make artefact `spec` with `body` (given its files and the progress) and record how it
    /// went: its files, its warnings, or why it failed (one artefact's failure stops no
    /// other). `body`'s value, None when it failed.
    fn artefact<T>(
        &mut self,
        spec: &Spec,
        body: impl FnOnce(&mut Files<'o>, &Steps) -> Result<(Vec<Warning>, T)>,
    ) -> Option<T> {
        self.steps.start(spec.step);
        let mut files = Files::new(self.dir);
        let steps = &self.steps;
        let (r, v) = match attempt(|| body(&mut files, steps)) {
            Ok((w, v)) => (Ok(w), Some(v)),
            Err(e) => (Err(e), None),
        };
        self.record(spec, files.done, r);
        v
    }

    fn record(&mut self, spec: &Spec, files: Vec<FileEntry>, r: Result<Vec<Warning>, String>) {
        let (error, warnings) = match r {
            Ok(w) => (None, w),
            Err(e) => (Some(e), Vec::new()),
        };
        self.artefacts.push(Artefact {
            name: spec.name,
            title: spec.title,
            command: spec.command,
            status: if error.is_some() {
                Status::Failed
            } else {
                Status::Ok
            },
            error,
            files,
            warnings: warnings.len() as u64,
        });
        self.warnings
            .extend(warnings.into_iter().map(|w| (spec.name, w)));
    }

    fn dump_name(&self) -> String {
        display(self.dump)
    }

    fn info(&mut self) {
        let ctx = self.ctx;
        let facts = self.artefact(&INFO, |f, _| {
            let info = etwdump::report::info::info_with(ctx);
            f.model("info.json", RowFormat::Json, &info, None)?;
            f.model("info.txt", RowFormat::Table, &info, None)?;
            let facts = (
                etwdump::report::overview::DumpFacts::of(&info),
                info.symbols.path.clone(),
            );
            Ok((info.warnings, facts))
        });
        if let Some((d, p)) = facts {
            self.summary.dump = Some(d);
            self.summary.symbols_path = p;
        }
    }

    fn sessions(&mut self) {
        let ctx = self.ctx;
        self.summary.sessions = self.artefact(&SESSIONS, |f, _| {
            let s = etwdump::report::sessions::Sessions::open(ctx);
            let records = Some(s.records().len() as u64);
            f.model("sessions.json", RowFormat::Json, &s, records)?;
            f.model("sessions.csv", RowFormat::Csv, &s, records)?;
            let n = s
                .list()
                .map_or_else(|| s.saved().len(), |l| l.sessions.len());
            Ok((s.warnings, n as u64))
        });
    }

    fn buffers(&mut self) {
        use etwdump::report::buffers::{self, BufferRow};
        let ctx = self.ctx;
        self.summary.buffers = self.artefact(&BUFFERS, |f, _| {
            let (n, w) =
                f.listing::<BufferRow>("buffers.jsonl", RowFormat::Jsonl, "buffers", |r| {
                    Ok(buffers::stream(ctx, None, r)?)
                })?;
            Ok((w, n))
        });
    }

    fn providers(&mut self) {
        use etwdump::report::providers::{self, ProviderRow};
        let ctx = self.ctx;
        self.summary.providers = self.artefact(&PROVIDERS, |f, _| {
            let (n, w) =
                f.listing::<ProviderRow>("providers.json", RowFormat::Json, "providers", |r| {
                    Ok(providers::stream(ctx, true, r)?)
                })?;
            Ok((w, n))
        });
    }

    fn check(&mut self) {
        let ctx = self.ctx;
        self.summary.findings = self.artefact(&CHECK, |f, _| {
            let r = etwdump::report::check::run(ctx);
            let n = r.findings.len() as u64;
            f.model("check.json", RowFormat::Json, &r, Some(n))?;
            Ok((r.warnings, n))
        });
    }

    fn etl(&mut self) {
        let (ctx, dir, overwrite, name) = (self.ctx, self.dir, self.overwrite, self.dump_name());
        self.extract = self.artefact(&ETL, |f, _| {
            let sub = dir.subdir("etl")?;
            let m = etwdump::report::extract::extract(ctx, &name, &sub, None, overwrite)
                .map_err(overwrite_hint)?;
            f.extracted("etl", &m)?;
            Ok((m.warnings.clone(), m))
        });
        if let Some(m) = &self.extract {
            self.summary.etl_files = Some(m.sessions.len() as u64);
            self.summary.etl_records = Some(m.sessions.iter().map(|s| s.records as u64).sum());
        }
    }

    /// `cswitch` and `overview` from one pass over the switches: the listing's rows go to
    /// cswitch.jsonl and cswitch.csv as they come, and to the overview's and the chart's
    /// bounded per-CPU windows; a write error stops the listing's files, not the pass.
    fn switches(&mut self) {
        self.steps.start(CSWITCH.step);
        let (ctx, dir, dump) = (self.ctx, self.dir, self.dump);
        let pass = attempt(|| switch_pass(ctx, dir, dump)).unwrap_or_else(SwitchPass::failed);
        let mut files = Files::new(dir);
        let r = pass.overview.and_then(|o| {
            let written = files.model("overview.txt", RowFormat::Table, &o, None);
            let w = o.warnings.clone();
            self.overview = Some(o);
            written.map(|()| w).map_err(|e| e.to_string())
        });
        self.record(&OVERVIEW, files.done, r);
        self.summary.switches = pass.error.is_none().then_some(pass.listed);
        let r = match pass.error {
            Some(e) => Err(e),
            None => Ok(pass.warnings),
        };
        self.record(&CSWITCH, pass.files, r);
    }

    fn events(&mut self) {
        use etwdump::report::events::{self, EventRow};
        let ctx = self.ctx;
        self.summary.events = self.artefact(&EVENTS, |f, _| {
            let mut all = 0u64;
            let (_, w) =
                f.listing::<EventRow>("events.jsonl", RowFormat::Jsonl, "events", |r| {
                    let src = EtwSource::open(ctx, None);
                    Ok(events::stream_from(ctx, src, &mut |e| {
                        all += 1;
                        r(&e)
                    })?)
                })?;
            Ok((w, all))
        });
    }

    fn scan(&mut self, threads: usize) {
        use etwdump::report::scan::ScanRow;
        let (ctx, dir, overwrite, name) = (self.ctx, self.dir, self.overwrite, self.dump_name());
        let counts = self.artefact(&SCAN, |f, steps| {
            let scan = super::scan::scan_watched(ctx, threads, &|d, t| steps.detail(d, t));
            let (objects, _) = f.listing::<ScanRow>("scan.json", RowFormat::Json, "scan", |r| {
                for row in &scan.rows() {
                    r(row)?;
                }
                Ok(scan.warnings().to_vec())
            })?;
            let sub = dir.subdir("scan")?;
            let m = scan
                .extract(ctx, &name, &sub, overwrite)
                .map_err(overwrite_hint)?;
            f.extracted("scan", &m)?;
            Ok((m.warnings, (objects, m.sessions.len() as u64)))
        });
        self.summary.scan_objects = counts.map(|c| c.0);
        self.summary.carved_files = counts.map(|c| c.1);
    }

    /// warnings.jsonl, index.html and collect.json; the lines on stdout and the warnings on
    /// stderr. An error when an artefact failed ([`Incomplete`]).
    fn finish(mut self, out: &mut dyn Write) -> Result<()> {
        let warnings = CollectedWarning::dedup(std::mem::take(&mut self.warnings));
        let dir = self.dir;
        self.artefact(&WARNINGS, |f, _| {
            let mut file = f.create("warnings.jsonl")?;
            let n = warnings_jsonl(&mut file, &warnings)?;
            f.add(file, Some(n))?;
            Ok((Vec::new(), ()))
        });
        let (w, notes) = CollectedWarning::counts(&warnings);
        self.summary.warnings = w;
        self.summary.notes = notes;
        self.summary.artefacts = self.artefacts.len() as u64;
        self.summary.failed = self
            .artefacts
            .iter()
            .filter(|a| a.status == Status::Failed)
            .count() as u64;
        let mut collection = Collection {
            format_version: etwdump::report::FORMAT_VERSION,
            command: "collect",
            dump: self.dump_name(),
            etwdump_version: env!("CARGO_PKG_VERSION"),
            summary: self.summary,
            artefacts: self.artefacts,
            warnings,
            index: None,
        };
        let page = index_html(&Index {
            collection: &collection,
            overview: self.overview.as_ref(),
            extract: self.extract.as_ref(),
        });
        let mut f = dir.file("index.html")?;
        f.write_all(page.as_bytes())?;
        collection.index = Some(f.finish(None)?);
        let mut f = dir.file("collect.json")?;
        Renderer::new(RowFormat::Json).model(
            &mut f,
            &Collected {
                dir: dir.path(),
                collection: &collection,
            },
        )?;
        f.finish(None)?;
        self.steps.finish();
        let shown = Collected {
            dir: dir.path(),
            collection: &collection,
        };
        Renderer::new(RowFormat::Table).model(out, &shown)?;
        let all: Vec<Warning> = collection
            .warnings
            .iter()
            .map(|w| w.warning.clone())
            .collect();
        warn_all(&all, false);
        let failed: Vec<&'static str> = collection
            .artefacts
            .iter()
            .filter(|a| a.status == Status::Failed)
            .map(|a| a.name)
            .collect();
        if failed.is_empty() {
            return Ok(());
        }
        Err(Incomplete {
            failed,
            total: collection.artefacts.len(),
            dir: display(dir.path()),
        }
        .into())
    }
}

/// What the pass over the switches gave: the overview (or why not), the listing's files (or
/// why they stopped), its rows and warnings.
struct SwitchPass {
    overview: Result<Overview, String>,
    files: Vec<FileEntry>,
    error: Option<String>,
    listed: u64,
    warnings: Vec<Warning>,
}

impl SwitchPass {
    fn failed(why: String) -> SwitchPass {
        SwitchPass {
            overview: Err(why.clone()),
            files: Vec::new(),
            error: Some(why),
            listed: 0,
            warnings: Vec::new(),
        }
    }
}

/// The pass of [`Collector::switches`].
fn switch_pass(ctx: &KernelContext<'_>, dir: &OutputDir, dump: &Path) -> Result<SwitchPass> {
    let src = EtwSource::open(ctx, None);
    let mut overview = OverviewBuilder::new(ctx, &src, 5);
    let per_cpu = (CHART_SWITCHES / ctx.processors().max(1) as usize).max(100);
    let mut chart = LastSwitches::new(per_cpu);
    let mut files = Files::new(dir);
    let jsonl = Renderer::new(RowFormat::Jsonl)
        .listing::<_, SwitchRow>(files.create("cswitch.jsonl")?, "cswitch")?;
    let csv = Renderer::new(RowFormat::Csv)
        .listing::<_, SwitchRow>(files.create("cswitch.csv")?, "cswitch")?;
    let mut listing = Some((jsonl, csv));
    let mut stopped: Option<std::io::Error> = None;
    let mut listed = 0u64;
    let w = etwdump::report::cswitch::stream_with(ctx, src, None, None, false, &mut |r| {
        listed += 1;
        overview.switch(&r);
        chart.push(&r);
        if let Some((j, c)) = &mut listing {
            if let Err(e) = j.row(&r).and_then(|()| c.row(&r)) {
                stopped = Some(e);
                listing = None;
            }
        }
        Ok(())
    })?;
    let overview = overview.finish(w.clone());
    let mut warnings = w;
    let written = match (listing, stopped) {
        (Some((j, c)), None) => listing_files(&mut files, j, c, &mut warnings)
            .and_then(|()| chart_file(ctx, &mut files, dump, chart, listed, &mut warnings)),
        (_, Some(e)) => Err(e.into()),
        (None, None) => Ok(()),
    };
    Ok(SwitchPass {
        overview: Ok(overview),
        files: files.done,
        error: written.err().map(|e| e.to_string()),
        listed,
        warnings,
    })
}

/// End cswitch.jsonl and cswitch.csv (the JSON Lines' warning about rows without a time
/// into `warnings`).
fn listing_files(
    files: &mut Files<'_>,
    mut jsonl: etwdump::render::rows::RowWriter<OutputFile, SwitchRow>,
    csv: etwdump::render::rows::RowWriter<OutputFile, SwitchRow>,
    warnings: &mut Vec<Warning>,
) -> Result<()> {
    warnings.extend(jsonl.untimed_warning()?);
    let (lines, rows) = (jsonl.rows(), csv.rows());
    let f = jsonl.finish(warnings)?;
    files.add(f, Some(lines))?;
    let f = csv.finish(warnings)?;
    files.add(f, Some(rows))
}

/// cswitch.svg: the chart of the switches `chart` kept (all of them, unless the listing was
/// longer than the chart's bound: then a warning says which window it draws).
fn chart_file(
    ctx: &KernelContext<'_>,
    files: &mut Files<'_>,
    dump: &Path,
    chart: LastSwitches,
    listed: u64,
    warnings: &mut Vec<Warning>,
) -> Result<()> {
    let per_cpu_cut = chart.dropped();
    let (rows, start) = chart.window();
    let (drawn, empty) = super::cswitch::chart(ctx, dump, "cswitch.svg", &rows, listed);
    if let Some(start) = start {
        warnings.push(Warning::new(
            WarningKind::OutputBound,
            format!(
                "cswitch.svg: the chart draws the {} switches from {} on, a window every CPU covers ({per_cpu_cut} earlier switches not drawn, at most {CHART_SWITCHES} in all); cswitch.jsonl and cswitch.csv list all {listed}",
                drawn.spans,
                etwdump::time::filetime_to_iso8601(start)
            ),
        ));
    }
    warnings.extend(empty);
    let mut f = files.create("cswitch.svg")?;
    f.write_all(drawn.svg.as_bytes())?;
    files.add(f, Some(drawn.spans as u64))
}

/// The progress on stderr when it is a terminal: the step under way by name, the steps done;
/// nothing otherwise.
struct Steps {
    bar: Option<indicatif::ProgressBar>,
}

impl Steps {
    fn new() -> Steps {
        use std::io::IsTerminal;
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = indicatif::ProgressBar::new(STEPS.len() as u64);
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "collect {bar:30} {pos}/{len} {msg} ({elapsed})",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b.enable_steady_tick(std::time::Duration::from_millis(200));
            b
        });
        Steps { bar }
    }

    /// Step `i` of [`STEPS`] begins (those before it are done).
    fn start(&self, i: usize) {
        if let Some(b) = &self.bar {
            b.set_position(i as u64);
            b.set_message(STEPS[i]);
        }
    }

    /// The scan's pages done of all.
    fn detail(&self, done: u64, total: u64) {
        if let Some(b) = &self.bar {
            b.set_message(format!("scan: {done}/{total} pages"));
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

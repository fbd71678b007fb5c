//! The sequence every command repeats: open the dump (its one-line warnings on stderr), build
//! the [`KernelContext`], print the model with the run's [`Renderer`], then the warnings.

use super::flags::{DumpArgs, KernelArgs, RowFormatArg, SessionArg, SymbolArgs};
use anyhow::Result;
use etwdump::dump::OpenOptions;
use etwdump::etw::source::EtwSource;
use etwdump::kernel::context::KernelContext;
use etwdump::mem::Memory;
use etwdump::render::output::{self, Render, Renderer};
use etwdump::render::rows::{Row, RowWriter};
use etwdump::render::text::{json_terminal_safe, printable};
use etwdump::report::extract::ExtractError;
use etwdump::report::RowFormat;
use etwdump::symbols::SymbolError;
use etwdump::warning::Warning;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// The run's stderr carries only JSON warnings (`--format jsonl`): the dump-level warnings
/// printed when the dump is opened are JSON lines too.
static JSON_STDERR: AtomicBool = AtomicBool::new(false);

/// The renderer of a listing's `--format`; with JSON Lines, every warning on stderr is a JSON
/// line, those printed when the dump is opened (TRUNCATED DUMP, IMAGE) included
/// (docs/output-contract.md).
pub fn renderer(f: RowFormatArg) -> Renderer {
    let r = Renderer::from(f);
    JSON_STDERR.store(r.json_warnings(), Ordering::Relaxed);
    r
}

/// How a dump is opened: [`etwdump::kernel::discover::open`] (every command but `info` and
/// `read`) or `open_container` (an ELF or VMware image without Windows is still described).
pub type Opener = fn(&Path, OpenOptions) -> Result<Memory, etwdump::dump::DumpError>;

/// Open the dump, build its kernel context with the symbols asked for, and run `body` on it.
pub fn with_kernel<T>(
    k: &KernelArgs,
    body: impl FnOnce(&KernelContext<'_>) -> Result<T>,
) -> Result<T> {
    with_kernel_by(etwdump::kernel::discover::open, &k.dump, &k.symbols, body)
}

/// [`with_kernel`] for a command with `--session`: the selector is checked against the
/// dump's sessions before `body` runs with it.
pub fn with_session<T>(
    k: &KernelArgs,
    s: &SessionArg,
    body: impl FnOnce(&KernelContext<'_>, Option<&str>) -> Result<T>,
) -> Result<T> {
    with_kernel(k, |ctx| {
        let sel = s.session.as_deref();
        require_session(ctx, sel)?;
        body(ctx, sel)
    })
}

/// [`with_kernel`], the dump opened by `how`.
pub fn with_kernel_by<T>(
    how: Opener,
    dump: &DumpArgs,
    symbols: &SymbolArgs,
    body: impl FnOnce(&KernelContext<'_>) -> Result<T>,
) -> Result<T> {
    let d = open_with(dump, how)?;
    let ctx = KernelContext::open_memory(&d, &symbols.options()).map_err(|e| match e {
        // A store or server that does not have the PDB: the next step that works is the
        // built-in layouts, which every command uses without symbol options.
        SymbolError::NotFetched { .. } | SymbolError::NotInStore { .. } => anyhow::anyhow!(
            "{e} (run without --symbols/--symbol-server/--fetch-symbols to use the built-in layouts for this build; `info` says how each is checked against memory)"
        ),
        e => e.into(),
    })?;
    let out = body(&ctx);
    read_warnings(&d.dump, &dump.dump);
    out
}

/// Problems met while reading pages (a compressed block of a hibernation file that cannot be
/// decoded), once each, after the command's output.
pub fn read_warnings(d: &etwdump::dump::DumpFile, path: &Path) {
    for w in d.read_warnings() {
        warn_opened(&w, format!("DAMAGED BLOCK ({}): {w}", display(path)));
    }
}

/// Print a model held whole, then the warnings it leaves to stderr.
pub fn emit(out: &mut dyn Write, r: Renderer, m: &(impl Render + ?Sized)) -> Result<()> {
    r.model(out, m)?;
    warn_all(m.stderr_warnings(r.format()), r.json_warnings());
    Ok(())
}

/// End a streamed listing with its warnings: in the JSON envelope, or on stderr (JSON lines
/// for JSON Lines output) in the other formats.
pub fn finish<W: Write, R: Row>(r: Renderer, rows: RowWriter<W, R>, w: &[Warning]) -> Result<()> {
    rows.finish(w)?;
    if r.format() != RowFormat::Json {
        warn_all(w, r.json_warnings());
    }
    Ok(())
}

/// Open `a` with `how`; a truncated dump and a memory image's layout warnings are reported on
/// stderr here, once per command.
pub fn open_with(a: &DumpArgs, how: Opener) -> Result<Memory> {
    if a.dump.is_dir() {
        anyhow::bail!(
            "{}: a directory, not a dump: give the dump or memory image file itself (.dmp, raw, ELF core, .vmem/.vmss/.vmsn)",
            display(&a.dump)
        );
    }
    let opts = OpenOptions {
        allow_truncated: !a.strict || a.allow_truncated,
    };
    // Crash dumps and memory images; an image's architecture and DTB are found here.
    let d = match &a.layout {
        Some(l) => {
            let layout = etwdump::dump::layout::Layout::read(l)
                .map_err(|e| anyhow::anyhow!("{}: {e}", display(l)))?;
            etwdump::kernel::discover::open_with_layout(&a.dump, &layout, opts)
        }
        None => how(&a.dump, opts),
    }
    .map_err(|e| anyhow::anyhow!("{}: {e}", display(&a.dump)))?;
    // One prominent line per command, whatever it reads afterwards.
    if let Some(t) = d.truncation() {
        warn_opened(
            t,
            format!(
                "TRUNCATED DUMP ({}): {t}; whatever lies past the end is reported as not in the dump (--strict refuses such dumps)",
                display(&a.dump)
            ),
        );
    }
    // A memory image's layout warnings (a partial last page, memory a layout places past
    // the data, page tables naming pages beyond the image) concern every command.
    if d.headerless() {
        for w in d
            .warnings()
            .iter()
            .filter(|w| w.kind != etwdump::dump::TRUNCATION)
            .chain(&d.machine.warnings)
        {
            warn_opened(w, format!("IMAGE ({}): {w}", display(&a.dump)));
        }
    }
    Ok(d)
}

/// A `--session` selector that names no session is an error, listing the sessions there are.
fn require_session(ctx: &KernelContext<'_>, sel: Option<&str>) -> Result<()> {
    let Some(sel) = sel else { return Ok(()) };
    let src = EtwSource::open_sessions(ctx);
    let known: Vec<(Option<u64>, Option<etwdump::text::Untrusted>)> = src
        .sessions()
        .iter()
        .map(|s| (s.logger_id, s.name().cloned()))
        .collect();
    if src.sessions().iter().any(|s| s.selected(Some(sel))) {
        return Ok(());
    }
    let list = known
        .iter()
        .map(|(id, name)| {
            format!(
                "{} {}",
                id.map_or("?".into(), |i| i.to_string()),
                etwdump::text::shown_or(name.as_ref(), "(unreadable)")
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    anyhow::bail!(
        "--session {}: no such session (by logger id or exact name); the sessions are: {}",
        printable(sel),
        if list.is_empty() { "none".into() } else { list }
    )
}

/// The ETW source of a command: the live sessions', or (`--carved`) the buffers that nothing
/// leads to any more, found by a pass over all physical memory on every core.
pub fn source<'c, 'd>(ctx: &'c KernelContext<'d>, carved: bool) -> EtwSource<'c, 'd> {
    if carved {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        EtwSource::open_carved(ctx, threads)
    } else {
        EtwSource::open(ctx, None)
    }
}

/// An output that exists and was not to be replaced: the error with the option that works.
pub fn overwrite_hint(e: ExtractError) -> anyhow::Error {
    match e {
        ExtractError::Exists(_) => anyhow::anyhow!("{e} (give --overwrite to replace it)"),
        e => e.into(),
    }
}

pub fn display(p: &Path) -> String {
    p.display().to_string()
}

/// One warning on stderr, with text from memory made safe for a terminal.
pub fn warn(w: &str) {
    eprintln!("warning: {}", printable(w));
}

/// A warning met when the dump was opened, as `message` (what the dump is and what it means
/// for every command): a `warning:` line, or a JSON line with JSON Lines output.
fn warn_opened(w: &Warning, message: String) {
    if JSON_STDERR.load(Ordering::Relaxed) {
        warn_all(
            &[Warning {
                message,
                ..w.clone()
            }],
            true,
        );
    } else {
        warn(&message);
    }
}

/// Warnings on stderr: `warning: <message>` lines (notes as `note:` lines with `-v`, else one
/// line counting them), or (JSON Lines output) one JSON object per warning and note,
/// machine-readable like the rows on stdout.
pub fn warn_all(warnings: &[Warning], json: bool) {
    if json {
        for w in warnings {
            if let Ok(mut line) = serde_json::to_vec(w) {
                json_terminal_safe(&mut line);
                eprintln!("{}", String::from_utf8_lossy(&line));
            }
        }
        return;
    }
    for w in warnings.iter().filter(|w| output::shown(w)) {
        eprintln!("{}", output::text_line(w));
    }
    if let Some(line) = output::hidden_notes_line(warnings) {
        eprintln!("{line}");
    }
}

//! The etwdump command line: a thin layer over the library. The commands are units of
//! [`cli`], one file each (args -> one library call -> model -> the renderer `--format`
//! chose); this file holds only the command list and the exit code.

mod cli;

/// mimalloc instead of glibc's malloc: the listings allocate for each row and free it on the
/// rendering thread (docs/performance.md "Rendering": measured there).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{CommandFactory, Parser, Subcommand};
use std::io::Write;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "etwdump",
    version,
    about = "Recover Event Tracing for Windows (ETW) data from Windows kernel crash dumps"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Also print notes: how etwdump found what it reports (values inferred from other
    /// evidence, routes taken). Warnings, which change what the output means, are always
    /// printed; JSON outputs keep both, each with its `level`
    #[arg(short, long, global = true)]
    verbose: bool,
}

#[derive(Subcommand)]
enum Command {
    /// A shell completion script on stdout (e.g. `etwdump completions bash >
    /// ~/.local/share/bash-completion/completions/etwdump`)
    Completions(cli::completions::Args),
    /// The manual page (roff) on stdout, every command and option (`etwdump manpage >
    /// etwdump.1; man ./etwdump.1`)
    Manpage,
    /// The first look: the dump, its ETW sessions with the buffers found for each, and each
    /// CPU's last context switches before the dump (UTC times, processes); warnings counted
    Overview(cli::overview::Args),
    /// What the dump is: architecture, dump type, Windows build, bug check, kernel and its PDB
    Info(cli::info::Args),
    /// The ETW sessions (loggers) active when the dump was taken
    Sessions(cli::sessions::Args),
    /// Every trace buffer the sessions still hold in memory
    Buffers(cli::buffers::Args),
    /// The registered ETW providers (the kernel's GUID table): GUID, name, each registration
    /// (kernel, or the registering process) and the sessions enabling it (level, keywords)
    Providers(cli::providers::Args),
    /// Tamper checks: the kernel's provider handles, provider enable state, sessions'
    /// GetCpuClock and consumers, and each process's ntdll EtwEventWrite family, against what
    /// a clean system holds (docs/reference.md "Providers and tamper checks")
    Check(cli::check::Args),
    /// Write each session's in-memory buffers as an .etl file, plus manifest.json
    Extract(cli::extract::Args),
    /// Every trace buffer, pending CCSWAP block and logger context in physical memory, live or
    /// not: one pass over all memory; orphans (stopped sessions' memory) grouped into sessions
    Scan(cli::scan::Args),
    /// Context switches per CPU in UTC order: pending (never flushed) CCSWAP blocks, and 0x0525
    /// batches and 0x0524 events in the recovered buffers, with UTC times and process names;
    /// one row per switch, listing every session's record of it (`--per-record`: one row per
    /// record)
    Cswitch(cli::cswitch::Args),
    /// One row per ETW record in the dump's buffers (full, bitmap and triage dumps: the saved
    /// windows and the ETW secondary data), with hook names, providers, UTC times and
    /// interrupt/DPC routines resolved to module+offset
    Events(cli::events::Args),
    /// Walk the buffers and records of an .etl file
    Etl(cli::etl::Args),
    /// Every artefact in one run, into DIR: info, overview, sessions, buffers, providers,
    /// tamper checks, .etl files, context switches (JSON Lines, CSV, SVG chart), events, the
    /// scan with its carved .etl files, the warnings, collect.json and index.html linking them
    Collect(cli::collect::Args),
    /// Structure layouts and global symbols as etwdump reads them from a PDB or ISF file
    /// (or, given a dump, from the symbols resolved for its kernel)
    Symbols(cli::symbols::Args),
    /// Bytes at a virtual (default) or physical address
    Read(cli::read::Args),
}

/// Run one command, its output buffered and written on a thread of its own (listings of
/// millions of rows are written as they are decoded; a full pipe does not stop the decoding).
fn run(cli: Cli) -> anyhow::Result<()> {
    etwdump::render::output::show_notes(cli.verbose);
    let mut stdout = cli::stdout::ThreadedStdout::new();
    match cli.command {
        Command::Completions(a) => cli::completions::run(a, Cli::command(), &mut stdout),
        Command::Manpage => cli::manpage::run(Cli::command(), &mut stdout),
        Command::Overview(a) => cli::overview::run(a, &mut stdout),
        Command::Info(a) => cli::info::run(a, &mut stdout),
        Command::Sessions(a) => cli::sessions::run(a, &mut stdout),
        Command::Buffers(a) => cli::buffers::run(a, &mut stdout),
        Command::Providers(a) => cli::providers::run(a, &mut stdout),
        Command::Check(a) => cli::check::run(a, &mut stdout),
        Command::Extract(a) => cli::extract::run(a, &mut stdout),
        Command::Scan(a) => cli::scan::run(a, &mut stdout),
        Command::Cswitch(a) => cli::cswitch::run(a, &mut stdout),
        Command::Events(a) => cli::events::run(a, &mut stdout),
        Command::Etl(a) => cli::etl::run(a, &mut stdout),
        Command::Collect(a) => cli::collect::run(a, &mut stdout),
        Command::Symbols(a) => cli::symbols::run(a, &mut stdout),
        Command::Read(a) => cli::read::run(a, &mut stdout),
    }?;
    stdout.flush()?;
    Ok(())
}

fn main() -> ExitCode {
    // No transparent huge pages for this process: with mimalloc they cost 25-40 % more peak
    // resident memory on the listings and their zeroing shows in the profile
    // (docs/performance.md "Rendering").
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_THP_DISABLE takes integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
    let cli = Cli::parse();
    let code = match run(cli) {
        Ok(()) => 0,
        Err(e) => {
            // A closed pipe (`etwdump ... | head`) is not an error worth a message.
            match e.downcast_ref::<std::io::Error>() {
                Some(io) if io.kind() == std::io::ErrorKind::BrokenPipe => 0,
                _ => {
                    // Errors quote the input (names, tags, paths from a server): one escaped
                    // line.
                    eprintln!("etwdump: error: {}", etwdump::text::escape(&e.to_string()));
                    cli::exit_status(&e)
                }
            }
        }
    };
    exit_now(code)
}

/// Leave with `code` without the process's teardown. What etwdump writes is out by then: its
/// stdout thread is flushed and joined before `run` returns, std's own stdout buffer is flushed
/// here, stderr is unbuffered, and every file is closed. What is skipped is the allocator
/// giving its freed memory back to the system a page run at a time (over a hundred `madvise`
/// calls after `symbols`, more after a large listing), which the kernel's unmapping of the
/// process does at once.
fn exit_now(code: u8) -> ExitCode {
    let _ = std::io::stdout().flush();
    #[cfg(unix)]
    // SAFETY: _exit takes an integer and ends the process; nothing of this process runs
    // after it, and nothing left unflushed is needed (above).
    unsafe {
        libc::_exit(i32::from(code))
    }
    #[cfg(not(unix))]
    ExitCode::from(code)
}

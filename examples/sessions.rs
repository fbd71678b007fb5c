//! The library in one screen: open a Windows memory dump or image, load the kernel's symbols
//! (a PDB, an ISF, or none: the built-in layouts), list the ETW sessions, then stream every
//! record of their in-memory buffers with its UTC time.
//!
//! `cargo run --release --example sessions -- DUMP [PDB]`

use etwdump::dump::OpenOptions;
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use etwdump::kernel::discover;
use etwdump::report::events;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args_os().skip(1).map(PathBuf::from);
    let dump = args.next().ok_or("usage: sessions DUMP [PDB]")?;
    // The container (crash dump, raw/ELF/VMware image) and the machine discovery found in it
    // (architecture, page-table root).
    let memory = discover::open(&dump, OpenOptions::default())?;
    // Symbols: an explicit PDB here; without one, built-in layouts of the kernel's build.
    let options = SymbolOptions {
        pdb: args.next(),
        ..SymbolOptions::default()
    };
    let ctx = KernelContext::open_memory(&memory, &options)?;

    // Sessions: names and log files are text from the dump (`Untrusted`): its Display form is
    // terminal-safe, its JSON form exact.
    // `open` also finds each session's buffers (`open_sessions` would list the sessions only).
    let source = etwdump::etw::source::EtwSource::open(&ctx, None);
    for s in source.sessions() {
        let id = s.logger_id.map_or("?".to_string(), |i| i.to_string());
        let name = etwdump::text::shown_or(s.name(), "(unreadable)");
        println!("logger {id}: {name} ({} buffers found)", s.units);
    }

    // Records, streamed one buffer at a time.
    let mut n = 0u64;
    let warnings = events::stream_from(&ctx, source, &mut |row| {
        n += 1;
        if n <= 5 {
            println!(
                "{} cpu {} {} {}",
                row.time.as_deref().unwrap_or("(no time)"),
                row.cpu.map_or("?".to_string(), |c| c.to_string()),
                row.header_type,
                row.hook_name.unwrap_or("")
            );
        }
        Ok(())
    })?;
    println!("{n} records");
    for w in &warnings {
        eprintln!("warning: {}", etwdump::text::printable(&w.message));
    }
    Ok(())
}

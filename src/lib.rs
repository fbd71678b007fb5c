//! etwdump: recover Event Tracing for Windows (ETW) state from Windows kernel memory (crash
//! dumps of every kind, raw, ELF and VMware memory images).
//!
//! # Using the library
//!
//! The path every command of the CLI takes, and the one library users should take:
//!
//! 1. [`kernel::discover::open`] opens a file through the container registry of [`dump`] and
//!    discovers its machine (architecture, page-table root): a [`mem::Memory`].
//! 2. [`kernel::context::KernelContext::open_memory`] finds the kernel and loads its symbols
//!    as [`kernel::context::SymbolOptions`] say (a PDB, an ISF, symbol stores or servers, or
//!    none: built-in layouts, each confirmed against memory where it can be).
//! 3. [`etw::source::EtwSource`] is the ETW state of any dump kind: its sessions, the units
//!    of trace data (buffers, a triage dump's saved windows) with their clocks.
//! 4. The models in [`report`] are what the commands print (sessions, buffers, events,
//!    cswitch, extract, check, ...); [`render`] prints them as table, CSV, JSON or JSON Lines.
//!    Per-record listings stream (`report::events::stream`, `report::cswitch::stream`): one
//!    buffer in memory at a time.
//!
//! ```no_run
//! use etwdump::dump::OpenOptions;
//! use etwdump::kernel::context::{KernelContext, SymbolOptions};
//! use etwdump::kernel::discover;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let memory = discover::open("memory.dmp".as_ref(), OpenOptions::default())?;
//! let options = SymbolOptions {
//!     pdb: Some("ntkrnlmp.pdb".into()),
//!     ..SymbolOptions::default()
//! };
//! let ctx = KernelContext::open_memory(&memory, &options)?;
//! let source = etwdump::etw::source::EtwSource::open(&ctx, None);
//! for s in source.sessions() {
//!     // Text from the dump is `text::Untrusted`: displayed escaped, serialized exactly.
//!     println!("{:?} {}", s.logger_id, etwdump::text::shown_or(s.name(), "(unreadable)"));
//! }
//! let warnings = etwdump::report::events::stream_from(&ctx, source, &mut |row| {
//!     println!("{:?} {}", row.time, row.header_type);
//!     Ok(())
//! })?;
//! # let _ = warnings;
//! # Ok(())
//! # }
//! ```
//!
//! `examples/sessions.rs` is the same as a program (`cargo run --example sessions -- DUMP
//! [PDB]`).
//!
//! Extension points, public on purpose: [`dump::PhysicalMemory`] (a new container of physical
//! memory, e.g. a compressed one), [`mem::MmuSpec`] / [`mem::PagingMode`] (a new paging mode),
//! [`text::Untrusted`] (a new source of text from the input).
//!
//! What is public and what is not: the items above, the models and everything the CLI uses
//! (the CLI is a client of this library like any other: `src/cli/` only calls it) are public;
//! an item that nothing outside the library uses is `pub(crate)` (`tools/pub_sweep.py` finds
//! them). The models' fields are the output contract (docs/output-contract.md).
//!
//! # Layers
//!
//! Each depends only on the ones before it (`tests/architecture.rs`):
//! - [`addr`], [`bytes`], [`time`], [`text`], [`warning`]: foundations (address newtypes,
//!   bounded little-endian reads, FILETIME text and plausibility, untrusted text, typed
//!   warnings);
//! - [`dump`]: the containers (crash dumps: full, bitmap, triage; raw, ELF core, VMware
//!   images; a host framework's `--layout`), each giving physical memory page by page;
//! - [`mem`]: the machine and virtual memory (the MMU as data: x64 4- and 5-level, PAE,
//!   non-PAE; triage VA blocks; the bounded list walker);
//! - [`symbols`]: layouts, enums and RVAs from a PDB, an ISF, symbol stores and servers, or
//!   the built-in tables;
//! - [`kernel`]: kernel objects through typed views (KDBG, KUSER_SHARED_DATA, modules,
//!   processes, pool);
//! - [`etl`]: the trace-buffer and .etl formats; [`decode`]: record payloads;
//! - [`etw`]: ETW state in memory (logger array, sessions, buffers, pending batches, clocks,
//!   carving, providers, tamper checks);
//! - [`report`]: the commands' models; [`render`]: their text.

pub mod addr;
pub mod bytes;
pub mod decode;
pub mod dump;
pub mod etl;
pub mod etw;
pub mod kernel;
pub mod mem;
pub mod render;
pub mod report;
pub mod symbols;
pub mod text;
pub mod time;
pub mod warning;

//! The crate-free PDB reader (`etwdump::symbols::pdb::load_bytes`) against the `pdb` crate's
//! loader it replaced (`etwdump::symbols::pdb_reference::load_bytes`, panics contained) on an
//! arbitrary input: the reader must not panic, and wherever the crate's loader reads the input
//! the reader must give the same `PdbContents` (identity, pointer size, machine, layouts,
//! enumerations, global symbols), except that a structure or enumeration filed under another
//! hash in the TPI hash stream (which the crate never read) may be missing: every layout and
//! enumeration given is then still the crate's (`symbols::codeview`). Seeds: `corpus/pdb_load/` (the tiny PDBs) and, with
//! `FULL_PDB_SEEDS=1`, the fixture PDBs.
//! Run with `-rss_limit_mb=2048` (the crate's loader, not the reader, may reserve memory for a
//! count in a damaged argument list inside a field list; see fuzz/README.md).
#![no_main]

// Linked for its allocation guard (src/lib.rs) even where no helper is used.
extern crate etwdump_fuzz;

use etwdump::symbols::{pdb, pdb_reference, Globals, WANTED_TYPES};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let name = Path::new("input.pdb");
    let ours = pdb::load_bytes(name, data, WANTED_TYPES, Globals::All);
    if let Ok(theirs) = pdb_reference::load_bytes(name, data, WANTED_TYPES) {
        match ours {
            Ok(ours) => assert!(
                ours == theirs
                    || (ours.identity == theirs.identity
                        && ours.pointer_size == theirs.pointer_size
                        && ours.machine == theirs.machine
                        && ours.symbols == theirs.symbols
                        && ours.types.is_subset_of(&theirs.types)),
                "the reader and the crate disagree"
            ),
            Err(e) => panic!("the crate read the input, the reader refused it: {e}"),
        }
    }
});

//! `Symbols::from_pdb_bytes` on an arbitrary input: the MSF/TPI/DBI guard, the `pdb` crate
//! (panics contained) and etwdump's type resolution (forward references, anonymous unions,
//! bitfields, arrays, publics and S_GDATA32). `from_pdb_bytes` is `from_pdb` on a file's
//! bytes (same checks, same loader, src/symbols/pdb.rs: `load_bytes` / `load`), so no scratch
//! file is written per run. Then every wanted layout (with the field sizes readers compute),
//! symbol and enumeration, and on one input in four (by a hash of 64 sampled bytes) the
//! built-in fallback tables on top.
//! The same bytes loaded keeping only the tool's globals (`Globals::Tool`) must give the full
//! load's globals restricted to those, or the same error.
//! Run with `-rss_limit_mb=2048 -malloc_limit_mb=1024` so allocation blow-ups are findings.
#![no_main]

// Linked for its allocation guard (src/lib.rs) even where no helper is used.
extern crate etwdump_fuzz;

use etwdump::symbols::{
    is_tool_global, Globals, Symbols, WANTED_ENUMS, WANTED_SYMBOLS, WANTED_TYPES,
};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

/// FNV-1a over the length and 64 bytes spread over the input: any length change and most
/// byte changes move it, at a constant cost.
fn sample_hash(data: &[u8]) -> u32 {
    let step = (data.len() / 64).max(1);
    let mut h = 0x811C_9DC5u32 ^ data.len() as u32;
    for b in data.iter().step_by(step).take(64) {
        h = (h ^ u32::from(*b)).wrapping_mul(0x0100_0193);
    }
    h
}

fuzz_target!(|data: &[u8]| {
    let full = Symbols::from_pdb_bytes(Path::new("input.pdb"), data, WANTED_TYPES);
    // Oracle: keeping only the tool's globals gives the full load's, or the same error.
    let tool =
        Symbols::from_pdb_bytes_keeping(Path::new("input.pdb"), data, WANTED_TYPES, Globals::Tool);
    match (&full, &tool) {
        (Ok(f), Ok(t)) => {
            let kept: Vec<_> = f.all_symbols().filter(|(k, _)| is_tool_global(k)).collect();
            assert_eq!(t.all_symbols().collect::<Vec<_>>(), kept);
        }
        (Err(f), Err(t)) => assert_eq!(f.to_string(), t.to_string()),
        _ => panic!(
            "full load {:?}, tool's globals {:?}",
            full.as_ref().err(),
            tool.as_ref().err()
        ),
    }
    if let Ok(s) = full {
        let mut fields = 0usize;
        for t in WANTED_TYPES {
            if let Some(l) = s.layout(t) {
                for f in &l.fields {
                    fields += f.name.len()
                        + usize::from(f.ty.size(s.pointer_size, s.own_types()).is_some());
                }
            }
        }
        std::hint::black_box(fields);
        for n in WANTED_SYMBOLS {
            let _ = s.rva(n);
        }
        for e in WANTED_ENUMS {
            let _ = s.enum_value(e, "MaximumWaitReason");
            let _ = s.enum_name(e, 5);
        }
        let _ = s.symbol_count();
        // The fallback path a real run takes next (input-independent tables, built per call:
        // a quarter of the inputs is enough to keep it covered).
        if sample_hash(data) % 4 == 0 {
            let s = s.with_builtin(19041, etwdump::symbols::TableFamily::X64);
            let _ = s.layout("_KPRCB");
        }
    }
});

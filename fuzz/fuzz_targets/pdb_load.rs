//! `Symbols::from_pdb` on an arbitrary file (the `pdb` crate plus etwdump's type resolution:
//! forward references, anonymous unions, bitfields, arrays, publics and S_GDATA32).
//! Run with `-rss_limit_mb=2048 -malloc_limit_mb=1024` so allocation blow-ups are findings.
#![no_main]

use etwdump::symbols::{Symbols, WANTED_ENUMS, WANTED_SYMBOLS, WANTED_TYPES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = etwdump_fuzz::scratch_file("input.pdb", data);
    if let Ok(s) = Symbols::from_pdb(&path, WANTED_TYPES) {
        for t in WANTED_TYPES {
            if let Some(l) = s.layout(t) {
                let _ = format!("{l:?}");
            }
        }
        for n in WANTED_SYMBOLS {
            let _ = s.rva(n);
        }
        for e in WANTED_ENUMS {
            let _ = s.enum_value(e, "MaximumWaitReason");
            let _ = s.enum_name(e, 5);
        }
        let _ = s.symbol_count();
        // The fallback path a real run takes next.
        let s = s.with_builtin(19041, true);
        let _ = s.layout("_KPRCB");
    }
});

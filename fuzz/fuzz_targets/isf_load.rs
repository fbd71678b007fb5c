//! `Symbols::from_isf` on an arbitrary `.json` file (Volatility 3 ISF: metadata, base types,
//! user types, enums, symbols).
#![no_main]

use etwdump::symbols::{Symbols, WANTED_ENUMS, WANTED_SYMBOLS, WANTED_TYPES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = etwdump_fuzz::scratch_file("input.json", data);
    if let Ok(s) = Symbols::from_isf(&path, WANTED_TYPES) {
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
        let s = s.with_builtin(19041, etwdump::symbols::TableFamily::X64);
        let _ = s.layout("_KPRCB");
    }
});

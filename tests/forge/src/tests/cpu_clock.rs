//! `_WMI_LOGGER_CONTEXT.GetCpuClock` of every forged session, read back from the FILE BYTES with
//! the tests' own page walker at the fixture's types.h offset and checked against the mapping
//! written down here from the decompiled `EtwpInitializeTimeStamp` (etw/cpu_clock.rs): function
//! pointers -> the routine's public (symbols.json RVA), integers -> the index.

use std::collections::BTreeSet;

use super::{fixture_dirs, hexv, symbols_json, Walk};
use crate::kernel::types_h::TypesH;
use crate::util::{get_u32, get_u64};
use crate::{forge, Config};

const CTX: &str = "_WMI_LOGGER_CONTEXT";

/// The routine a clean kernel stores for `clock_type` (pointer era).
fn routine(clock_type: u32) -> &'static str {
    match clock_type {
        2 => "EtwpGetSystemTime",
        3 => "EtwpGetCycleCount",
        _ => "EtwpGetPerfCounter",
    }
}

/// The index a clean kernel stores for `clock_type` (integer era).
fn index(clock_type: u32) -> u64 {
    match clock_type {
        2 => 0,
        3 => 3,
        _ => 1,
    }
}

fn check(cfg: &Config, eras: &mut BTreeSet<bool>) {
    let f = forge(cfg);
    let fx = cfg.fixture.as_ref().unwrap();
    let t = TypesH::load(&fx.dir).unwrap();
    let j = symbols_json(&fx.dir);
    let text = j["sections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == ".text")
        .unwrap();
    let text_lo = cfg.kernel_base + hexv(&text["rva"]);
    let text = text_lo..text_lo + hexv(&text["virtual_size"]);
    let file = f.to_bytes();
    let w = Walk::new(&file);
    let pointer = t.member(CTX, "GetCpuClock").unwrap().ty == "fnptr";
    eras.insert(pointer);
    let off = t.offset_of(CTX, "GetCpuClock").unwrap();
    let size = t.field_size(CTX, "GetCpuClock").unwrap() as usize;
    let mut n = 0;
    for s in f.etw.as_ref().unwrap().sessions() {
        let ct = s.clock_type.unwrap();
        let raw = w.read(s.context_va + off, size).unwrap();
        let v = if size == 8 {
            get_u64(&raw, 0)
        } else {
            u64::from(get_u32(&raw, 0))
        };
        assert_eq!(Some(v), s.get_cpu_clock, "{} slot {}", fx.name, s.logger_id);
        if pointer {
            let rva = hexv(&j["symbols"][routine(ct)]);
            assert_eq!(v, cfg.kernel_base + rva, "{} clock {ct}", fx.name);
            assert!(text.contains(&v), "{}: {v:#x} in .text", fx.name);
            assert_eq!(s.clock_routine.as_deref(), Some(routine(ct)));
        } else {
            assert_eq!(v, index(ct), "{} clock {ct}", fx.name);
            assert_eq!(s.clock_routine, None);
        }
        n += 1;
    }
    assert!(n > 0);
}

/// The standard sessions and three variation seeds (every clock type) of every fixture.
#[test]
fn get_cpu_clock_per_era() {
    let mut eras = BTreeSet::new();
    for d in fixture_dirs() {
        check(&Config::from_fixture(&d).with_standard_etw(), &mut eras);
        for seed in 0..3 {
            check(&Config::from_fixture(&d).with_variation(seed), &mut eras);
        }
    }
    assert_eq!(eras.len(), 2, "both eras among the fixtures");
}

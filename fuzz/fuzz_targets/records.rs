//! The record walker (`etl::records`): walk, records, walk_from, resync,
//! first_record_complete, and the per-record field decoders (`decode::fields`).
//!
//! Oracles: `records().len() == walk().count`; `first_record_complete` holds exactly when the
//! walk counts a record (its documented contract); every record lies inside the valid bytes;
//! a `resync` start leads to a chain of complete records ending exactly at the window's end.
//!
//! Input: valid u16 | start u16 | phase u8 | buffer bytes
#![no_main]

use etwdump::decode::{fields, hooks};
use etwdump::etl::records;
use etwdump_fuzz::Input;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut inp = Input::new(data);
    let valid = usize::from(inp.u16());
    let start = usize::from(inp.u16());
    let phase = usize::from(inp.u8());
    let buf = inp.remaining();

    let w = records::walk(buf, valid);
    let all = records::records(buf, valid);
    assert_eq!(all.len(), w.count, "records() and walk() disagree");
    let vmax = valid.min(buf.len());
    for r in &all {
        assert!(
            r.offset + r.size <= vmax,
            "record {r:?} past the valid end {vmax:#x}"
        );
        let _ = fields::fields(buf, r);
        let _ = fields::kind_name(r.kind);
        let _ = r.perfinfo_payload(buf);
        let _ = r.perfinfo_timestamp(buf);
        let _ = r.kind.key(r.hook);
        if let Some(h) = r.hook {
            let _ = hooks::hook_name(h);
            let _ = hooks::has_routine(h);
        }
    }
    let _ = w.by_key();
    // The contract holds for valid <= buf.len() (the walk clamps `valid` to the buffer,
    // first_record_complete takes a prefix and trusts `valid`): see README finding 3.
    if valid <= buf.len() {
        assert_eq!(
            records::first_record_complete(buf, valid),
            w.count > 0,
            "first_record_complete disagrees with the walk"
        );
    }
    let _ = records::walk_from(buf, start, valid, |_| {});
    if let Some(p) = records::resync(buf, phase) {
        assert!(p <= buf.len());
        let w2 = records::walk_from(buf, p, buf.len(), |_| {});
        assert!(
            w2.torn.is_none() && w2.end == buf.len(),
            "resync start {p:#x} does not chain to the end: {w2:?}"
        );
    }
});

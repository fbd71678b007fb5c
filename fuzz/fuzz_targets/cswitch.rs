//! 0x0524 CSwitch payloads (`decode::cswitch`) of every version, and the state / wait-reason
//! name tables (`decode::names`).
//!
//! Input: version u8 | payload
#![no_main]

// Linked for its allocation guard (src/lib.rs) even where no helper is used.
extern crate etwdump_fuzz;

use etwdump::decode::{cswitch, names};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&version, payload)) = data.split_first() else {
        return;
    };
    let r = cswitch::decode(payload, version);
    let need = if version <= 1 { 16 } else { 24 };
    assert_eq!(r.is_some(), payload.len() >= need);
    if let Some(c) = r {
        let _ = names::thread_state(c.old_state);
        let _ = names::wait_reason(c.old_wait_reason);
        let _ = names::wait_mode(c.old_wait_mode);
    }
    let _ = names::maximum_wait_reason(u32::from(version) * 256 + u32::from(data.len() as u8));
});

//! CCSWAP decoders (`decode::ccswap`): 0x0525 compact batches and 0x400-byte pending blocks.
//!
//! Oracle: `decode` and `decode_each` agree (same switches in the same order, same warnings).
//!
//! Input: selector u8 | max_wait_reason u8 | bytes
#![no_main]

use etwdump::decode::ccswap;
use etwdump_fuzz::Input;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut inp = Input::new(data);
    let sel = inp.u8();
    let mwr = inp.u8();
    let mwr = if sel & 1 == 0 { Some(mwr) } else { None };
    let bytes = inp.remaining();
    let b = ccswap::decode(bytes, mwr);
    let mut each = Vec::new();
    let b2 = ccswap::decode_each(bytes, mwr, |s| each.push(s));
    assert_eq!(b.switches, each, "decode and decode_each disagree");
    assert_eq!(b.warnings, b2.warnings);
    for s in &b.switches {
        let _ = s.packet.name();
    }
    let _ = ccswap::decode_pending(bytes, mwr);
    // As a pending block of exactly 0x400 bytes (zero padded).
    let mut block = [0u8; 0x400];
    let n = bytes.len().min(0x400);
    block[..n].copy_from_slice(&bytes[..n]);
    let _ = ccswap::decode_pending(&block, mwr);
});

//! The CCSWAP and CSwitch decoders against the forge's encoder (tests/forge src/ccswap.rs,
//! written from etw-internals.md §4/§5.2 independently): known sequences with every packet form
//! and limit decode exactly; random batches round-trip (proptest).

use etwdump::decode::{ccswap, cswitch};
use etwdump_forge::ccswap as enc;
use proptest::prelude::*;

/// Compare a decoded batch with the switches that were encoded.
fn check(what: &str, b: &enc::Batch, mwr: u8) {
    let bytes = enc::encode_batch(b, mwr);
    let d = ccswap::decode(&bytes, Some(mwr));
    assert!(d.warnings.is_empty(), "{what}: {:?}", d.warnings);
    assert_eq!(d.first_time, b.first_time, "{what}");
    assert_eq!(d.switches.len(), b.switches.len(), "{what}");
    let kinds = enc::packet_kinds(b);
    for (i, (got, want)) in d.switches.iter().zip(&b.switches).enumerate() {
        let w = format!("{what}: switch {i}");
        assert_eq!(got.packet.name(), kinds[i], "{w}");
        assert_eq!(got.time, want.time, "{w}");
        assert_eq!(got.old_tid, want.old_tid, "{w}");
        if want.old_tid == 0 {
            assert_eq!((got.old_priority, got.old_state), (None, None), "{w}");
        } else {
            assert_eq!(got.old_priority, Some(want.old_priority as i8), "{w}");
            assert_eq!(got.old_state, Some(want.old_state), "{w}");
            let reason = (want.old_state == 5).then_some(want.old_wait_reason);
            assert_eq!(got.old_wait_reason, reason, "{w}");
            match got.packet {
                ccswap::Packet::Full => assert_eq!(
                    got.new_thread_wait_time,
                    Some(want.new_thread_wait_time),
                    "{w}"
                ),
                _ => {
                    assert_eq!(got.new_thread_wait_time, None, "{w}");
                    assert!(want.new_thread_wait_time <= 1, "{w}");
                }
            }
        }
        let next = b.switches.get(i + 1).map(|s| s.old_tid);
        assert_eq!(got.new_tid, next, "{w}");
    }
}

#[test]
fn known_sequences_decode_exactly() {
    let known = enc::known_batches();
    assert!(known.len() >= 8);
    let mut forms = std::collections::BTreeSet::new();
    for (what, b, mwr) in &known {
        check(what, b, *mwr);
        forms.extend(enc::packet_kinds(b));
        // The same batch as a pending block.
        let blk = enc::encode_pending_block(b, 0x1234, *mwr);
        let p = ccswap::decode_pending(&blk, Some(*mwr)).unwrap();
        assert_eq!(p.start_tick, 0x1234, "{what}");
        let used = u32::from_le_bytes(blk[0..4].try_into().unwrap());
        assert_eq!(p.used_bytes, used, "{what}");
        let batch = p.batch.expect("an open batch");
        assert_eq!(batch.switches.len(), b.switches.len(), "{what}");
        assert_eq!(
            p.last_timestamp,
            b.switches.last().map_or(b.first_time, |s| s.time),
            "{what}"
        );
    }
    assert_eq!(forms.len(), 4, "every packet form: {forms:?}");
}

#[test]
fn cswitch_payloads_round_trip() {
    let c = enc::CSwitch {
        new_tid: 0x1234,
        old_tid: 0x5678,
        new_priority: 13,
        old_priority: -2,
        previous_cstate: 2,
        spare_byte: -1,
        old_wait_reason: 15,
        old_wait_mode_or_flags: 1,
        old_state: 5,
        old_ideal_processor: 3,
        new_thread_wait_time: 0x20,
        old_remaining_quantum: -7,
    };
    for v in 1..=4u8 {
        let p = enc::encode_cswitch(v, &c);
        assert_eq!(p.len(), if v == 1 { 16 } else { 24 });
        let d = cswitch::decode(&p, v).unwrap();
        assert_eq!((d.new_tid, d.old_tid), (0x1234, 0x5678), "v{v}");
        assert_eq!((d.new_priority, d.old_priority), (13, -2), "v{v}");
        assert_eq!((d.byte_0a, d.byte_0b), (2, -1), "v{v}");
        assert_eq!(
            (
                d.old_wait_reason,
                d.old_wait_mode,
                d.old_state,
                d.old_ideal_processor
            ),
            (15, 1, 5, 3),
            "v{v}"
        );
        if v >= 2 {
            assert_eq!(d.new_thread_wait_time, Some(0x20));
            assert_eq!(d.old_remaining_quantum, Some(-7));
        } else {
            assert_eq!(d.new_thread_wait_time, None);
        }
        assert!(cswitch::decode(&p[..p.len() - 1], v).is_none());
    }
}

/// Random valid batches (within the kernel encoder's rules) round-trip.
fn batch_strategy() -> impl Strategy<Value = (enc::Batch, u8)> {
    (
        prop::collection::btree_set(1u32..0xFFFF_FFFF, 1..=16),
        any::<u64>().prop_map(|t| t % (1 << 50)),
        prop_oneof![Just(0x27u8), Just(40u8)],
        prop::collection::vec(
            (
                0usize..16,
                any::<bool>(),
                0u32..0x3FFF_FFFF,
                0u8..32,
                0u8..10,
                0u8..39,
                0u32..0x1FFFF,
                any::<u8>(),
            ),
            0..100,
        ),
    )
        .prop_map(|(tids, first, mwr, raw)| {
            let tids: Vec<u32> = tids.into_iter().collect();
            let base: Vec<i8> = tids.iter().map(|t| (t % 24) as i8).collect();
            let mut time = first;
            let mut switches = Vec::new();
            for (k, (idx, idle, delta, prio, state, reason, wait, pick)) in
                raw.into_iter().enumerate()
            {
                // Small deltas and waits are common; make the encoder's compact forms appear.
                let delta = if k == 0 {
                    0
                } else if pick % 3 == 0 {
                    delta % 0x4000
                } else if pick % 3 == 1 {
                    delta % 0x20000
                } else {
                    delta
                };
                let wait = if pick % 2 == 0 { wait % 2 } else { wait };
                time += u64::from(delta);
                let i = idx % tids.len();
                let prio = if pick % 5 == 0 {
                    (base[i] as u8).saturating_add(pick % 8).min(31)
                } else {
                    prio
                };
                switches.push(enc::Switch {
                    time,
                    old_tid: if idle { 0 } else { tids[i] },
                    old_priority: prio,
                    old_state: state,
                    old_wait_reason: reason % mwr,
                    new_thread_wait_time: wait,
                });
            }
            (
                enc::Batch {
                    first_time: first,
                    tids,
                    base_priorities: base,
                    switches,
                },
                mwr,
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn random_batches_round_trip((b, mwr) in batch_strategy()) {
        check("random", &b, mwr);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600), mwr in prop_oneof![Just(Some(40u8)), Just(None)]) {
        let d = ccswap::decode(&bytes, mwr);
        prop_assert!(d.switches.len() <= bytes.len().saturating_sub(0x58) / 2);
        let _ = ccswap::decode_pending(&bytes, mwr);
    }
}

//! Unit tests of [`EtwSpec::with_pending_ccswap`]: every x64 1607+ fixture is forged and the
//! pending 'CCsw' blocks are read back from the FILE BYTES with the tests' own page walker:
//! KPRCB.EtwSupport -> pointer -> block, the POOL_HEADER tag before it, UsedBytes and the
//! encoded contents.

use super::{fixture_dirs, Walk};
use crate::etw::ccswap::{encode_pending_block, PENDING_BLOCK_SIZE};
use crate::etw::{max_wait_reason, CCSWAP_1607_OFFSET, CCSWAP_SEARCH_OFFSET};
use crate::kernel::types_h::TypesH;
use crate::util::{get_u32, get_u64};
use crate::{forge, Config, EtwRoute, EtwSpec, Forged};

fn pending_fixtures() -> Vec<Config> {
    fixture_dirs()
        .iter()
        .map(|d| Config::from_fixture(d))
        .filter(|c| c.arch.is_x64() && c.build >= 14393)
        .collect()
}

fn u64_at(w: &Walk, va: u64) -> u64 {
    get_u64(&w.read(va, 8).expect("readable"), 0)
}

/// The offset of _KPRCB.EtwSupport in the fixture's types.h.
fn es_off(f: &Forged) -> u64 {
    let fx = f.config.fixture.as_ref().unwrap();
    let t = TypesH::load(&fx.dir).unwrap();
    t.offset_of("_KPRCB", "EtwSupport").unwrap()
}

/// KPRCB[cpu].EtwSupport from the dump bytes.
fn etw_support(f: &Forged, w: &Walk, cpu: u32) -> u64 {
    u64_at(w, f.kprcbs[cpu as usize] + es_off(f))
}

/// The 16-byte x64 POOL_HEADER before `va`: (BlockSize byte, tag).
fn pool_tag(w: &Walk, va: u64) -> (u8, [u8; 4]) {
    let h = w.read(va - 0x10, 0x10).expect("pool header readable");
    (h[2], [h[4], h[5], h[6], h[7]])
}

fn check(f: &Forged) {
    let fx = f.config.fixture.as_ref().unwrap();
    let file = f.to_bytes();
    let w = Walk::new(&file);
    let e = f.etw.as_ref().unwrap();
    let mwr = max_wait_reason(f.config.build);
    assert!(!e.pending.is_empty(), "{}: no pending blocks", fx.name);
    for p in &e.pending {
        let what = format!("{} cpu {} clock {:?}", fx.name, p.cpu, p.clock);
        let es = etw_support(f, &w, p.cpu);
        let late = crate::late_win11_etw_support(true, es_off(f));
        let want_ptr = match (e.route, p.clock) {
            (EtwRoute::Inline, Some(k)) => es + CCSWAP_1607_OFFSET + 8 * u64::from(k),
            (EtwRoute::Pointer, Some(k)) if late => {
                es + crate::CCSWAP_LATE_WIN11_OFFSET + 8 * u64::from(k)
            }
            (EtwRoute::Pointer, None) => es + CCSWAP_SEARCH_OFFSET,
            other => panic!("{what}: unexpected route/clock {other:?}"),
        };
        assert_eq!(p.pointer_va, want_ptr, "{what}: pointer_va");
        assert_eq!(u64_at(&w, want_ptr), p.block_va, "{what}: pointer value");
        assert!(
            f.physical_address(p.block_va).is_some(),
            "{what}: block mapped"
        );
        assert_eq!(pool_tag(&w, p.block_va), (0x41, *b"CCsw"), "{what}: header");
        assert_eq!(
            &w.read(p.block_va - 0xC, 4).unwrap(),
            &[0x43, 0x43, 0x73, 0x77]
        );
        let blk = w
            .read(p.block_va, PENDING_BLOCK_SIZE)
            .expect("block readable");
        assert_eq!(get_u32(&blk, 0), p.used_bytes, "{what}: UsedBytes");
        assert_eq!(p.max_wait_reason, mwr);
        match &p.batch {
            None => {
                assert_eq!(p.used_bytes, 0, "{what}");
                assert!(blk.iter().all(|&b| b == 0), "{what}: closed block is zero");
            }
            Some(b) => {
                assert!((0x68..=0x400).contains(&p.used_bytes), "{what}");
                assert_eq!(blk, encode_pending_block(b, p.start_tick, mwr), "{what}");
                assert_eq!(get_u32(&blk, 4), p.start_tick);
                // Times before the dump, non-decreasing; StartTick before the tick count.
                let now = match p.clock.unwrap_or(1) {
                    1 => f.config.system_up_time,
                    2 => f.config.system_time,
                    _ => f.config.system_up_time * 300,
                };
                assert!(b.last_time() < now, "{what}: batch after the dump");
                let mut t = b.first_time;
                for s in &b.switches {
                    assert!(s.time >= t);
                    t = s.time;
                }
                assert!(p.start_tick as u64 <= f.config.system_up_time / 156_250);
            }
        }
    }
    // The documented groups (1607: +0xB20; later Win11: +0x198) get the 1607 plan.
    let late = crate::late_win11_etw_support(true, es_off(f));
    let group = match e.route {
        EtwRoute::Inline => Some(CCSWAP_1607_OFFSET),
        EtwRoute::Pointer if late => Some(crate::CCSWAP_LATE_WIN11_OFFSET),
        _ => None,
    };
    match (e.route, group) {
        (_, Some(group)) => {
            let got: Vec<(u32, u32, u32)> = e
                .pending
                .iter()
                .map(|p| (p.cpu, p.clock.unwrap(), p.used_bytes))
                .collect();
            for (cpu, clock, used) in [(0, 1, 0), (1, 1, 0), (2, 1, 0x68), (3, 3, 0), (0, 2, 0)] {
                let g = got.iter().find(|g| g.0 == cpu && g.1 == clock);
                let g = g.unwrap_or_else(|| panic!("{}: cpu {cpu} clock {clock}", fx.name));
                match (cpu, clock) {
                    (0, 1) | (3, 3) => assert!(g.2 > 0x68 && g.2 < 0x300, "partial {g:?}"),
                    (1, 1) => assert!(g.2 >= 0x3F0, "nearly full {g:?}"),
                    _ => assert_eq!(g.2, used),
                }
            }
            // Every other slot (clock 0..=3) NULL.
            for cpu in 0..f.config.cpus {
                let es = etw_support(f, &w, cpu);
                for k in 0..4u32 {
                    let v = u64_at(&w, es + group + 8 * u64::from(k));
                    if !got.iter().any(|g| g.0 == cpu && g.1 == k) {
                        assert_eq!(v, 0, "{}: cpu {cpu} clock {k} not NULL", fx.name);
                    }
                }
            }
            assert!(e.pending_decoys.is_empty());
        }
        (EtwRoute::Pointer, None) => {
            assert_eq!(e.pending.len(), f.config.cpus as usize);
            assert_eq!(e.pending_decoys.len(), 2 * f.config.cpus as usize);
            assert!(e.pending.iter().any(|p| p.used_bytes == 0x400));
            assert!(e.pending.iter().any(|p| p.used_bytes == 0x68));
            for d in &e.pending_decoys {
                let es = etw_support(f, &w, d.cpu);
                assert_eq!(u64_at(&w, d.pointer_va), d.block_va);
                let used = get_u32(&w.read(d.block_va, 4).unwrap(), 0);
                if d.pointer_va == es + 0x2B0 {
                    assert_eq!(pool_tag(&w, d.block_va).1, *b"Etwp");
                    assert!((0x68..=0x400).contains(&used), "tag decoy looks valid");
                } else {
                    assert_eq!(d.pointer_va, es + 0x2B8);
                    assert_eq!(pool_tag(&w, d.block_va).1, *b"CCsw");
                    assert_eq!(used, 0x50);
                }
            }
        }
        (EtwRoute::Global, _) | (EtwRoute::Inline, None) => unreachable!(),
    }
}

#[test]
fn pending_ccswap_with_buffers_every_x64_1607_plus_fixture() {
    let cs = pending_fixtures();
    assert!(cs.iter().any(|c| c.build == 14393) && cs.iter().any(|c| c.build == 19041));
    for c in cs {
        let spec = EtwSpec::standard(c.build)
            .with_buffers(c.build)
            .with_pending_ccswap();
        check(&forge(&c.clone().with_etw(spec)));
    }
}

#[test]
fn pending_ccswap_without_buffers_maps_etw_support() {
    for c in pending_fixtures() {
        let spec = EtwSpec::standard(c.build).with_pending_ccswap();
        check(&forge(&c.clone().with_etw(spec)));
    }
}

#[test]
fn pending_ccswap_off_changes_nothing() {
    for c in pending_fixtures() {
        let spec = EtwSpec::standard(c.build).with_buffers(c.build);
        let f = forge(&c.clone().with_etw(spec));
        let e = f.etw.as_ref().unwrap();
        assert!(e.pending.is_empty() && e.pending_decoys.is_empty());
        if e.route == EtwRoute::Pointer && !crate::late_win11_etw_support(true, es_off(&f)) {
            // No EtwSupport target forged on the pointer route (but for the later-Win11
            // layout, whose per-CPU buffers hang there).
            let file = f.to_bytes();
            let w = Walk::new(&file);
            assert_eq!(etw_support(&f, &w, 0), 0);
        }
    }
}

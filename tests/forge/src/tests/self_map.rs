//! Tests of the x64 PML4 self-map index ([`Config::self_map_index`]): the default stays 0x1ED
//! (golden outputs unchanged), the opt-in draw ([`Config::with_random_self_map`]) depends on the
//! variation seed and avoids the forge's own slots, and a moved self-map leaves every
//! translation intact. The PML4 is read from the dump file with the tests' reader (`Walk`).

use std::collections::BTreeSet;

use super::{check_probes, fixture_dir, fixture_dirs, Walk};
use crate::util::get_u64;
use crate::variation::random_self_map_index;
use crate::{forge, Config, Expect, Forged, FORGE_PML4_SLOTS, X64_DEFAULT_SELF_MAP_INDEX};

/// The PML4 indices whose entry points at the PML4 itself, read from the dump bytes.
fn self_refs(f: &Forged, file: &[u8]) -> Vec<u64> {
    let w = Walk::new(file);
    let root = f.page_table_root();
    assert_eq!(root, f.dtb & !0xFFF);
    let pml4 = w.phys(root, 0x1000).expect("PML4 stored");
    (0..512)
        .filter(|&i| {
            let e = get_u64(pml4, i as usize * 8);
            e & 1 == 1 && e & 0x000F_FFFF_FFFF_F000 == root
        })
        .collect()
}

/// KUSER_SHARED_DATA through the page tables of the file equals the forge's record.
fn kuser_translates(f: &Forged, file: &[u8]) {
    let w = Walk::new(file);
    let Expect::Bytes(want) = f.expected_read(f.kuser_va, 0x1000) else {
        panic!("KUSER_SHARED_DATA unreadable in the forge's record");
    };
    assert_eq!(w.read(f.kuser_va, 0x1000).as_deref(), Ok(&want[..]));
    assert_eq!(
        w.translate(f.kuser_va),
        f.physical_address(f.kuser_va),
        "KUSER VA -> PA"
    );
}

#[test]
fn default_self_map_is_0x1ed_and_prints_as_before() {
    let cfg = Config::x64();
    assert_eq!(cfg.self_map_index, X64_DEFAULT_SELF_MAP_INDEX);
    assert!(!format!("{cfg:?}").contains("self_map_index"));
    let moved = cfg.clone().with_self_map_index(0x1A3);
    assert!(format!("{moved:?}").ends_with("processes: false, self_map_index: 419 }"));
    let f = forge(&cfg);
    assert_eq!(self_refs(&f, &f.to_bytes()), vec![0x1ED]);
    assert_eq!(f.self_map_index(), Some(0x1ED));
    // Variation mode leaves it alone (opt-in only).
    let d = fixture_dirs().into_iter().next().expect("a fixture");
    let var = Config::from_fixture(&d).with_variation(3);
    assert_eq!(var.self_map_index, X64_DEFAULT_SELF_MAP_INDEX);
    // x86 keeps the fixed self-map.
    for x86 in [Config::x86_pae(), Config::x86_nonpae()] {
        assert_eq!(x86.clone().with_random_self_map(), x86);
        assert_eq!(forge(&x86).self_map_index(), None);
    }
}

#[test]
fn random_self_map_draws_kernel_half_slots_the_forge_leaves_free() {
    let drawn: BTreeSet<u64> = (0..4000).map(random_self_map_index).collect();
    assert!(drawn.iter().all(|i| (0x100..=0x1FE).contains(i)));
    assert!(drawn.iter().all(|i| !FORGE_PML4_SLOTS.contains(i)));
    // Nearly every allowed slot is drawn by some seed.
    assert!(drawn.len() > 240, "{} distinct indices", drawn.len());
}

#[test]
fn variation_seeds_move_the_self_map_and_kuser_still_translates() {
    let d = fixture_dir("x64-19041");
    let base = Config::from_fixture(&d);
    let (a, b) = (
        base.clone().with_variation(1).with_random_self_map(),
        base.clone().with_variation(2).with_random_self_map(),
    );
    assert_ne!(a.self_map_index, b.self_map_index);
    assert_eq!(a.self_map_index, random_self_map_index(1));
    for cfg in [a, b] {
        let f = forge(&cfg);
        let file = f.to_bytes();
        assert_eq!(self_refs(&f, &file), vec![cfg.self_map_index]);
        assert_eq!(f.self_map_index(), Some(cfg.self_map_index));
        kuser_translates(&f, &file);
        // Includes page_table_via_self_map at the moved self-map VA.
        check_probes(&f, &file);
    }
    // The same seed without the opt-in: 0x1ED, otherwise the same machine.
    let plain = forge(&base.with_variation(1));
    assert_eq!(self_refs(&plain, &plain.to_bytes()), vec![0x1ED]);
}

#[test]
fn explicit_self_map_indices_at_both_ends_of_the_range() {
    for i in [0x100, 0x1FE] {
        let f = forge(&Config::x64().with_self_map_index(i));
        let file = f.to_bytes();
        assert_eq!(self_refs(&f, &file), vec![i]);
        kuser_translates(&f, &file);
        check_probes(&f, &file);
    }
}

#[test]
#[should_panic(expected = "self_map_index")]
fn a_self_map_in_a_forge_slot_is_refused() {
    forge(&Config::x64().with_self_map_index(0x1F0));
}

#[test]
#[should_panic(expected = "self_map_index 0x1ff")]
fn the_hal_slot_0x1ff_is_refused() {
    forge(&Config::x64().with_self_map_index(0x1FF));
}

#[test]
#[should_panic(expected = "self_map_index is x64 only")]
fn an_x86_self_map_index_is_refused() {
    forge(&Config::x86_pae().with_self_map_index(0x1A0));
}

/// Several seeds on two fixture kernels of different ETW routes: the drawn slot never clashes
/// with a mapping (the pager panics on one) and every probe reads through the dump.
#[test]
fn random_self_maps_on_fixtures_forge_cleanly() {
    for d in fixture_dirs()
        .into_iter()
        .filter(|d| d.ends_with("x64-7601") || d.ends_with("x64-22000"))
    {
        for seed in 0..4 {
            let cfg = Config::from_fixture(&d)
                .with_variation(seed)
                .with_random_self_map();
            let f = forge(&cfg);
            check_probes(&f, &f.to_bytes());
        }
    }
}

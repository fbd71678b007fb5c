//! Address translation over arbitrary page tables, x64 4-level, x86 PAE and x86 non-PAE.
//!
//! A full dump (DumpType 1) is built in memory for every input: the header of a forge dump of
//! the chosen architecture with its run list replaced by 1-3 fuzz-chosen runs (at most 16
//! pages in all), DirectoryTableBase pointing into them, and page contents written as
//! page-table entries by the input. Then a handful of virtual addresses are translated and read.
//!
//! Oracle (beyond "no panic"): a multi-page x64 read (which takes the cached-leaf-table fast
//! path) must agree with page-by-page reads (the full walk): same success, same bytes; and
//! `read_prefix` must read everything exactly when `read` succeeds.
//!
//! Input: arch u8 | dtb_sel u8 | dtb_low u16 | nruns u8 | runs (base u16, count u8)* |
//!        4 × va u64 | patches (page u8, entry u16, op u8, value...)*
#![no_main]

use etwdump::addr::VirtAddr;
use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::mem::AddressSpace;
use etwdump_forge::{forge, Config};
use etwdump_fuzz::Input;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

const PAGE: usize = 4096;
const MAX_PAGES: u64 = 16;

/// The header (0x2000 or 0x1000 bytes) of a forge full dump per architecture.
fn headers() -> &'static [Vec<u8>; 3] {
    static H: OnceLock<[Vec<u8>; 3]> = OnceLock::new();
    H.get_or_init(|| {
        let get = |c: Config| {
            let f = forge(&c);
            let n = f.header_size as usize;
            f.to_bytes()[..n].to_vec()
        };
        [
            get(Config::x64()),
            get(Config::x86_pae()),
            get(Config::x86_nonpae()),
        ]
    })
}

fn put(buf: &mut [u8], off: usize, v: &[u8]) {
    buf[off..off + v.len()].copy_from_slice(v);
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input::new(data);
    let arch = (inp.u8() % 3) as usize;
    let wide = arch == 0;
    let mut file = headers()[arch].clone();
    // Runs: 1-3, small PFNs, at most MAX_PAGES pages in all; overlapping runs make the open fail.
    let dtb_sel = inp.u8();
    let dtb_low = inp.u16();
    let nruns = 1 + (inp.u8() % 3) as usize;
    let mut runs = Vec::new();
    let mut total = 0u64;
    for _ in 0..nruns {
        let base = u64::from(inp.u16());
        let count = (1 + u64::from(inp.u8() % 8)).min(MAX_PAGES - total);
        if count == 0 {
            break;
        }
        runs.push((base, count));
        total += count;
    }
    // Physical address of stored page i (in file order).
    let page_pa = |i: u64| -> u64 {
        let mut i = i % total;
        for &(b, c) in &runs {
            if i < c {
                return (b + i) << 12;
            }
            i -= c;
        }
        0
    };
    let pmb = if wide { 0x88 } else { 0x64 };
    let dtb_off = 0x10;
    let dtb = page_pa(u64::from(dtb_sel)) | u64::from(dtb_low & 0xFFF);
    if wide {
        put(&mut file, dtb_off, &dtb.to_le_bytes());
        put(&mut file, pmb, &(runs.len() as u32).to_le_bytes());
        put(&mut file, pmb + 8, &total.to_le_bytes());
        for (i, &(b, c)) in runs.iter().enumerate() {
            put(&mut file, pmb + 16 + 16 * i, &b.to_le_bytes());
            put(&mut file, pmb + 24 + 16 * i, &c.to_le_bytes());
        }
    } else {
        put(&mut file, dtb_off, &(dtb as u32).to_le_bytes());
        put(&mut file, pmb, &(runs.len() as u32).to_le_bytes());
        put(&mut file, pmb + 4, &(total as u32).to_le_bytes());
        for (i, &(b, c)) in runs.iter().enumerate() {
            put(&mut file, pmb + 8 + 8 * i, &(b as u32).to_le_bytes());
            put(&mut file, pmb + 12 + 8 * i, &(c as u32).to_le_bytes());
        }
    }
    let hdr = file.len();
    file.resize(hdr + total as usize * PAGE, 0);
    let mut vas = [0u64; 4];
    for v in &mut vas {
        *v = inp.u64();
    }
    // Page-table entries. op bit 0: raw value; else a pointer to stored page `sel` with flags.
    let entry_size = if arch == 2 { 4 } else { 8 };
    while !inp.is_empty() {
        let page = u64::from(inp.u8()) % total;
        let idx = usize::from(inp.u16()) % (PAGE / entry_size);
        let op = inp.u8();
        let value = if op & 1 == 1 {
            inp.u64()
        } else {
            let sel = u64::from(inp.u8());
            let flags = u64::from(inp.u16());
            // flags: low 12 bits, bit 12 → NX (bit 63), bit 13 → a 2 MiB/1 GiB-aligned "large" base
            let mut v = page_pa(sel) | (flags & 0xFFF);
            if flags & 0x1000 != 0 {
                v |= 1 << 63;
            }
            if flags & 0x2000 != 0 {
                v &= !0x1F_F000;
            }
            v
        };
        let off = hdr + page as usize * PAGE + idx * entry_size;
        if entry_size == 8 {
            put(&mut file, off, &value.to_le_bytes());
        } else {
            put(&mut file, off, &(value as u32).to_le_bytes());
        }
    }
    let Ok(d) = DumpFile::from_bytes(file, OpenOptions::default()) else {
        return;
    };
    let space = AddressSpace::kernel(&d);
    let space2 = space.with_root(vas[3]);
    let fixed = [
        0u64,
        0xFFFF_F800_0000_0000,
        0xFFFF_FFFF_FFFF_F000,
        0x8000_0000,
        0xC000_0000,
    ];
    for &va in vas.iter().chain(fixed.iter()) {
        for sp in [&space, &space2] {
            let va = VirtAddr::new(va);
            let _ = sp.translate(va);
            let _ = sp.read_u64(va);
            let _ = sp.read_ptr(va);
            let mut one = [0u8; 1];
            let _ = sp.try_read(va, &mut one);
            // Page-aligned 3-page read: the x64 fast path.
            let base = VirtAddr::new(va.get() & !0xFFF);
            let mut big = vec![0u8; 3 * PAGE];
            let whole = sp.read(base, &mut big);
            let mut pieces = vec![0u8; 3 * PAGE];
            let mut each_ok = true;
            for i in 0..3 {
                let r = sp.read(
                    base.offset((i * PAGE) as u64),
                    &mut pieces[i * PAGE..(i + 1) * PAGE],
                );
                each_ok &= r.is_ok();
            }
            let last = base.get().checked_add(3 * PAGE as u64 - 1);
            let in_range = match last {
                Some(l) => wide || l <= u64::from(u32::MAX),
                None => false,
            };
            if sp.normalize(base).is_ok() && in_range {
                assert_eq!(
                    whole.is_ok(),
                    each_ok,
                    "multi-page read vs page reads at {base:?}: {whole:?}"
                );
                if whole.is_ok() {
                    assert!(
                        big == pieces,
                        "multi-page read bytes differ from page reads at {base:?}"
                    );
                }
            }
            let mut pre = vec![0u8; 2 * PAGE + 5];
            let n = sp.read_prefix(VirtAddr::new(va.get().wrapping_sub(7)), &mut pre);
            let full = sp.read(VirtAddr::new(va.get().wrapping_sub(7)), &mut pre);
            if full.is_ok() {
                assert_eq!(n, pre.len(), "read ok but read_prefix stopped at {n}");
            }
        }
    }
});

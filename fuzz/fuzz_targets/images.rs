//! Memory images and layouts (issue 27): the input's first byte picks
//! (0) an ELF core or a VMware snapshot with its memory, opened from bytes;
//! (1) a VMware pair: a `.vmss` (the first u16-length part) beside a `.vmem` (the rest), opened
//!     by the state file's path, then by the memory's;
//! (2) a `--layout` JSON file (the rest) placed over a fixed 64 KiB raw file.
//! Each opened image then goes through discovery (architecture and DTB) and the kernel-image
//! search, as the CLI does.
//!
//! Oracles: a pass over all memory covers only pages the file holds (`physical_runs` ≤ the
//! file's pages: claims past the end are trimmed, F9); errors and the layout's source are
//! terminal-safe when shown (F3, F8).
#![no_main]

use etwdump::dump::{layout::Layout, DumpFile, OpenOptions};
use etwdump::kernel::context::KernelContext;
use etwdump_fuzz::{assert_terminal_safe, scratch_dir, scratch_file, Input};
use libfuzzer_sys::fuzz_target;

const LENIENT: OpenOptions = OpenOptions {
    allow_truncated: true,
};

fn check(d: Result<DumpFile, etwdump::dump::DumpError>, file_len: u64) {
    match d {
        Ok(d) => {
            let pages: u64 = d.physical_runs().iter().map(|r| r.1).sum();
            assert!(
                pages <= file_len / 4096,
                "a pass would read {pages} pages of a {file_len}-byte file"
            );
            if d.image().is_some() {
                if let Ok(m) = etwdump::kernel::discover::machine(&d) {
                    let ctx = KernelContext::without_symbols_on(&d, m);
                    let _ = etwdump::kernel::discover::find_kernel(&ctx.space);
                }
            }
        }
        // As main.rs prints it: one escaped line.
        Err(e) => {
            let shown = etwdump::text::escape(&e.to_string()).into_owned();
            assert_terminal_safe("error", &shown);
        }
    }
}

/// The fixed memory a layout places (64 KiB: 16 pages of a counter pattern).
fn raw_file() -> &'static std::path::Path {
    static P: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    P.get_or_init(|| {
        let b: Vec<u8> = (0..65536u32)
            .map(|i| (i / 4096) as u8 ^ (i as u8))
            .collect();
        scratch_file("layout.raw", &b)
    })
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    match input.u8() % 3 {
        0 => {
            let b = input.remaining();
            check(DumpFile::from_bytes(b.to_vec(), LENIENT), b.len() as u64);
        }
        1 => {
            let n = usize::from(input.u16());
            let vmss = input.bytes(n).to_vec();
            let vmem = input.remaining().to_vec();
            let dir = scratch_dir();
            let (s, m) = (dir.join("x.vmss"), dir.join("x.vmem"));
            std::fs::write(&s, &vmss).unwrap();
            std::fs::write(&m, &vmem).unwrap();
            check(
                DumpFile::open(&s, LENIENT),
                vmem.len().max(vmss.len()) as u64,
            );
            check(DumpFile::open(&m, LENIENT), vmem.len() as u64);
        }
        _ => match Layout::parse(input.remaining()) {
            Ok(l) => {
                assert_terminal_safe("layout source", &l.source.to_string());
                check(DumpFile::open_layout(raw_file(), &l, LENIENT), 65536);
            }
            Err(e) => assert_terminal_safe("layout error", &e.to_string()),
        },
    }
});

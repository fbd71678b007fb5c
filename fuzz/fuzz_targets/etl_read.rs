//! Reading an .etl file (`etl::reader::read`): buffer framing plus the record walk.
#![no_main]

// Linked for its allocation guard (src/lib.rs) even where no helper is used.
extern crate etwdump_fuzz;

use etwdump::etl::reader as etl;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let f = etl::read(data);
    let mut end = 0u64;
    for b in &f.buffers {
        assert!(b.offset >= end, "buffers overlap");
        end = b.offset + u64::from(b.buffer_size);
        assert!(end <= data.len() as u64, "buffer past the end of the file");
        assert_eq!(b.records, b.walk.count);
    }
});

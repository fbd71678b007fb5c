//! Xpress decoders (`dump::xpress`, [MS-XCA]): Plain LZ77 and LZ77+Huffman on arbitrary input
//! with an arbitrary expected size (≤ 256 KiB); and the forge's compressors' round trip.
//!
//! Oracle: a decode that succeeds gives exactly `expected` bytes (a failed one leaves the output
//! empty); the forge's encodings of the input's bytes decode back to them with both codecs.
//!
//! Input: selector u8 | expected u32 | bytes
#![no_main]

use etwdump::dump::xpress::{decompress_huffman, decompress_lz77};
use etwdump_forge::xpress::{compress_huffman, compress_lz77};
use etwdump_fuzz::Input;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut inp = Input::new(data);
    let sel = inp.u8();
    let expected = (inp.u32() % (256 << 10)) as usize;
    let bytes = inp.remaining();
    let mut out = Vec::new();
    for decode in [decompress_lz77, decompress_huffman] {
        match decode(bytes, &mut out, expected) {
            Ok(()) => assert_eq!(out.len(), expected),
            Err(_) => assert!(out.is_empty()),
        }
    }
    // Round trip through the forge's encoders (1 input in 4: the encoders are slower).
    if sel & 3 == 0 {
        let h = compress_huffman(bytes);
        decompress_huffman(&h, &mut out, bytes.len()).unwrap();
        assert_eq!(out, bytes, "LZ77+Huffman round trip");
        let p = compress_lz77(bytes);
        decompress_lz77(&p, &mut out, bytes.len()).unwrap();
        assert_eq!(out, bytes, "Plain LZ77 round trip");
    }
});

//! The Xpress decoders (`etwdump::dump::xpress`): the [MS-XCA] §3 examples, round trips through
//! the forge's independent compressors, and hostile input (typed errors, no panic).

use etwdump::dump::xpress::{
    decompress_huffman, decompress_lz77, TableProblem, XpressError, MAX_EXPECTED,
};
use etwdump_forge::xpress::{compress_huffman, compress_lz77, sample_set};
use proptest::prelude::*;

fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).unwrap())
        .collect()
}

fn lz77(input: &[u8], expected: usize) -> Result<Vec<u8>, XpressError> {
    let mut out = vec![0xAA; 3];
    decompress_lz77(input, &mut out, expected).map(|()| out)
}

fn huffman(input: &[u8], expected: usize) -> Result<Vec<u8>, XpressError> {
    let mut out = vec![0xAA; 3];
    decompress_huffman(input, &mut out, expected).map(|()| out)
}

// [MS-XCA] §3.1 and §3.2, verbatim.
const LZ77_ALPHABET: &str =
    "3f 00 00 00 61 62 63 64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 71 72 73 74 75 76 77 78 79 7a";
const LZ77_ABC: &str = "ff ff ff 1f 61 62 63 17 00 0f ff 26 01";
const HUFFMAN_ALPHABET: &str = "
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 50 55 55 55 55 55 55 55 55 55 55 45 44 04
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 04 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 d8 52 3e d7 94 11 5b e9 19 5f f9 d6 7c df 8d 04 00 00 00 00";
const HUFFMAN_ABC: &str = "
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 30 23 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 02 00 00 00 00 00 00 00 00 00 00 00 00 00 00 20 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00 a8 dc 00 00 ff 26 01";

#[test]
fn spec_examples_decode_to_the_documented_text() {
    assert_eq!(
        lz77(&hex(LZ77_ALPHABET), 26).unwrap(),
        b"abcdefghijklmnopqrstuvwxyz"
    );
    assert_eq!(lz77(&hex(LZ77_ABC), 300).unwrap(), b"abc".repeat(100));
    let h = hex(HUFFMAN_ALPHABET);
    assert_eq!(h.len(), 256 + 20);
    assert_eq!(huffman(&h, 26).unwrap(), b"abcdefghijklmnopqrstuvwxyz");
    let h = hex(HUFFMAN_ABC);
    assert_eq!(h.len(), 256 + 7);
    assert_eq!(huffman(&h, 300).unwrap(), b"abc".repeat(100));
}

#[test]
fn forge_compressors_give_the_spec_examples_bytes() {
    // Our greedy matcher and Huffman construction happen to make the same choices as the
    // encoder of [MS-XCA] §3 (the encoders are free to differ; these pin them down).
    let alphabet = b"abcdefghijklmnopqrstuvwxyz";
    let abc = b"abc".repeat(100);
    assert_eq!(compress_lz77(alphabet), hex(LZ77_ALPHABET));
    assert_eq!(compress_lz77(&abc), hex(LZ77_ABC));
    assert_eq!(compress_huffman(alphabet), hex(HUFFMAN_ALPHABET));
    assert_eq!(compress_huffman(&abc), hex(HUFFMAN_ABC));
}

#[test]
fn huffman_end_of_stream_after_a_full_block_has_a_block_of_its_own() {
    let plain = vec![5u8; 65536];
    let c = compress_huffman(&plain);
    // The last block: a table with two 1-bit codes (EOF and its partner, symbol 0), two words.
    let last = &c[c.len() - 260..];
    let mut t = [0u8; 256];
    t[0] = 0x01;
    t[128] = 0x01;
    assert_eq!(&last[..256], &t);
    assert_eq!(&last[256..], [0x00, 0x80, 0, 0]);
    assert_eq!(huffman(&c, 65536).unwrap(), plain);
    // Asked for more, the EOF symbol is a match (length 3, distance 1), then the 31 zero bits
    // left are literal zeros (symbol 0's code is 0); one more bit is past the input's end.
    let mut more = vec![5u8; 65539];
    more.extend_from_slice(&[0; 31]);
    assert_eq!(huffman(&c, 65570).unwrap(), more);
    assert_eq!(
        huffman(&c, 65571),
        Err(XpressError::Truncated {
            offset: c.len(),
            produced: 65570,
            expected: 65571
        })
    );
}

#[test]
fn spec_examples_stop_at_a_shorter_expected_size() {
    // Decoding stops at the expected size, between items; a match that would cross it is an
    // overrun (a compression set's size is exact).
    assert_eq!(lz77(&hex(LZ77_ABC), 3).unwrap(), b"abc");
    assert_eq!(
        lz77(&hex(LZ77_ABC), 10),
        Err(XpressError::Overrun {
            offset: 7,
            length: 297,
            produced: 3,
            expected: 10
        })
    );
    assert_eq!(huffman(&hex(HUFFMAN_ALPHABET), 5).unwrap(), b"abcde");
    assert_eq!(lz77(&hex(LZ77_ABC), 0).unwrap(), b"");
    assert_eq!(huffman(&[], 0).unwrap(), b"");
}

#[test]
fn spec_examples_asked_for_more_than_they_hold() {
    // Plain: the flags after the match are ones (matches) with no input left.
    assert_eq!(
        lz77(&hex(LZ77_ABC), 301),
        Err(XpressError::Truncated {
            offset: 13,
            produced: 300,
            expected: 301
        })
    );
    // 26 literals, then the padding ones flags.
    assert_eq!(
        lz77(&hex(LZ77_ALPHABET), 27),
        Err(XpressError::Truncated {
            offset: 30,
            produced: 26,
            expected: 27
        })
    );
    // Huffman: the end-of-stream symbol is a match (length 3, distance 1) when more is wanted:
    // 3 more bytes fit, a 4th... runs on into the zero padding and past the input's end.
    let h = hex(HUFFMAN_ALPHABET);
    assert_eq!(&huffman(&h, 29).unwrap()[26..], b"zzz");
    assert!(matches!(
        huffman(&h, 100_000),
        Err(XpressError::Truncated { .. })
    ));
    // 300 bytes of "abc": the EOF symbol as a match of 3 overruns 301.
    assert_eq!(
        huffman(&hex(HUFFMAN_ABC), 301),
        Err(XpressError::Overrun {
            offset: 263,
            length: 3,
            produced: 300,
            expected: 301
        })
    );
}

/// A decode to a shorter size than the stream holds: that prefix, or an overrun when a match
/// crosses the size.
fn prefix_or_overrun(r: Result<Vec<u8>, XpressError>, plain: &[u8], what: &str) -> bool {
    match r {
        Ok(out) => {
            assert_eq!(out, &plain[..out.len()], "{what}");
            true
        }
        Err(XpressError::Overrun { produced, .. }) => {
            assert!(produced < plain.len(), "{what}");
            false
        }
        Err(e) => panic!("{what}: {e}"),
    }
}

#[test]
fn sample_set_round_trips_through_the_forge_compressors() {
    let mut blocks = 0;
    for (name, plain) in sample_set() {
        let c = compress_lz77(&plain);
        assert_eq!(lz77(&c, plain.len()).unwrap(), plain, "{name} lz77");
        let c = compress_huffman(&plain);
        assert_eq!(huffman(&c, plain.len()).unwrap(), plain, "{name} huffman");
        blocks += plain.len().div_ceil(65536).max(1);
        if !plain.is_empty() {
            prefix_or_overrun(huffman(&c, plain.len() / 2), &plain, &name);
        }
    }
    assert!(blocks >= 20, "{blocks} Huffman blocks");
}

#[test]
fn compression_compresses() {
    let zeros = vec![0u8; 200 * 1024];
    assert!(compress_lz77(&zeros).len() < 64);
    assert!(compress_huffman(&zeros).len() < 4 * (256 + 64));
    let text = b"etwdump reads ETW sessions from memory. ".repeat(500);
    assert!(compress_huffman(&text).len() < text.len() / 20);
}

#[test]
fn expected_size_is_bounded() {
    let e = Err(XpressError::TooLarge {
        expected: MAX_EXPECTED + 1,
        limit: MAX_EXPECTED,
    });
    assert_eq!(lz77(&[], MAX_EXPECTED + 1), e);
    assert_eq!(huffman(&[], MAX_EXPECTED + 1), e);
    assert_eq!(
        lz77(&[], usize::MAX).unwrap_err(),
        XpressError::TooLarge {
            expected: usize::MAX,
            limit: MAX_EXPECTED
        }
    );
}

/// A Huffman block's table: `(symbol, length)` pairs, all others 0.
fn table(lens: &[(usize, u8)]) -> Vec<u8> {
    let mut t = vec![0u8; 256];
    for &(s, l) in lens {
        t[s / 2] |= l << ((s & 1) * 4);
    }
    t
}

#[test]
fn bad_huffman_tables_are_errors() {
    let mut over = table(&[(0, 1), (1, 1), (2, 1)]);
    over.extend_from_slice(&[0; 8]);
    assert_eq!(
        huffman(&over, 10),
        Err(XpressError::BadTable {
            offset: 0,
            problem: TableProblem::OverSubscribed
        })
    );
    let mut incomplete = table(&[(0, 1), (1, 2)]);
    incomplete.extend_from_slice(&[0; 8]);
    assert_eq!(
        huffman(&incomplete, 10),
        Err(XpressError::BadTable {
            offset: 0,
            problem: TableProblem::Incomplete
        })
    );
    assert_eq!(
        huffman(&[0; 300], 1),
        Err(XpressError::BadTable {
            offset: 0,
            problem: TableProblem::Incomplete
        })
    );
    // A bad table in the second block names that block's offset. That block holds a match
    // (distance 1, 10 bytes) and EOF, one bit each: its table and two words.
    let plain = vec![7u8; 65536 + 10];
    let mut c = compress_huffman(&plain);
    let first_block = c.len() - (256 + 4);
    assert_eq!(huffman(&c, 65536).unwrap(), &plain[..65536]);
    c[first_block..first_block + 256].fill(0x11);
    assert_eq!(
        huffman(&c, plain.len()),
        Err(XpressError::BadTable {
            offset: first_block,
            problem: TableProblem::OverSubscribed
        })
    );
}

#[test]
fn huffman_truncation_names_the_offset() {
    assert_eq!(
        huffman(&[0; 255], 1),
        Err(XpressError::Truncated {
            offset: 0,
            produced: 0,
            expected: 1
        })
    );
    let plain = sample_set()
        .into_iter()
        .find(|(n, _)| n == "text-150001")
        .unwrap()
        .1;
    let c = compress_huffman(&plain);
    for cut in [c.len() / 3, c.len() / 2, c.len() - 40] {
        let e = huffman(&c[..cut], plain.len()).unwrap_err();
        match e {
            XpressError::Truncated {
                offset, produced, ..
            } => {
                assert!(offset <= cut + 2, "{offset} vs {cut}");
                assert!(produced < plain.len());
            }
            other => panic!("cut {cut}: {other}"),
        }
    }
}

#[test]
fn huffman_distance_before_the_start_is_an_error() {
    // Symbols 0 ('\0') and 256 + 15 * 16 (length 3, distance bits 15), 1 bit each.
    let mut c = table(&[(0, 1), (256 + 15 * 16, 1)]);
    // Bits: 0 (literal), 1 (match), 15 distance bits of 0: distance 2^15.
    c.extend_from_slice(&0x4000u16.to_le_bytes());
    c.extend_from_slice(&[0; 6]);
    assert_eq!(
        huffman(&c, 10),
        Err(XpressError::DistanceTooFar {
            offset: 260,
            distance: 1 << 15,
            produced: 1
        })
    );
}

#[test]
fn huffman_bad_length_escape() {
    // Symbol 256 + 15 (length escape, distance 1), literal 'a', 1 bit each.
    let mut c = table(&[(0x61, 1), (256 + 15, 1)]);
    // Bits: 0 ('a'), 1 (match): escape byte 255, then u16 14 (< 15: invalid).
    c.extend_from_slice(&0x4000u16.to_le_bytes());
    c.extend_from_slice(&[0, 0, 255, 14, 0]);
    assert_eq!(
        huffman(&c, 100),
        Err(XpressError::BadLength {
            offset: 261,
            value: 14
        })
    );
    // The same with u16 1000: length 1003 from distance 1.
    let n = c.len();
    c[n - 2..].copy_from_slice(&1000u16.to_le_bytes());
    assert_eq!(huffman(&c, 1004).unwrap(), vec![b'a'; 1004]);
    assert_eq!(
        huffman(&c, 1003),
        Err(XpressError::Overrun {
            offset: 260,
            length: 1003,
            produced: 1,
            expected: 1003
        })
    );
}

#[test]
fn lz77_hostile_inputs() {
    // A match first: distance 1 with nothing decoded.
    assert_eq!(
        lz77(&[0, 0, 0, 0x80, 0x00, 0x00], 5),
        Err(XpressError::DistanceTooFar {
            offset: 4,
            distance: 1,
            produced: 0
        })
    );
    // 'a', then a match of distance 2 after one byte.
    assert_eq!(
        lz77(&[0, 0, 0, 0x40, b'a', 0x08, 0x00], 5),
        Err(XpressError::DistanceTooFar {
            offset: 5,
            distance: 2,
            produced: 1
        })
    );
    // 'a', then a 32-bit length of 4 GiB - 1: an overrun, not an allocation or a loop.
    let huge = [
        0, 0, 0, 0x40, b'a', 0x07, 0x00, 0x0f, 0xff, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff,
    ];
    assert_eq!(
        lz77(&huge, 4096),
        Err(XpressError::Overrun {
            offset: 5,
            length: 0xffff_ffff + 3,
            produced: 1,
            expected: 4096
        })
    );
    // The same escape with a 32-bit length below 22: invalid.
    let mut bad = huge;
    bad[11..15].copy_from_slice(&21u32.to_le_bytes());
    assert_eq!(
        lz77(&bad, 4096),
        Err(XpressError::BadLength {
            offset: 9,
            value: 21
        })
    );
    // Flags cut short, a literal missing, a match word cut short.
    assert_eq!(
        lz77(&[0, 0, 0], 1),
        Err(XpressError::Truncated {
            offset: 0,
            produced: 0,
            expected: 1
        })
    );
    assert_eq!(
        lz77(&[0, 0, 0, 0, b'x', b'y'], 3),
        Err(XpressError::Truncated {
            offset: 6,
            produced: 2,
            expected: 3
        })
    );
    assert_eq!(
        lz77(&[0, 0, 0, 0x40, b'x', 0x00], 4),
        Err(XpressError::Truncated {
            offset: 5,
            produced: 1,
            expected: 4
        })
    );
}

#[test]
fn lz77_shared_half_byte() {
    // 'a', then two long matches of distance 1 sharing one length byte: 0x53 gives 3 + 7 + 3
    // = 13 (low half) and 3 + 7 + 5 = 15 (high half).
    let c = [0, 0, 0, 0x60, b'a', 0x07, 0x00, 0x53, 0x07, 0x00];
    let out = lz77(&c, 1 + 13 + 15).unwrap();
    assert_eq!(out, vec![b'a'; 29]);
}

fn page_like() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        // Random bytes (incompressible).
        proptest::collection::vec(any::<u8>(), 0..70_000),
        // Few distinct bytes (long matches, skewed codes).
        proptest::collection::vec(prop_oneof![Just(0u8), Just(0xff), Just(b'a')], 0..140_000),
        // Zeros with sprinkled values (page tables, sparse structures), up to 200 KiB.
        (
            0usize..204_800,
            proptest::collection::vec((any::<usize>(), any::<u8>()), 0..200)
        )
            .prop_map(|(n, pokes)| {
                let mut v = vec![0u8; n];
                for (i, b) in pokes {
                    if n > 0 {
                        v[i % n] = b;
                    }
                }
                v
            }),
        // Repeated text fragments.
        (
            proptest::collection::vec("[a-z ]{1,12}", 1..20),
            0usize..3000
        )
            .prop_map(|(words, n)| {
                (0..n)
                    .flat_map(|i| words[i % words.len()].clone().into_bytes())
                    .collect()
            }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn round_trip(plain in page_like(), cut in any::<prop::sample::Index>()) {
        let c = compress_lz77(&plain);
        prop_assert_eq!(lz77(&c, plain.len()).unwrap(), plain.clone());
        let h = compress_huffman(&plain);
        prop_assert_eq!(huffman(&h, plain.len()).unwrap(), plain.clone());
        // A shorter expected size gives that prefix or an overrun.
        if !plain.is_empty() {
            let n = cut.index(plain.len());
            prefix_or_overrun(lz77(&c, n), &plain, "lz77");
            prefix_or_overrun(huffman(&h, n), &plain, "huffman");
        }
    }

    #[test]
    fn arbitrary_input_never_panics(data in proptest::collection::vec(any::<u8>(), 0..2000), expected in 0usize..200_000) {
        for out in [lz77(&data, expected), huffman(&data, expected)].into_iter().flatten() {
            prop_assert_eq!(out.len(), expected);
        }
    }
}

//! Benchmark: Xpress decode rate (MB/s of output), one core, on a hibernation file's shape:
//! a forged crash dump's pages (headers, page tables, kernel image, zero pages) cut into
//! compression sets of 16 pages (64 KiB), each compressed by the forge's encoders; and the same
//! for the sample set's text and random data.
//!
//! Run: `cargo bench --bench xpress`

use criterion::{Criterion, Throughput};
use etwdump::dump::xpress::{decompress_huffman, decompress_lz77};
use etwdump_forge::xpress::{compress_huffman, compress_lz77, sample_set};

type Decode = fn(&[u8], &mut Vec<u8>, usize) -> Result<(), etwdump::dump::xpress::XpressError>;
type Compress = fn(&[u8]) -> Vec<u8>;

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let set = sample_set();
    let get = |n: &str| set.iter().find(|(name, _)| name == n).unwrap().1.clone();
    let inputs = [
        ("dump pages", get("dump-1m")),
        ("text", get("text-150001")),
        ("random", get("random-70000")),
    ];
    let mut g = c.benchmark_group("xpress");
    for (what, plain) in &inputs {
        let sets: Vec<&[u8]> = plain.chunks(65536).collect();
        g.throughput(Throughput::Bytes(plain.len() as u64));
        let codecs: [(&str, Compress, Decode); 2] = [
            ("LZ77+Huffman", compress_huffman, decompress_huffman),
            ("Plain LZ77", compress_lz77, decompress_lz77),
        ];
        for (codec, compress, decode) in codecs {
            let packed: Vec<(Vec<u8>, usize)> =
                sets.iter().map(|s| (compress(s), s.len())).collect();
            let mut out = Vec::with_capacity(65536);
            for ((p, n), s) in packed.iter().zip(&sets) {
                decode(p, &mut out, *n).unwrap();
                assert_eq!(&out[..], *s);
            }
            let ratio =
                packed.iter().map(|(p, _)| p.len()).sum::<usize>() as f64 / plain.len() as f64;
            g.bench_function(
                format!(
                    "{codec}, {what} ({} KiB in 64 KiB sets, ratio {ratio:.2})",
                    plain.len() >> 10
                ),
                |x| {
                    x.iter(|| {
                        for (p, n) in &packed {
                            decode(p, &mut out, *n).unwrap();
                        }
                        out.len()
                    })
                },
            );
        }
    }
    g.finish();
    c.final_summary();
}

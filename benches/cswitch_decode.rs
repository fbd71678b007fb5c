//! Benchmark: decode rate of CCSWAP packets and CSwitch (0x0524) payloads, one core.
//! Target: ≥ 50 million switches per second per core.
//!
//! Run: `cargo bench --bench cswitch_decode`

use criterion::{Criterion, Throughput};
use etwdump::decode::{ccswap, cswitch};

/// A batch of `n` packets mixing every form (lite, full, idle, idle-short).
fn batch(n: usize) -> Vec<u8> {
    let mut b = Vec::with_capacity(0x58 + n * 5);
    b.extend_from_slice(&1_000_000u64.to_le_bytes());
    for i in 0..16u32 {
        b.extend_from_slice(&(0x1000 + 4 * i).to_le_bytes());
    }
    b.extend_from_slice(&[8i8 as u8; 16]);
    for i in 0..n as u32 {
        match i % 4 {
            0 | 1 => b.extend_from_slice(
                &(2 | ((i & 15) << 2) | (1 << 6) | (5 << 9) | (0x123 << 15)).to_le_bytes(),
            ),
            2 => {
                b.extend_from_slice(&(3u32 | (0x4567 << 2)).to_le_bytes());
                b.extend_from_slice(&((i & 15) | (42 << 4) | (12 << 10) | (7 << 15)).to_le_bytes());
            }
            _ => b.extend_from_slice(&(0x321u16 << 2).to_le_bytes()), // idle short
        }
    }
    b
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let n = 1_000_000;
    let b = batch(n);
    assert_eq!(ccswap::decode(&b, Some(40)).switches.len(), n);
    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("CCSWAP packets, streaming (1M switches)", |x| {
        x.iter(|| {
            let mut acc = 0u64;
            ccswap::decode_each(&b, Some(40), |s| {
                acc = acc.wrapping_add(s.time ^ u64::from(s.old_tid))
            });
            acc
        })
    });
    g.bench_function("CCSWAP packets, into a Vec (1M switches)", |x| {
        x.iter(|| ccswap::decode(&b, Some(40)))
    });
    let payloads: Vec<u8> = (0..n as u32)
        .flat_map(|i| {
            let mut p = vec![0u8; 24];
            p[0..4].copy_from_slice(&i.to_le_bytes());
            p[4..8].copy_from_slice(&(i + 1).to_le_bytes());
            p
        })
        .collect();
    g.bench_function("CSwitch v4 payloads (1M switches)", |x| {
        x.iter(|| {
            let mut acc = 0u64;
            for p in payloads.chunks_exact(24) {
                if let Some(c) = cswitch::decode(p, 4) {
                    acc = acc.wrapping_add(u64::from(c.new_tid));
                }
            }
            acc
        })
    });
    g.finish();
    c.final_summary();
}

//! VMware saved-state metadata (`.vmss` of a suspended VM, `.vmsn` of a snapshot).
//!
//! Sources of the byte layout (read, not copied):
//! * volatility3 2.28.2 `volatility3/framework/layers/vmware.py` (`VmwareLayer._read_header`):
//!   header `<4sII` = magic (one of D0BED2BE, D1BAD1BA, D2BED2BE, D3BED3BE; version = low
//!   nibble of the first byte), an unknown u32, the group count; then the group table of
//!   `64sQQ` entries (NUL-padded name, file offset of the group's tags, a u64 volatility ignores;
//!   the forge writes the tag block's length there). A tag is: flags u8 (bits 6-7 = number of
//!   u32 indices, bits 0-5 = data length), name length u8, the name, the indices, the data; a tag
//!   with flags 0 and name length 0 ends the group. Data lengths 62 / 63 mean "long data": two
//!   sizes of 4 (version 0) or 8 bytes, 2 bytes of padding, then the data (volatility3 reads the
//!   first size and skips exactly 2 bytes). The "memory" group's `regionsCount` and, per region i,
//!   `regionPPN[i]` (guest physical page), `regionPageNum[i]` (page in the memory file) and
//!   `regionSize[i]` (pages) place the `.vmem`; volatility3 refuses `regionsCount` = 0.
//! * volatility 2 `volatility/plugins/addrspaces/vmware.py` (`VMWareSnapshotFile`): the same
//!   header, groups and tags; memory embedded in the snapshot is the data of the "memory"
//!   group's `Memory` tag with indices [0, 0], regions then being relative to that data
//!   (`regionPageNum * 4096 + RealDataOffset`); the 2 bytes after the two sizes are a u16
//!   padding length (data at +2 + that value). It also requires the "cpu" group's `CR64[0][3]`
//!   (x64) / `CR[0][3]` (x86) as the DTB.
//!
//! Choices: magic D3BED3BE (version 3, 8-byte long-data sizes); the unknown u32 = 0; groups
//! "cpu" (per CPU `CR64[cpu][0..5]` u64, or `CR[cpu][0..5]` u32 on x86) and "memory" (region tags
//! u32, `regionsCount` first). The embedded memory starts page aligned: the "memory" group's tags
//! are placed so that its `Memory` data begins at a 4 KiB boundary with padding length 0, which
//! both volatility versions read alike. volatility3 cannot open the embedded form itself: its
//! `VmwareStacker` stacks only on a file named `.vmem` and always uses that file as the memory,
//! the `.vmss`/`.vmsn` being metadata only.

use super::{CpuState, ImageRange};
use crate::util::{align_up, PAGE_SIZE};

/// "\xd3\xbe\xd3\xbe" on disk: format version 3.
const MAGIC: u32 = 0xBED3_BED3;
/// `<4sII`.
const HEADER_LEN: usize = 12;
/// `64sQQ`.
const GROUP_ENTRY_LEN: usize = 80;
/// Data length code of a long-data tag.
const LONG_DATA: u8 = 63;

/// A group's tag block under construction.
#[derive(Default)]
struct Tags(Vec<u8>);

impl Tags {
    fn head(&mut self, name: &str, indices: &[u32], data_code: u8) {
        assert!(indices.len() <= 3 && data_code < 64 && name.len() < 256);
        self.0.push(((indices.len() as u8) << 6) | data_code);
        self.0.push(name.len() as u8);
        self.0.extend_from_slice(name.as_bytes());
        for i in indices {
            self.0.extend_from_slice(&i.to_le_bytes());
        }
    }

    /// A tag with up to 61 bytes of data.
    fn small(&mut self, name: &str, indices: &[u32], data: &[u8]) {
        assert!(data.len() < 62);
        self.head(name, indices, data.len() as u8);
        self.0.extend_from_slice(data);
    }

    fn u32(&mut self, name: &str, indices: &[u32], v: u64) {
        let v = u32::try_from(v).expect("VMware region tags are u32");
        self.small(name, indices, &v.to_le_bytes());
    }

    /// A long-data tag's head: both sizes `len` (version 3: u64), padding length 0; the `len`
    /// data bytes follow.
    fn long_head(&mut self, name: &str, indices: &[u32], len: u64) {
        self.head(name, indices, LONG_DATA);
        self.0.extend_from_slice(&len.to_le_bytes());
        self.0.extend_from_slice(&len.to_le_bytes());
        self.0.extend_from_slice(&0u16.to_le_bytes());
    }

    fn end(&mut self) {
        self.0.extend_from_slice(&[0, 0]);
    }
}

/// The "cpu" group: control registers 0..4 of every CPU.
fn cpu_tags(cpu: &CpuState) -> Tags {
    let mut t = Tags::default();
    for n in 0..cpu.kpcr.len() as u32 {
        for (r, &v) in cpu.cr.iter().enumerate() {
            if cpu.arch.is_x64() {
                t.small("CR64", &[n, r as u32], &v.to_le_bytes());
            } else {
                t.small("CR", &[n, r as u32], &(v as u32).to_le_bytes());
            }
        }
    }
    t.end();
    t
}

/// The "memory" group: `regionsCount`, then per region `regionPageNum`, `regionPPN`,
/// `regionSize` (pages; `file_offset` of `regions` counts from the start of the memory, i.e.
/// of the `.vmem` or of the `Memory` data); `embedded`: the `Memory[0][0]` head (its data and
/// the end marker follow the returned bytes), else the end marker.
fn memory_tags(regions: &[ImageRange], embedded: bool) -> Tags {
    let mut t = Tags::default();
    t.u32("regionsCount", &[], regions.len() as u64);
    for (i, r) in regions.iter().enumerate() {
        let i = i as u32;
        t.u32("regionPageNum", &[i], r.file_offset / PAGE_SIZE);
        t.u32("regionPPN", &[i], r.start / PAGE_SIZE);
        t.u32("regionSize", &[i], r.size / PAGE_SIZE);
    }
    if embedded {
        let total: u64 = regions.iter().map(|r| r.size).sum();
        t.long_head("Memory", &[0, 0], total);
    } else {
        t.end();
    }
    t
}

/// The `.vmss` (whole file) or, with `embedded`, the `.vmsn` up to the first byte of the
/// memory (page aligned; the memory and a 2-byte end marker follow). `regions` as for
/// [`memory_tags`]: back to back from 0, ascending physical addresses.
pub(crate) fn metadata(cpu: &CpuState, regions: &[ImageRange], embedded: bool) -> Vec<u8> {
    let cpu_block = cpu_tags(cpu).0;
    let mem_block = memory_tags(regions, embedded).0;
    let table_end = HEADER_LEN + 2 * GROUP_ENTRY_LEN;
    let cpu_at = table_end;
    let mut mem_at = cpu_at + cpu_block.len();
    let mut mem_len = mem_block.len() as u64;
    if embedded {
        let data_at = align_up((mem_at + mem_block.len()) as u64, PAGE_SIZE) as usize;
        mem_at = data_at - mem_block.len();
        let total: u64 = regions.iter().map(|r| r.size).sum();
        mem_len += total + 2;
    }
    let mut out = Vec::with_capacity(mem_at + mem_block.len());
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&2u32.to_le_bytes());
    let groups = [
        ("cpu", cpu_at, cpu_block.len() as u64),
        ("memory", mem_at, mem_len),
    ];
    for (name, at, len) in groups {
        let mut entry = [0u8; GROUP_ENTRY_LEN];
        entry[..name.len()].copy_from_slice(name.as_bytes());
        entry[64..72].copy_from_slice(&(at as u64).to_le_bytes());
        entry[72..80].copy_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&entry);
    }
    out.extend_from_slice(&cpu_block);
    out.resize(mem_at, 0);
    out.extend_from_slice(&mem_block);
    out
}

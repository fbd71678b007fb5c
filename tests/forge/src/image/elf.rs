//! An ELF core of the machine's physical memory as QEMU's `dump-guest-memory` (without
//! paging) writes one.
//!
//! Sources of the byte layout (read, not copied):
//! * QEMU `dump/dump.c`: `write_elf64_header` / `write_elf32_header` (e_ident ELFMAG, class,
//!   ELFDATA2LSB, EV_CURRENT; e_type ET_CORE; e_machine; e_version EV_CURRENT; e_phoff =
//!   sizeof(Ehdr); e_phnum = min(phdr_num, PN_XNUM), with PN_XNUM the real count goes to the
//!   `sh_info` of one section header right after the program headers), `write_elf64_note`
//!   (PT_NOTE first: p_offset = the notes, p_paddr = p_vaddr = 0, p_filesz = p_memsz = their
//!   size), `write_elf64_load` (one PT_LOAD per RAM block: p_paddr = guest physical address,
//!   p_offset, p_filesz = p_memsz = the block's size), `dump_begin`'s file order (ELF header,
//!   PT_NOTE, PT_LOADs, section header, notes, memory) and `write_elf64_notes` (one "CORE"
//!   NT_PRSTATUS note per CPU, then one "QEMU" note per CPU).
//! * QEMU `target/i386/arch_dump.c`: `cpu_get_dump_info` (EM_X86_64 and ELFCLASS64 in long
//!   mode; else EM_386 and ELFCLASS32 unless a RAM block ends above 4 GiB, then ELFCLASS64),
//!   `x86_64_elf_prstatus` (336 bytes: pid at +32, the 27 user registers at +112),
//!   `x86_elf_prstatus` (144 bytes: pid at +24, registers at +72), `QEMUCPUState` version 1
//!   (432 bytes: version, size, 18 general registers, 10 segments of {selector, limit, flags,
//!   pad, base}, cr[5] at +392); note name "CORE" / "QEMU" with n_namesz 5, name and
//!   descriptor padded to 4 bytes.
//! * volatility3 `volatility3/framework/layers/elf.py` (`Elf64Layer`): only ELFCLASS64; every
//!   PT_LOAD with p_filesz = p_memsz > 0 is a segment at p_paddr.
//!
//! Choices: the memory starts at a 4 KiB boundary after the notes (QEMU puts it right after
//! them) so every PT_LOAD's file contents are page aligned; p_vaddr = 0 in every PT_LOAD (older
//! QEMU wrote the mapping's virtual address there, 0 without paging; the dump.c read here
//! writes p_paddr when the mapping has none), so a reader must address by p_paddr;
//! p_flags = p_align = 0 as QEMU does. A CPU's registers are zero but
//! for the segment selectors of Windows' kernel mode, the KPCR in GS (x64) / FS (x86) base and
//! the control registers of [`CpuState`].

use super::{CpuState, ImageRange};
use crate::config::{Arch, Config};
use crate::util::{align_up, PAGE_SIZE};

const ET_CORE: u16 = 4;
const EM_386: u16 = 3;
const EM_X86_64: u16 = 62;
const PT_LOAD: u32 = 1;
const PT_NOTE: u32 = 4;
const NT_PRSTATUS: u32 = 1;
const PN_XNUM: usize = 0xFFFF;
const QEMU_CPU_STATE_LEN: usize = 432;

/// Class and machine of the core, as `cpu_get_dump_info` chooses them.
#[derive(Clone, Copy)]
struct Shape {
    wide: bool,
    machine: u16,
}

impl Shape {
    fn of(arch: Arch, runs_end: u64) -> Shape {
        match arch {
            Arch::X64 => Shape {
                wide: true,
                machine: EM_X86_64,
            },
            _ => Shape {
                wide: runs_end > 0xFFFF_FFFF,
                machine: EM_386,
            },
        }
    }

    fn ehdr_len(self) -> usize {
        if self.wide {
            64
        } else {
            52
        }
    }

    fn phdr_len(self) -> usize {
        if self.wide {
            56
        } else {
            32
        }
    }

    fn shdr_len(self) -> usize {
        if self.wide {
            64
        } else {
            40
        }
    }

    /// NT_PRSTATUS descriptor size: `x86_64_elf_prstatus` or `x86_elf_prstatus`.
    fn prstatus_len(self) -> usize {
        if self.machine == EM_X86_64 {
            336
        } else {
            144
        }
    }

    fn note_len(desc: usize) -> usize {
        12 + 8 + align_up(desc as u64, 4) as usize
    }

    /// Bytes before the memory: headers, section header (PN_XNUM), notes, page padding.
    fn memory_offset(self, loads: usize, cpus: usize) -> u64 {
        let phnum = 1 + loads;
        let section = if phnum >= PN_XNUM { self.shdr_len() } else { 0 };
        let notes =
            cpus * (Self::note_len(self.prstatus_len()) + Self::note_len(QEMU_CPU_STATE_LEN));
        let len = self.ehdr_len() + phnum * self.phdr_len() + section + notes;
        align_up(len as u64, PAGE_SIZE)
    }
}

fn runs_end(runs: &[(u64, u64)]) -> u64 {
    runs.last()
        .map_or(0, |&(pfn, count)| (pfn + count) * PAGE_SIZE)
}

/// File offset of the first PT_LOAD's contents for the stored `runs`.
pub(crate) fn memory_offset(cfg: &Config, runs: &[(u64, u64)]) -> u64 {
    Shape::of(cfg.arch, runs_end(runs)).memory_offset(runs.len(), cfg.cpus as usize)
}

/// Little-endian writer of a class's words.
struct Out {
    b: Vec<u8>,
    wide: bool,
}

impl Out {
    fn u16(&mut self, v: u16) {
        self.b.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.b.extend_from_slice(&v.to_le_bytes());
    }
    /// An address / offset / size: u64 in ELF64, u32 in ELF32.
    fn word(&mut self, v: u64) {
        if self.wide {
            self.b.extend_from_slice(&v.to_le_bytes());
        } else {
            self.u32(u32::try_from(v).expect("ELF32 value above 4 GiB"));
        }
    }

    /// Elf32_Phdr (type, offset, vaddr, paddr, filesz, memsz, flags, align) or Elf64_Phdr
    /// (type, flags, offset, vaddr, paddr, filesz, memsz, align).
    fn phdr(&mut self, p_type: u32, offset: u64, paddr: u64, size: u64) {
        self.u32(p_type);
        if self.wide {
            self.u32(0);
        }
        for v in [offset, 0, paddr, size, size] {
            self.word(v);
        }
        if !self.wide {
            self.u32(0);
        }
        self.word(0);
    }

    fn note(&mut self, name: &[u8; 4], n_type: u32, desc: &[u8]) {
        self.u32(5);
        self.u32(desc.len() as u32);
        self.u32(n_type);
        self.b.extend_from_slice(name);
        self.b.extend_from_slice(&[0; 4]);
        self.b.extend_from_slice(desc);
        self.b.resize(align_up(self.b.len() as u64, 4) as usize, 0);
    }
}

/// Everything before the memory: ELF header, PT_NOTE, one PT_LOAD per range, the PN_XNUM
/// section header if needed, the notes, zero padding to `ranges[0].file_offset`.
pub(crate) fn headers(cfg: &Config, cpu: &CpuState, ranges: &[ImageRange]) -> Vec<u8> {
    let end = ranges.last().map_or(0, |r| r.start + r.size);
    let shape = Shape::of(cfg.arch, end);
    let cpus = cpu.kpcr.len();
    let mem_at = shape.memory_offset(ranges.len(), cpus);
    let phnum = 1 + ranges.len();
    let mut o = Out {
        b: Vec::with_capacity(mem_at as usize),
        wide: shape.wide,
    };
    // e_ident: ELFMAG, class, ELFDATA2LSB, EV_CURRENT, ELFOSABI_NONE, padding.
    o.b.extend_from_slice(b"\x7fELF");
    o.b.extend_from_slice(&[if shape.wide { 2 } else { 1 }, 1, 1, 0]);
    o.b.resize(16, 0);
    o.u16(ET_CORE);
    o.u16(shape.machine);
    o.u32(1);
    o.word(0); // e_entry
    let phoff = shape.ehdr_len() as u64;
    let section = phnum >= PN_XNUM;
    let shoff = phoff + (phnum * shape.phdr_len()) as u64;
    o.word(phoff);
    o.word(if section { shoff } else { 0 });
    o.u32(0); // e_flags
    o.u16(shape.ehdr_len() as u16);
    o.u16(shape.phdr_len() as u16);
    o.u16(phnum.min(PN_XNUM) as u16);
    o.u16(if section { shape.shdr_len() as u16 } else { 0 });
    o.u16(u16::from(section));
    o.u16(0); // e_shstrndx
    let notes_at = shoff + if section { shape.shdr_len() as u64 } else { 0 };
    let notes = notes(shape, cpu);
    o.phdr(PT_NOTE, notes_at, 0, notes.len() as u64);
    for r in ranges {
        o.phdr(PT_LOAD, r.file_offset, r.start, r.size);
    }
    if section {
        // Only sh_info (the real program-header count) is set.
        let mut sh = vec![0u8; shape.shdr_len()];
        let at = if shape.wide { 44 } else { 28 };
        sh[at..at + 4].copy_from_slice(&(phnum as u32).to_le_bytes());
        o.b.extend_from_slice(&sh);
    }
    assert_eq!(o.b.len() as u64, notes_at);
    o.b.extend_from_slice(&notes);
    assert!(o.b.len() as u64 <= mem_at);
    o.b.resize(mem_at as usize, 0);
    o.b
}

/// Windows kernel-mode selectors: (cs, ss, ds, es, fs, gs).
fn selectors(arch: Arch) -> [u16; 6] {
    if arch.is_x64() {
        [0x10, 0x18, 0x2B, 0x2B, 0x53, 0x2B]
    } else {
        [0x08, 0x10, 0x23, 0x23, 0x30, 0x00]
    }
}

/// The notes: "CORE" NT_PRSTATUS for every CPU, then "QEMU" QEMUCPUState for every CPU.
fn notes(shape: Shape, cpu: &CpuState) -> Vec<u8> {
    let mut o = Out {
        b: Vec::new(),
        wide: shape.wide,
    };
    let [cs, ss, ds, es, fs, gs] = selectors(cpu.arch).map(u64::from);
    for (n, &kpcr) in cpu.kpcr.iter().enumerate() {
        let pid = n as u32 + 1; // QEMU's cpu_index + 1
        let mut d = vec![0u8; shape.prstatus_len()];
        if shape.machine == EM_X86_64 {
            d[32..36].copy_from_slice(&pid.to_le_bytes());
            // r15 .. rdi, orig_rax, rip (17 words), then cs, eflags, rsp, ss, fs_base,
            // gs_base, ds, es, fs, gs.
            let tail = [cs, 0x202, 0, ss, 0, kpcr, ds, es, fs, gs];
            for (k, v) in tail.iter().enumerate() {
                let at = 112 + (17 + k) * 8;
                d[at..at + 8].copy_from_slice(&v.to_le_bytes());
            }
        } else {
            d[24..28].copy_from_slice(&pid.to_le_bytes());
            // ds, es, fs, gs (u16 + u16 padding each) at +100; cs at +124, eflags at +128,
            // ss at +136.
            for (k, v) in [ds, es, fs, gs].iter().enumerate() {
                d[100 + 4 * k..102 + 4 * k].copy_from_slice(&(*v as u16).to_le_bytes());
            }
            d[124..126].copy_from_slice(&(cs as u16).to_le_bytes());
            d[128..132].copy_from_slice(&0x202u32.to_le_bytes());
            d[136..138].copy_from_slice(&(ss as u16).to_le_bytes());
        }
        o.note(b"CORE", NT_PRSTATUS, &d);
    }
    for &kpcr in &cpu.kpcr {
        o.note(b"QEMU", 0, &qemu_cpu_state(cpu, kpcr));
    }
    o.b
}

/// QEMUCPUState version 1 of one CPU.
fn qemu_cpu_state(cpu: &CpuState, kpcr: u64) -> Vec<u8> {
    let mut d = vec![0u8; QEMU_CPU_STATE_LEN];
    d[0..4].copy_from_slice(&1u32.to_le_bytes());
    d[4..8].copy_from_slice(&(QEMU_CPU_STATE_LEN as u32).to_le_bytes());
    d[144..152].copy_from_slice(&0x202u64.to_le_bytes()); // rflags
    let [cs, ss, ds, es, fs, gs] = selectors(cpu.arch);
    // Segments from +152, 24 bytes each: cs, ds, es, fs, gs, ss, ldt, tr, gdt, idt.
    let kpcr_seg = if cpu.arch.is_x64() { 4 } else { 3 };
    for (k, sel) in [cs, ds, es, fs, gs, ss].into_iter().enumerate() {
        let at = 152 + k * 24;
        d[at..at + 4].copy_from_slice(&u32::from(sel).to_le_bytes());
        d[at + 4..at + 8].copy_from_slice(&0xFFFF_FFFFu32.to_le_bytes());
        if k == kpcr_seg {
            d[at + 16..at + 24].copy_from_slice(&kpcr.to_le_bytes());
        }
    }
    for (r, v) in cpu.cr.iter().enumerate() {
        let at = 392 + r * 8;
        d[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
    d
}

//! Errors of the memory layer. Each carries the virtual address that failed and, for paging
//! failures, the level and the entry that stopped the walk.

use crate::addr::{PhysAddr, VirtAddr};
use std::fmt;
use thiserror::Error;

/// A level of a page-table walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PagingLevel {
    /// x64 PML5 (level 5, LA57).
    Pml5,
    /// x64 PML4 (level 4).
    Pml4,
    /// x64 PDPT (level 3) or the PAE 4-entry PDPT.
    Pdpt,
    /// Page directory (level 2).
    Pd,
    /// Page table (level 1).
    Pt,
}

impl fmt::Display for PagingLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PagingLevel::Pml5 => "PML5E",
            PagingLevel::Pml4 => "PML4E",
            PagingLevel::Pdpt => "PDPTE",
            PagingLevel::Pd => "PDE",
            PagingLevel::Pt => "PTE",
        })
    }
}

/// Why memory could not be read: an entry of the page-table walk that is not present (its
/// level, value and address), a table or page the dump does not hold or holds past its
/// truncated end, an address outside the architecture or outside a triage dump's blocks.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum MemError {
    #[error("virtual address {va} is not a valid address for this architecture")]
    NonCanonical { va: VirtAddr },
    #[error("{va}: {level} {entry:#x} (at physical {entry_pa}) is not present")]
    NotPresent {
        va: VirtAddr,
        level: PagingLevel,
        entry: u64,
        entry_pa: PhysAddr,
    },
    #[error("{va}: the page holding its {level} (physical {table_pa}) is not in the dump")]
    TableMissing {
        va: VirtAddr,
        level: PagingLevel,
        table_pa: PhysAddr,
    },
    #[error("{va}: maps to physical {pa}, which is not in the dump")]
    PageMissing { va: VirtAddr, pa: PhysAddr },
    #[error("{va}: maps to physical {pa}, which lies past the end of the truncated dump")]
    PageBeyondEof { va: VirtAddr, pa: PhysAddr },
    #[error("{va}: maps to physical {pa}, held in a compressed block of the file (at offset {file_offset:#x}) that cannot be decoded")]
    PageDamaged {
        va: VirtAddr,
        pa: PhysAddr,
        file_offset: u64,
    },
    #[error("{va}: not in any memory block of this triage dump")]
    NotInTriage { va: VirtAddr },
    #[error("physical address {pa} is not in the dump")]
    PhysMissing { pa: PhysAddr },
    #[error("virtual address translation is not supported for {arch} yet")]
    Unsupported { arch: &'static str },
    #[error("a read of {len:#x} bytes at {va} runs past the top of the address space")]
    Wraps { va: VirtAddr, len: u64 },
    #[error("{what} at {va}: {reason}")]
    TooLarge {
        what: &'static str,
        va: VirtAddr,
        reason: String,
    },
}

impl MemError {
    /// True when the failure means "these bytes are not in the dump" (as opposed to a bad
    /// address or an unsupported architecture). `try_` reads turn these into `None`.
    pub fn is_missing(&self) -> bool {
        matches!(
            self,
            MemError::NotPresent { .. }
                | MemError::TableMissing { .. }
                | MemError::PageMissing { .. }
                | MemError::PageBeyondEof { .. }
                | MemError::PageDamaged { .. }
                | MemError::NotInTriage { .. }
                | MemError::PhysMissing { .. }
        )
    }

    /// The virtual address the error is about, if any.
    pub fn va(&self) -> Option<VirtAddr> {
        match self {
            MemError::NonCanonical { va }
            | MemError::NotPresent { va, .. }
            | MemError::TableMissing { va, .. }
            | MemError::PageMissing { va, .. }
            | MemError::PageBeyondEof { va, .. }
            | MemError::PageDamaged { va, .. }
            | MemError::NotInTriage { va }
            | MemError::Wraps { va, .. }
            | MemError::TooLarge { va, .. } => Some(*va),
            MemError::PhysMissing { .. } | MemError::Unsupported { .. } => None,
        }
    }
}

//! The crash-dump container: header, file layout (full / bitmap), physical memory, page tables
//! the probe area and processes' own address spaces.

pub(crate) mod header;
pub(crate) mod layout;
pub(crate) mod paging;
pub(crate) mod phys;
pub(crate) mod probes;
pub(crate) mod user_space;

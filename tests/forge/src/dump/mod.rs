//! The crash-dump container: header, file layout (full / bitmap), physical memory, page tables
//! and the probe area.

pub(crate) mod header;
pub(crate) mod layout;
pub(crate) mod paging;
pub(crate) mod phys;
pub(crate) mod probes;

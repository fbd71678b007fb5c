//! The kernel's loaded-module list (PsLoadedModuleList → KLDR_DATA_TABLE_ENTRY chain).
//! Offsets of the entry's head are the same in every Windows version since XP
//! (crash-dump-format.md §1.4 A; checked against the 19041 ISF).

use super::UnicodeString;
use crate::addr::VirtAddr;
use crate::mem::{AddressSpace, ListStop, MemError};
use serde::Serialize;

/// Upper bound on entries walked (real systems load a few hundred modules).
pub(crate) const MAX_MODULES: usize = 8192;

struct LdrLayout {
    dll_base: u64,
    size_of_image: u64,
    full_dll_name: u64,
    base_dll_name: u64,
}

const LDR_X64: LdrLayout = LdrLayout {
    dll_base: 0x30,
    size_of_image: 0x40,
    full_dll_name: 0x48,
    base_dll_name: 0x58,
};
const LDR_X86: LdrLayout = LdrLayout {
    dll_base: 0x18,
    size_of_image: 0x20,
    full_dll_name: 0x24,
    base_dll_name: 0x2C,
};

/// One loaded module.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct LoadedModule {
    pub entry: VirtAddr,
    pub base: VirtAddr,
    pub size: u32,
    /// `None` when the name's buffer is not in the dump.
    pub full_name: Option<crate::text::Untrusted>,
    pub base_name: Option<crate::text::Untrusted>,
}

/// The walk's result: the modules read, and why it stopped early if it did.
#[derive(Clone, Debug, Default)]
pub struct ModuleList {
    pub modules: Vec<LoadedModule>,
    /// Set when the walk did not get back to the list head.
    pub incomplete: Option<String>,
}

/// Walk the list whose head is at `head`.
pub fn walk(space: &AddressSpace<'_>, head: VirtAddr) -> Result<ModuleList, MemError> {
    let l = if space.arch().is_64bit() {
        &LDR_X64
    } else {
        &LDR_X86
    };
    let mut out = ModuleList::default();
    let mut walk = space.list_entries(head, MAX_MODULES as u64)?;
    for cur in walk.by_ref() {
        match read_entry(space, l, cur) {
            Ok(e) => out.modules.push(e),
            Err(e) => {
                out.incomplete = Some(format!("entry {cur} is unreadable: {e}"));
                return Ok(out);
            }
        }
    }
    out.incomplete = walk.stopped().map(|why| match why {
        ListStop::Bound { after } => format!("stopped after {after} entries"),
        ListStop::Cycle { entry } => {
            format!("the list loops back to entry {entry} without reaching the head")
        }
        ListStop::Unreadable { entry, source } => {
            format!("Flink of entry {entry} is unreadable: {source}")
        }
    });
    Ok(out)
}

fn read_entry(
    space: &AddressSpace<'_>,
    l: &LdrLayout,
    va: VirtAddr,
) -> Result<LoadedModule, MemError> {
    let base = space.read_ptr(va.offset(l.dll_base))?;
    let size = space.read_u32(va.offset(l.size_of_image))?;
    let name = |off: u64| {
        UnicodeString::read(space, va.offset(off))
            .and_then(|u| u.text(space))
            .ok()
    };
    Ok(LoadedModule {
        entry: va,
        base,
        size,
        full_name: name(l.full_dll_name),
        base_name: name(l.base_dll_name),
    })
}

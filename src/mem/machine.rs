//! The machine whose memory a container holds: its architecture, the root of the kernel's
//! page tables, and how they were established (issue 28: discovery gives a machine; the
//! container carries none of it). A crash dump's header states them; an image's are found
//! by discovery (`kernel::discover::machine`: the page-table self-reference) or given by a
//! host framework's layout.

use crate::dump::{Arch, DumpFile};
use crate::warning::Warning;

/// How a [`Machine`] is known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MachineSource {
    /// The crash dump's header (or a triage dump's, whose memory is virtually addressed).
    Header,
    /// Found in the image, or given by a layout and checked: the evidence.
    Found(String),
    /// Not known: why (an image whose page tables were not found, or not looked for yet).
    Unknown(String),
}

/// Architecture and kernel page-table root of the dumped machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Machine {
    pub arch: Arch,
    /// The kernel's page-table root (CR3 as the OS stores it; the paging mode masks it).
    pub dtb: u64,
    pub source: MachineSource,
    /// What discovery noticed about the memory (page tables naming pages past the image, a
    /// layout's root refused): anomalies.
    pub warnings: Vec<Warning>,
}

impl Machine {
    /// What the container itself says: a crash dump's header; for an image, its
    /// architecture hint (ELF e_machine) and no root yet.
    pub fn of_container(dump: &DumpFile) -> Machine {
        let h = dump.header();
        if dump.headerless() {
            Machine {
                arch: h.arch,
                dtb: 0,
                source: MachineSource::Unknown(
                    "a memory image's page-table root is found by discovery (kernel::discover::machine)"
                        .into(),
                ),
                warnings: Vec::new(),
            }
        } else {
            Machine {
                arch: h.arch,
                dtb: h.directory_table_base,
                source: MachineSource::Header,
                warnings: Vec::new(),
            }
        }
    }

    /// A machine found by discovery or given by a layout.
    pub fn found(arch: Arch, dtb: u64, how: String) -> Machine {
        Machine {
            arch,
            dtb,
            source: MachineSource::Found(how),
            warnings: Vec::new(),
        }
    }

    /// Whether virtual memory can be read through it.
    pub(crate) fn is_known(&self) -> bool {
        !matches!(self.source, MachineSource::Unknown(_))
    }

    /// How the root was found (None: from the header).
    pub fn found_by(&self) -> Option<&str> {
        match &self.source {
            MachineSource::Found(h) => Some(h),
            _ => None,
        }
    }

    /// Why it is not known.
    pub fn problem(&self) -> Option<&str> {
        match &self.source {
            MachineSource::Unknown(w) => Some(w),
            _ => None,
        }
    }
}

/// An opened container with the machine discovery found in it: what every command reads.
/// Derefs to the container.
#[derive(Debug)]
pub struct Memory {
    pub dump: DumpFile,
    pub machine: Machine,
}

impl std::ops::Deref for Memory {
    type Target = DumpFile;
    fn deref(&self) -> &DumpFile {
        &self.dump
    }
}

impl Memory {
    /// The kernel address space of this machine.
    pub fn space(&self) -> super::AddressSpace<'_> {
        super::AddressSpace::new(&self.dump, &self.machine)
    }
}

//! etwdump: recover Event Tracing for Windows (ETW) state from Windows kernel crash dumps.
//!
//! Layers, each depending only on the ones before it:
//! - [`dump`]: the dump file (header, run list, bitmap, triage blocks);
//! - [`mem`]: physical and virtual memory (x64, x86 PAE and non-PAE paging; triage VA blocks);
//! - [`kernel`]: kernel objects read through typed views (KDBG, KUSER_SHARED_DATA, the loaded
//!   module list, the kernel's PE image and its CodeView record);
//! - [`report`]: what the commands print (table and JSON).

pub mod addr;
pub mod bytes;
pub mod decode;
pub mod dump;
pub mod etl;
pub mod etw;
pub mod kernel;
pub mod mem;
pub mod render;
pub mod report;
pub mod symbols;
pub mod text;
pub mod time;
pub mod warning;

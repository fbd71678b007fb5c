//! Errors of the dump-file layer. Every variant names the field or extent that is wrong.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum DumpError {
    #[error("cannot read the dump file: {0}")]
    Io(#[from] std::io::Error),
    #[error("the file is empty (0 bytes): not a crash dump")]
    Empty,
    #[error("not a Windows kernel crash dump: the file is only {len} bytes long")]
    TooShort { len: u64 },
    #[error("this is a user-mode minidump (signature MDMP), not a kernel crash dump")]
    UserModeMinidump,
    #[error(
        "not a Windows kernel crash dump: signature at offset 0 is \"{found}\" (expected \"PAGE\")"
    )]
    BadSignature { found: String },
    #[error("not a Windows kernel crash dump: ValidDump at offset 4 is \"{found}\" (expected \"DUMP\" or \"DU64\")")]
    BadValidDump { found: String },
    #[error(
        "truncated header: the {which} header needs {need:#x} bytes but the file has {have:#x}"
    )]
    TruncatedHeader {
        which: &'static str,
        need: u64,
        have: u64,
    },
    #[error("unsupported architecture: MachineImageType {machine:#x} in a {which} header")]
    UnsupportedArch { machine: u32, which: &'static str },
    #[error("DumpType {value} ({name}) is not supported yet")]
    UnsupportedDumpType { value: u32, name: &'static str },
    #[error("unknown DumpType {value:#x} at header offset {offset:#x}")]
    UnknownDumpType { value: u32, offset: u64 },
    #[error("corrupt physical memory run list: {0}")]
    BadRunList(String),
    #[error("corrupt bitmap header at file offset {offset:#x}: {reason}")]
    BadBitmap { offset: u64, reason: String },
    #[error("corrupt triage dump: {field}: {reason}")]
    BadTriage { field: &'static str, reason: String },
    #[error("corrupt {format} image: {reason}")]
    BadImage {
        format: &'static str,
        reason: String,
    },
    #[error("{0}")]
    Missing(String),
    #[error("{format} image: {reason}")]
    NoWindows {
        format: &'static str,
        reason: String,
    },
    #[error("not a Windows kernel crash dump (signature at offset 0 is \"{signature}\", expected \"PAGE\"), nor, read as a raw physical memory image, Windows memory: {reason}")]
    NotMemory { signature: String, reason: String },
    #[error("truncated dump: {what} ends at file offset {end:#x} but the file has only {file_len:#x} bytes (use --allow-truncated to read what is there)")]
    Truncated {
        what: String,
        end: u64,
        file_len: u64,
    },
}

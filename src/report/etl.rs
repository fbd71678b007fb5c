//! `etwdump etl`: the buffers and records of an .etl file, as [`crate::etl::reader`] walks it.

use crate::etl::reader::{EtlBuffer, EtlFile};
use serde::Serialize;

/// The walk of one .etl file: its buffers and why reading stopped early, if it did.
#[derive(Serialize)]
pub struct EtlReport {
    /// The file as named on the command line.
    pub file: String,
    pub buffers: Vec<EtlBuffer>,
    pub problem: Option<String>,
}

impl EtlReport {
    /// The model of the .etl file `file`.
    pub fn new(file: String, f: EtlFile) -> Self {
        EtlReport {
            file,
            buffers: f.buffers,
            problem: f.problem,
        }
    }
}

//! The commands of the binary, one unit each: a command's file declares its arguments
//! (`Args`, clap) and its `run`, which opens the dump through [`common`], makes one library
//! call for the model, and prints it with the renderer chosen from `--format`. A new command
//! is a new file here and one variant of `Command` in main.rs.

pub mod common;
pub mod flags;

pub mod buffers;
pub mod check;
pub mod collect;
pub mod completions;
pub mod cswitch;
pub mod etl;
pub mod events;
pub mod extract;
pub mod info;
pub mod manpage;
pub mod overview;
pub mod providers;
pub mod read;
pub mod scan;
pub mod sessions;
pub mod stdout;
pub mod symbols;

/// The exit status of a command that failed: 1 when `collect` wrote its directory but some
/// artefacts failed, 2 for any other error (docs/reference.md).
pub fn exit_status(e: &anyhow::Error) -> u8 {
    if e.downcast_ref::<collect::Incomplete>().is_some() {
        1
    } else {
        2
    }
}

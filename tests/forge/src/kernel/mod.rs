//! The kernel in the dump: the machine builder, kernel objects, the PE image (hand-made or a
//! fixture's), types.h layouts, the process list and the processes' user memory.

pub(crate) mod fixture;
pub(crate) mod machine;
pub(crate) mod objects;
pub(crate) mod pe;
pub(crate) mod processes;
pub(crate) mod types_h;
pub(crate) mod user_images;

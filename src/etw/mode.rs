//! Names for logger modes and clock types.

/// EVENT_TRACE_SYSTEM_LOGGER_MODE: a kernel (system) logger.
pub const SYSTEM_LOGGER_MODE: u64 = 0x0200_0000;
/// EVENT_TRACE_NO_PER_PROCESSOR_BUFFERING: the logger uses CurrentBuffer, not per-CPU buffers.
pub const NO_PER_PROCESSOR_BUFFERING: u64 = 0x1000_0000;

/// EVENT_TRACE_* logging-mode flags (evntrace.h; learn.microsoft.com "Logging Mode Constants").
pub(crate) const LOGGER_MODE_FLAGS: &[(u32, &str)] = &[
    (0x0000_0001, "EVENT_TRACE_FILE_MODE_SEQUENTIAL"),
    (0x0000_0002, "EVENT_TRACE_FILE_MODE_CIRCULAR"),
    (0x0000_0004, "EVENT_TRACE_FILE_MODE_APPEND"),
    (0x0000_0008, "EVENT_TRACE_FILE_MODE_NEWFILE"),
    (0x0000_0020, "EVENT_TRACE_FILE_MODE_PREALLOCATE"),
    (0x0000_0040, "EVENT_TRACE_NONSTOPPABLE_MODE"),
    (0x0000_0080, "EVENT_TRACE_SECURE_MODE"),
    (0x0000_0100, "EVENT_TRACE_REAL_TIME_MODE"),
    (0x0000_0200, "EVENT_TRACE_DELAY_OPEN_FILE_MODE"),
    (0x0000_0400, "EVENT_TRACE_BUFFERING_MODE"),
    (0x0000_0800, "EVENT_TRACE_PRIVATE_LOGGER_MODE"),
    (0x0000_1000, "EVENT_TRACE_ADD_HEADER_MODE"),
    (0x0000_2000, "EVENT_TRACE_USE_KBYTES_FOR_SIZE"),
    (0x0000_4000, "EVENT_TRACE_USE_GLOBAL_SEQUENCE"),
    (0x0000_8000, "EVENT_TRACE_USE_LOCAL_SEQUENCE"),
    (0x0001_0000, "EVENT_TRACE_RELOG_MODE"),
    (0x0002_0000, "EVENT_TRACE_PRIVATE_IN_PROC"),
    (0x0010_0000, "EVENT_TRACE_MODE_RESERVED"),
    (0x0040_0000, "EVENT_TRACE_STOP_ON_HYBRID_SHUTDOWN"),
    (0x0080_0000, "EVENT_TRACE_PERSIST_ON_HYBRID_SHUTDOWN"),
    (0x0100_0000, "EVENT_TRACE_USE_PAGED_MEMORY"),
    (0x0200_0000, "EVENT_TRACE_SYSTEM_LOGGER_MODE"),
    (0x0400_0000, "EVENT_TRACE_COMPRESSED_MODE"),
    (0x0800_0000, "EVENT_TRACE_INDEPENDENT_SESSION_MODE"),
    (0x1000_0000, "EVENT_TRACE_NO_PER_PROCESSOR_BUFFERING"),
    (0x2000_0000, "EVENT_TRACE_BLOCKING_MODE"),
    (0x8000_0000, "EVENT_TRACE_ADDTO_TRIAGE_DUMP"),
];

/// The flag names set in `mode`; bits without a documented name appear as hex.
pub fn logger_mode_flags(mode: u32) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = mode;
    for &(bit, name) in LOGGER_MODE_FLAGS {
        if mode & bit != 0 {
            out.push(name.to_string());
            rest &= !bit;
        }
    }
    for i in 0..32 {
        if rest & (1 << i) != 0 {
            out.push(format!("{:#010x}", 1u32 << i));
        }
    }
    out
}

/// Clock type names (etw-internals.md §7): 0 raw, 1 QPC, 2 system time, 3 CPU cycle counter.
pub fn clock_type_name(c: u64) -> Option<&'static str> {
    Some(match c {
        0 => "Raw",
        1 => "QPC",
        2 => "SystemTime",
        3 => "CPUCycle",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(
            logger_mode_flags(0x0200_0400 | 0x4000_0000),
            vec![
                "EVENT_TRACE_BUFFERING_MODE",
                "EVENT_TRACE_SYSTEM_LOGGER_MODE",
                "0x40000000"
            ]
        );
        assert!(logger_mode_flags(0).is_empty());
        assert_eq!(clock_type_name(1), Some("QPC"));
        assert_eq!(clock_type_name(4), None);
    }
}

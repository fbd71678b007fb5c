//! Names of thread states, wait reasons and wait modes (cswitch_class.txt; the 19041 ISF's
//! _KTHREAD_STATE and _KWAIT_REASON enums for the later values). Unknown values stay numbers.

/// KTHREAD_STATE.
pub fn thread_state(v: u8) -> Option<&'static str> {
    Some(match v {
        0 => "Initialized",
        1 => "Ready",
        2 => "Running",
        3 => "Standby",
        4 => "Terminated",
        5 => "Waiting",
        6 => "Transition",
        7 => "DeferredReady",
        8 => "GateWaitObsolete",
        9 => "WaitingForProcessInSwap",
        _ => return None,
    })
}

/// KWAIT_REASON.
pub fn wait_reason(v: u8) -> Option<&'static str> {
    const NAMES: [&str; 40] = [
        "Executive",
        "FreePage",
        "PageIn",
        "PoolAllocation",
        "DelayExecution",
        "Suspended",
        "UserRequest",
        "WrExecutive",
        "WrFreePage",
        "WrPageIn",
        "WrPoolAllocation",
        "WrDelayExecution",
        "WrSuspended",
        "WrUserRequest",
        "WrEventPair",
        "WrQueue",
        "WrLpcReceive",
        "WrLpcReply",
        "WrVirtualMemory",
        "WrPageOut",
        "WrRendezvous",
        "WrKeyedEvent",
        "WrTerminated",
        "WrProcessInSwap",
        "WrCpuRateControl",
        "WrCalloutStack",
        "WrKernel",
        "WrResource",
        "WrPushLock",
        "WrMutex",
        "WrQuantumEnd",
        "WrDispatchInt",
        "WrPreempted",
        "WrYieldExecution",
        "WrFastMutex",
        "WrGuardedMutex",
        "WrRundown",
        "WrAlertByThreadId",
        "WrDeferredPreempt",
        "WrPhysicalFault",
    ];
    NAMES.get(usize::from(v)).copied()
}

/// The decimal text of `v` ("0" to "255"), static: the name shown for an enum value no table
/// names (one per row of millions costs nothing to share).
pub fn decimal(v: u8) -> &'static str {
    /// "0".."255", three bytes a number, left-aligned (the unused bytes are never read).
    static DIGITS: [u8; 768] = {
        let mut t = [0u8; 768];
        let mut v = 0usize;
        while v < 256 {
            let (h, d, u) = ((v / 100) as u8, ((v / 10) % 10) as u8, (v % 10) as u8);
            let at = v * 3;
            if v >= 100 {
                t[at] = b'0' + h;
                t[at + 1] = b'0' + d;
                t[at + 2] = b'0' + u;
            } else if v >= 10 {
                t[at] = b'0' + d;
                t[at + 1] = b'0' + u;
            } else {
                t[at] = b'0' + u;
            }
            v += 1;
        }
        t
    };
    let len = match v {
        100..=255 => 3,
        10..=99 => 2,
        _ => 1,
    };
    let at = usize::from(v) * 3;
    DIGITS
        .get(at..at + len)
        .and_then(|b| std::str::from_utf8(b).ok())
        .unwrap_or("")
}

/// KPROCESSOR_MODE.
pub fn wait_mode(v: u8) -> Option<&'static str> {
    match v {
        0 => Some("KernelMode"),
        1 => Some("UserMode"),
        _ => None,
    }
}

/// The build's MaximumWaitReason: the bias of CCSWAP's OldThreadStateWr (etw-internals.md
/// §4.3), and how it is known. Established from the `_KWAIT_REASON` enums of real kernel PDBs
/// (the built-in table: the layout corpus, and the public PDB-derived headers of 22621/22631,
/// tools/public_layouts) for the builds that have one: 7601 = 37; 9600 and 14393 = 39; 17763,
/// 18362, 19041 and 20348 = 40; 22000 = 41; 22621 and 22631 = 42 (WrMdlCache added). The
/// enum only grows (each of these builds' enums extends the previous one's), so a build
/// between two with the same value has that value too (inferred: 10240-14392 between 9600 and
/// 14393; 17764-20347, i.e. 19042-19045, between 17763 and 20348; 22622-22630). Any other
/// build (before 7601, 9200, 15063-17134, 26100 and later, whose enum no source gives: later
/// headers add WrRcu) is `None`: its value is not known without its own enum.
pub fn maximum_wait_reason(build: u32) -> Option<(u8, MwrSource)> {
    Some(match build {
        7601 => (37, MwrSource::Known),
        9600 | 14393 => (39, MwrSource::Known),
        17763 | 18362 | 19041 | 20348 => (40, MwrSource::Known),
        22000 => (41, MwrSource::Known),
        22621 | 22631 => (42, MwrSource::Known),
        22622..=22630 => (42, MwrSource::Between(22621, 22631)),
        9601..=14392 => (39, MwrSource::Between(9600, 14393)),
        17764..=20347 => (40, MwrSource::Between(17763, 20348)),
        _ => return None,
    })
}

/// How [`maximum_wait_reason`] knows its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MwrSource {
    /// The build's own enum is in the layout corpus.
    Known,
    /// Inferred: the build lies between these two corpus builds, whose enums have the same
    /// MaximumWaitReason.
    Between(u32, u32),
}

#[cfg(test)]
mod tests {
    #[test]
    fn decimal_is_the_number() {
        for v in 0..=255u8 {
            assert_eq!(super::decimal(v), v.to_string());
        }
    }
}

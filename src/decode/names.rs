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

/// KPROCESSOR_MODE.
pub fn wait_mode(v: u8) -> Option<&'static str> {
    match v {
        0 => Some("KernelMode"),
        1 => Some("UserMode"),
        _ => None,
    }
}

/// The build's MaximumWaitReason: the bias of CCSWAP's OldThreadStateWr (etw-internals.md
/// §4.3, from the _KWAIT_REASON enums of real kernel PDBs). `None` before 6.1 (unknown).
pub fn maximum_wait_reason(build: u32) -> Option<u8> {
    Some(match build {
        7600..=9199 => 37,
        9200..=17762 => 39,
        17763..=21999 => 40,
        22000..=22999 => 41,
        _ => return None,
    })
}

//! `_WMI_LOGGER_CONTEXT.GetCpuClock`: what a clean kernel stores there for a session's
//! ClockType.
//!
//! * **Pointer era** (every fixture whose types.h declares `GetCpuClock` as a function pointer:
//!   7601 - 18362, x86-14393): the routine of the clock type. Decompiled `EtwpInitializeTimeStamp`
//!   of several Windows 10 builds (the public pseudocode index etw-internals.md cites as S16:
//!   builds with ClockType at context +0xC8 and +0xD8) stores at +0x28: ClockType 2 ->
//!   `EtwpGetSystemTime`, 3 -> `EtwpGetCycleCount`, 4 -> `EtwpGetHostPerfCounter` (1809+, only if
//!   a hypervisor call succeeds), anything else -> ClockType := 1 and `PpmQueryTime`, whose RVA in
//!   every Windows 10 ISF of shared/isf equals `EtwpGetPerfCounter`'s (one function, two
//!   publics). So 1 -> `EtwpGetPerfCounter` is **confirmed** for those builds; for 7601 / 9600
//!   (no decompiled code; the same routine names exist) it is **inferred**. The forge keeps the
//!   session's ClockType 0 (raw) where a spec asks for it (the standard WdiContextLog) and gives
//!   it the QPC routine, as the kernel's default branch does (the kernel would also rewrite
//!   ClockType to 1: not forged).
//! * **Integer era** (19041, 20348, 22000, 26100: `unsigned long long GetCpuClock`;
//!   x86-19569: `unsigned long`; etw-internals.md §3.1 "an integer in 19569+"): a small index. The decompiled `EtwpInitializeTimeStamp` of a build
//!   with the 19041 layout (GetCpuClock +0x28, ClockType +0xD8) stores 2 -> 0, 3 -> 3, 4 -> 2,
//!   anything else -> 1 (ClockType := 1). **Inferred** (one decompiled build; the 22000 layout,
//!   GetCpuClock at +0x18, has no decompiled code): the forge writes that index. Since the
//!   sessions' ClockTypes vary (the variation draws 0..=3), the values 0, 1 and 3 all occur.

/// What a clean kernel stores in `GetCpuClock` for `clock_type`: the routine's name (pointer
/// era) and the integer-era index.
pub(crate) fn routine_for(clock_type: u32) -> &'static str {
    match clock_type {
        2 => "EtwpGetSystemTime",
        3 => "EtwpGetCycleCount",
        4 => "EtwpGetHostPerfCounter",
        _ => "EtwpGetPerfCounter",
    }
}

/// The integer-era index for `clock_type` (see the module docs).
pub(crate) fn index_for(clock_type: u32) -> u64 {
    match clock_type {
        2 => 0,
        3 => 3,
        4 => 2,
        _ => 1,
    }
}

/// The GetCpuClock of one context: the value and, when it points at a routine, its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CpuClock {
    pub value: u64,
    pub routine: Option<String>,
}

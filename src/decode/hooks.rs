//! Names of documented kernel hook ids (group << 8 | type; `PERFINFO_LOG_TYPE_*` and the MOF
//! classes, from ntwmi.h as published in winsiderss/systeminformer `phnt/include/ntwmi.h`, and
//! learn.microsoft.com's DPC/ISR/PerfInfo classes; triage-etw.md §0). Unknown ids give None.

/// The name of hook `h`, if documented.
pub fn hook_name(h: u16) -> Option<&'static str> {
    Some(match h {
        0x0000 => "TRACE_HEADER",
        // Process (group 0x03).
        0x0301 => "PROCESS_START",
        0x0302 => "PROCESS_END",
        0x0303 => "PROCESS_DC_START",
        0x0304 => "PROCESS_DC_END",
        // Thread (group 0x05).
        0x0501 => "THREAD_START",
        0x0502 => "THREAD_END",
        0x0503 => "THREAD_DC_START",
        0x0504 => "THREAD_DC_END",
        0x0524 => "CONTEXTSWAP (CSwitch)",
        0x0525 => "CONTEXTSWAP_BATCH (CompCS)",
        0x0532 => "READY_THREAD",
        // PERFINFO (group 0x0F).
        0x0F22 => "MARK",
        0x0F24 => "ASYNCMARK",
        0x0F26 => "IMAGENAME",
        0x0F2E => "SAMPLED_PROFILE",
        0x0F2F => "PMC_INTERRUPT",
        0x0F30 => "PMC_CONFIG",
        0x0F32 => "MSI_INTERRUPT",
        0x0F33 => "SYSCALL_ENTER",
        0x0F34 => "SYSCALL_EXIT",
        0x0F35 => "BACKTRACE",
        0x0F36 => "BACKTRACE_USERSTACK",
        0x0F37 => "SAMPLED_PROFILE_CACHE",
        0x0F38 => "EXCEPTION_STACK",
        0x0F39 => "BRANCH_TRACE",
        0x0F3A => "DEBUGGER_ENABLED",
        0x0F3B => "DEBUGGER_EXIT",
        0x0F42 => "THREADED_DPC",
        0x0F43 => "INTERRUPT",
        0x0F44 => "DPC",
        0x0F45 => "TIMERDPC",
        0x0F46 => "IOTIMER_EXPIRATION",
        0x0F47 => "SAMPLED_PROFILE_NMI",
        0x0F48 => "SAMPLED_PROFILE_SET_INTERVAL",
        0x0F49 => "SAMPLED_PROFILE_DC_START",
        0x0F4A => "SAMPLED_PROFILE_DC_END",
        0x0F4B => "SPINLOCK_DC_START",
        0x0F4C => "SPINLOCK_DC_END",
        0x0F4D => "ERESOURCE_DC_START",
        0x0F4E => "ERESOURCE_DC_END",
        0x0F4F => "CLOCK_INTERRUPT",
        0x0F50 => "TIMER_EXPIRATION_START",
        0x0F51 => "TIMER_EXPIRATION",
        0x0F52 => "TIMER_SET_PERIODIC",
        0x0F53 => "TIMER_SET_ONE_SHOT",
        0x0F54 => "TIMER_SET_THREAD",
        0x0F55 => "TIMER_CANCEL",
        0x0F56 => "TIME_ADJUSTMENT",
        0x0F57 => "CLOCK_MODE_SWITCH",
        0x0F58 => "CLOCK_TIME_UPDATE",
        0x0F59 => "CLOCK_DYNAMIC_TICK_VETO",
        0x0F5A => "CLOCK_CONFIGURATION",
        0x0F5B => "IPI",
        0x0F5C => "UNEXPECTED_INTERRUPT",
        0x0F5D => "IOTIMER_START",
        0x0F5E => "IOTIMER_STOP",
        0x0F5F => "PASSIVE_INTERRUPT",
        0x0F60 => "WDF_INTERRUPT",
        0x0F61 => "WDF_PASSIVE_INTERRUPT",
        0x0F62 => "WDF_DPC",
        0x0F63 => "CPU_CACHE_FLUSH",
        0x0F64 => "DPC_ENQUEUE",
        0x0F65 => "DPC_EXECUTION",
        0x0F66 => "INTERRUPT_STEERING",
        _ => return None,
    })
}

/// Hooks whose payload starts with `{ULONGLONG InitialTime; PVOID Routine; ...}`:
/// PERFINFO_INTERRUPT_INFORMATION (ServiceRoutine) and PERFINFO_DPC_INFORMATION (DpcRoutine)
/// (ntwmi.h; triage-etw.md §2.1 \[H3\]).
pub fn has_routine(h: u16) -> bool {
    matches!(
        h,
        0x0F32
            | 0x0F42
            | 0x0F43
            | 0x0F44
            | 0x0F45
            | 0x0F5C
            | 0x0F5F
            | 0x0F60
            | 0x0F61
            | 0x0F62
            | 0x0F66
    )
}

//! Which provider each kernel registration handle (`Etw*ProvRegHandle`, `Etw*RegHandle`) names,
//! and the public GUIDs of the providers the forge registers. Nothing here comes from etwdump.
//!
//! Sources (cited per row below):
//!
//! * **[A]** `redplait/armpatched`, `ldr/krnl_etw.cpp` (`ntoskrnl_hack::init_etw`): the GUID
//!   that `EtwpInitialize` passes to `EtwRegister` together with each handle (found by
//!   disassembling the kernel's calls): EtwpEventTracingProvRegHandle, EtwKernelProvRegHandle,
//!   EtwpPsProvRegHandle, EtwpNetProvRegHandle, EtwpDiskProvRegHandle, EtwpFileProvRegHandle,
//!   EtwpMemoryProvRegHandle, EtwAppCompatProvRegHandle, EtwApiCallsProvRegHandle,
//!   EtwCVEAuditProvRegHandle, EtwThreatIntProvRegHandle, EtwLpacProvRegHandle,
//!   EtwAdminlessProvRegHandle, EtwSecurityMitigationsRegHandle.
//! * **[F]** fluxsec.red, "Full spectrum Event Tracing for Windows detection in the kernel
//!   against rootkits" (https://fluxsec.red/full-spectrum-event-tracing-for-windows-detection-in-the-kernel-against-rootkits):
//!   the handle -> GUID table read in WinDbg on Windows 11 24H2; the same GUIDs as [A] for the
//!   names both list, plus EtwCpuStarvationProvRegHandle = 7F54CA8A-6C72-5CBC-B96F-D0EF905B8BCE.
//! * **[M]** `repnz/etw-providers-docs` (provider manifests dumped from Windows 7 7600 and
//!   Windows 10 10240 / 17134 / 18990, `Manifests-*/<provider>.xml`): the provider name of each
//!   GUID (`<provider name=... guid=...>`), and the GUIDs of the user-mode providers below.
//! * **[N]** the handle's name: the Windows 7 kernel's names lack the `p` of the later ones
//!   (EtwPsProvRegHandle vs EtwpPsProvRegHandle, ...). No public source above lists the 7601
//!   names, so they are mapped to the provider of the same-named later handle: **inferred**.
//!
//! Handles of a fixture not listed here would be left out (NULL, no provider) rather than
//! given a guessed GUID; every handle name of the current fixtures' sources is listed.

/// A provider the forge can register: its manifest name and GUID (canonical text form).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnownProvider {
    pub name: &'static str,
    pub guid: &'static str,
}

pub const KERNEL_GENERAL: KnownProvider = KnownProvider {
    name: "Microsoft-Windows-Kernel-General",
    guid: "A68CA8B7-004F-D7B6-A698-07E2DE0F1F5D",
};
pub const KERNEL_PROCESS: KnownProvider = KnownProvider {
    name: "Microsoft-Windows-Kernel-Process",
    guid: "22FB2CD6-0E7B-422B-A0C7-2FAD1FD0E716",
};
pub const KERNEL_NETWORK: KnownProvider = KnownProvider {
    name: "Microsoft-Windows-Kernel-Network",
    guid: "7DD42A49-5329-4832-8DFD-43D979153A88",
};
pub const KERNEL_DISK: KnownProvider = KnownProvider {
    name: "Microsoft-Windows-Kernel-Disk",
    guid: "C7BDE69A-E1E0-4177-B6EF-283AD1525271",
};
pub const KERNEL_FILE: KnownProvider = KnownProvider {
    name: "Microsoft-Windows-Kernel-File",
    guid: "EDD08927-9CC4-4E65-B970-C2560FB5C289",
};
pub const KERNEL_MEMORY: KnownProvider = KnownProvider {
    name: "Microsoft-Windows-Kernel-Memory",
    guid: "D1D93EF7-E1F2-4F45-9943-03D245FE6C00",
};
pub const KERNEL_EVENT_TRACING: KnownProvider = KnownProvider {
    name: "Microsoft-Windows-Kernel-EventTracing",
    guid: "B675EC37-BDB6-4648-BC92-F3FDC74D3CA2",
};
pub const KERNEL_APP_COMPAT: KnownProvider = KnownProvider {
    name: "Microsoft-Windows-Kernel-AppCompat",
    guid: "16A1ADC1-9B7F-4CD9-94B3-D8296AB1B130",
};
pub const KERNEL_AUDIT_API_CALLS: KnownProvider = KnownProvider {
    name: "Microsoft-Windows-Kernel-Audit-API-Calls",
    guid: "E02A841C-75A3-4FA7-AFC8-AE09CF9B7F23",
};
pub const AUDIT_CVE: KnownProvider = KnownProvider {
    name: "Microsoft-Windows-Audit-CVE",
    guid: "85A62A0D-7E17-485F-9D4F-749A287193A6",
};
pub const THREAT_INTELLIGENCE: KnownProvider = KnownProvider {
    name: "Microsoft-Windows-Threat-Intelligence",
    guid: "F4E1897C-BB5D-5668-F1D8-040F4D8DD344",
};
pub const SECURITY_LPAC: KnownProvider = KnownProvider {
    name: "Microsoft-Windows-Security-LessPrivilegedAppContainer",
    guid: "45EEC9E5-4A1B-5446-7AD8-A4AB1313C437",
};
pub const SECURITY_ADMINLESS: KnownProvider = KnownProvider {
    name: "Microsoft-Windows-Security-Adminless",
    guid: "EA216962-877B-5B73-F7C5-8AEF5375959E",
};
pub const SECURITY_MITIGATIONS: KnownProvider = KnownProvider {
    name: "Microsoft-Windows-Security-Mitigations",
    guid: "FAE10392-F0AF-4AC0-B8FF-9F4D920C3CDF",
};
/// The name from `jdu2600/Windows10EtwEvents` (`manifest/Microsoft-Windows-Kernel-CPU-Starvation.tsv`,
/// which has no GUID); the GUID from [F] only.
pub const KERNEL_CPU_STARVATION: KnownProvider = KnownProvider {
    name: "Microsoft-Windows-Kernel-CPU-Starvation",
    guid: "7F54CA8A-6C72-5CBC-B96F-D0EF905B8BCE",
};

/// Handle name -> provider. Sources: [A] (and [F]) for the Windows 8.1+ names, [F] for
/// CpuStarvation, [N] (inferred) for the Windows 7 names; provider names and GUIDs [M].
pub const KERNEL_HANDLES: &[(&str, KnownProvider)] = &[
    // [A] [F]
    ("EtwKernelProvRegHandle", KERNEL_GENERAL),
    ("EtwpPsProvRegHandle", KERNEL_PROCESS),
    ("EtwpNetProvRegHandle", KERNEL_NETWORK),
    ("EtwpDiskProvRegHandle", KERNEL_DISK),
    ("EtwpFileProvRegHandle", KERNEL_FILE),
    ("EtwpMemoryProvRegHandle", KERNEL_MEMORY),
    ("EtwpEventTracingProvRegHandle", KERNEL_EVENT_TRACING),
    ("EtwAppCompatProvRegHandle", KERNEL_APP_COMPAT),
    ("EtwApiCallsProvRegHandle", KERNEL_AUDIT_API_CALLS),
    ("EtwCVEAuditProvRegHandle", AUDIT_CVE),
    ("EtwThreatIntProvRegHandle", THREAT_INTELLIGENCE),
    ("EtwLpacProvRegHandle", SECURITY_LPAC),
    ("EtwAdminlessProvRegHandle", SECURITY_ADMINLESS),
    ("EtwSecurityMitigationsRegHandle", SECURITY_MITIGATIONS),
    // [F]
    ("EtwCpuStarvationProvRegHandle", KERNEL_CPU_STARVATION),
    // [N] Windows 7 names (inferred from the later names)
    ("EtwPsProvRegHandle", KERNEL_PROCESS),
    ("EtwNetProvRegHandle", KERNEL_NETWORK),
    ("EtwDiskProvRegHandle", KERNEL_DISK),
    ("EtwFileProvRegHandle", KERNEL_FILE),
    ("EtwMemoryProvRegHandle", KERNEL_MEMORY),
    ("EtwEventTracingProvRegHandle", KERNEL_EVENT_TRACING),
];

/// The provider a handle names, if a public source says it.
pub fn provider_of_handle(handle: &str) -> Option<KnownProvider> {
    KERNEL_HANDLES
        .iter()
        .find(|(h, _)| *h == handle)
        .map(|(_, p)| *p)
}

// ---- user-mode providers of the standard and varied sets, all from [M] (Manifests-Win7-7600)

pub const EVENTLOG: KnownProvider = KnownProvider {
    name: "Microsoft-Windows-Eventlog",
    guid: "FC65DDD8-D6EF-4962-83D5-6E5CFE9CE148",
};
pub const RPC: KnownProvider = KnownProvider {
    name: "Microsoft-Windows-RPC",
    guid: "6AD52B32-D609-4BE9-AE07-CE8DAE937E39",
};
pub const SHELL_CORE: KnownProvider = KnownProvider {
    name: "Microsoft-Windows-Shell-Core",
    guid: "30336ED4-E327-447C-9DE0-51B652C86108",
};
pub const DNS_CLIENT: KnownProvider = KnownProvider {
    name: "Microsoft-Windows-DNS-Client",
    guid: "1C95126E-7EEA-49A9-A3FE-A378B03DDB4D",
};
pub const POWERSHELL: KnownProvider = KnownProvider {
    name: "Microsoft-Windows-PowerShell",
    guid: "A0C1853B-5C40-4B15-8766-3CF1C58F985A",
};
pub const WINLOGON: KnownProvider = KnownProvider {
    name: "Microsoft-Windows-Winlogon",
    guid: "DBE9B383-7CF3-4331-91CC-A3CB16A3B538",
};
/// User-mode providers the variation draws from.
pub const USER_PROVIDERS: &[KnownProvider] =
    &[EVENTLOG, RPC, SHELL_CORE, DNS_CLIENT, POWERSHELL, WINLOGON];

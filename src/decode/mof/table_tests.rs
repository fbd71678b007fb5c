//! Every class of the tables against a layout restated here from its sources (field names and
//! wire types in order, the hooks and the version), on hand-built payloads of both pointer
//! widths and both header families: every field's value, a payload one byte short, three bytes
//! too many, and random bytes of every length.

use super::*;
use crate::etl::records::{align8, walk_from};

/// Each class: name, version, the hooks that use it, its fields in wire order as
/// `Name:type` (a `+` before the name: a field newer builds append). Types: u8 u16 u32 u64
/// i16 i64 hex32 ptr sizet port ipv4 ipv6 sid z8 z16 and wN (N UTF-16 units).
#[rustfmt::skip]
const SPECS: &[(&str, u8, &[u16], &str)] = &[
    // Header group (MOF Header_Extension_TypeGroup, RDComplete).
    ("Header_Extension_TypeGroup", 2, &[0x0005, 0x0020],
     "GroupMask1:u32 GroupMask2:u32 GroupMask3:u32 GroupMask4:u32 GroupMask5:u32 \
      GroupMask6:u32 GroupMask7:u32 GroupMask8:u32 KernelEventVersion:u32"),
    ("RDComplete", 2, &[0x0008],
     ""),
    // DiskIo.
    ("DiskIo_V2_TypeGroup1", 2, &[0x010A, 0x010B],
     "DiskNumber:u32 IrpFlags:u32 TransferSize:u32 Reserved:u32 ByteOffset:u64 FileObject:ptr \
      Irp:ptr HighResResponseTime:u64"),
    ("DiskIo_TypeGroup1", 3, &[0x010A, 0x010B, 0x0137, 0x0138],
     "DiskNumber:u32 IrpFlags:u32 TransferSize:u32 Reserved:u32 ByteOffset:u64 FileObject:ptr \
      Irp:ptr HighResResponseTime:u64 IssuingThreadId:u32"),
    ("DiskIo_V2_TypeGroup2", 2, &[0x010C, 0x010D, 0x010F],
     "Irp:ptr"),
    ("DiskIo_TypeGroup2", 3, &[0x010C, 0x010D, 0x010F, 0x013A, 0x013B, 0x013C],
     "Irp:ptr IssuingThreadId:u32"),
    ("DiskIo_V2_TypeGroup3", 2, &[0x010E],
     "DiskNumber:u32 IrpFlags:u32 HighResResponseTime:u64 Irp:ptr"),
    ("DiskIo_TypeGroup3", 3, &[0x010E, 0x0139],
     "DiskNumber:u32 IrpFlags:u32 HighResResponseTime:u64 Irp:ptr IssuingThreadId:u32"),
    ("DriverMajorFunctionCall", 2, &[0x0122],
     "MajorFunction:u32 MinorFunction:u32 RoutineAddr:ptr FileObject:ptr Irp:ptr \
      UniqMatchId:u32"),
    ("DriverMajorFunctionReturn", 2, &[0x0123],
     "Irp:ptr UniqMatchId:u32"),
    ("DriverCompleteRequestReturn", 2, &[0x0135],
     "Irp:ptr UniqMatchId:u32"),
    ("DriverCompletionRoutine", 2, &[0x0125],
     "Routine:ptr IrpPtr:ptr UniqMatchId:u32"),
    ("DriverCompleteRequest", 2, &[0x0134],
     "RoutineAddr:ptr Irp:ptr UniqMatchId:u32"),
    // PageFault.
    ("PageFault_TypeGroup1", 2, &[0x020A, 0x020B, 0x020C, 0x020D, 0x020E, 0x020F],
     "VirtualAddress:ptr ProgramCounter:ptr"),
    ("PageFault_HardFault", 2, &[0x0220],
     "InitialTime:u64 ReadOffset:u64 VirtualAddress:ptr FileObject:ptr TThreadId:u32 \
      ByteCount:u32"),
    ("PageFault_VirtualAlloc", 2, &[0x0262, 0x0263],
     "BaseAddress:ptr RegionSize:sizet ProcessId:u32 Flags:u32"),
    ("PageFault_ImageLoadBacked", 2, &[0x0269],
     "FileObject:ptr DeviceChar:u32 FileChar:u16 LoadFlags:u16"),
    // Process.
    ("Process_V2_TypeGroup1", 2, &[0x0301, 0x0302, 0x0303, 0x0304, 0x0327],
     "UniqueProcessKey:ptr ProcessId:u32 ParentId:u32 SessionId:u32 ExitStatus:i32 UserSID:sid \
      ImageFileName:z8 CommandLine:z16"),
    ("Process_V3_TypeGroup1", 3, &[0x0301, 0x0302, 0x0303, 0x0304, 0x0327],
     "UniqueProcessKey:ptr ProcessId:u32 ParentId:u32 SessionId:u32 ExitStatus:i32 \
      DirectoryTableBase:ptr UserSID:sid ImageFileName:z8 CommandLine:z16"),
    ("Process_V4_TypeGroup1", 4, &[0x0301, 0x0302, 0x0303, 0x0304, 0x0327],
     "UniqueProcessKey:ptr ProcessId:u32 ParentId:u32 SessionId:u32 ExitStatus:i32 \
      DirectoryTableBase:ptr Flags:u32 UserSID:sid ImageFileName:z8 CommandLine:z16 \
      PackageFullName:z16 ApplicationId:z16"),
    ("Process_Defunct_TypeGroup1", 5, &[0x0327],
     "UniqueProcessKey:ptr ProcessId:u32 ParentId:u32 SessionId:u32 ExitStatus:i32 \
      DirectoryTableBase:ptr Flags:u32 UserSID:sid ImageFileName:z8 CommandLine:z16 \
      PackageFullName:z16 ApplicationId:z16 ExitTime:u64"),
    ("Process_Terminate_TypeGroup1", 2, &[0x030B],
     "ProcessId:u32"),
    ("Image_Load", 3, &[0x030A, 0x140A, 0x1402, 0x1403, 0x1404],
     "ImageBase:ptr ImageSize:ptr ProcessId:u32 ImageCheckSum:u32 TimeDateStamp:u32 \
      SignatureLevel:u8 SignatureType:u8 Reserved0:u16 DefaultBase:ptr Reserved1:u32 \
      Reserved2:u32 Reserved3:u32 Reserved4:u32 FileName:z16"),
    ("Process_V2_TypeGroup2", 2, &[0x0320, 0x0321],
     "ProcessId:u32 PageFaultCount:u32 HandleCount:u32 Reserved:u32 PeakVirtualSize:sizet \
      PeakWorkingSetSize:sizet PeakPagefileUsage:sizet QuotaPeakPagedPoolUsage:sizet \
      QuotaPeakNonPagedPoolUsage:sizet VirtualSize:sizet WorkingSetSize:sizet \
      PagefileUsage:sizet QuotaPagedPoolUsage:sizet QuotaNonPagedPoolUsage:sizet \
      PrivatePageCount:sizet"),
    // FileIo.
    ("FileIo_V2_Name", 2, &[0x0400, 0x0420, 0x0423, 0x0424],
     "FileObject:ptr FileName:z16"),
    ("FileIo_Name", 3, &[0x0400, 0x0420, 0x0423, 0x0424],
     "FileObject:ptr FileName:z16"),
    ("FileIo_V2_Create", 2, &[0x0440],
     "IrpPtr:ptr TTID:sizet FileObject:ptr CreateOptions:u32 FileAttributes:u32 \
      ShareAccess:u32 OpenPath:z16"),
    ("FileIo_Create", 3, &[0x0440],
     "IrpPtr:ptr FileObject:ptr TTID:u32 CreateOptions:u32 FileAttributes:u32 ShareAccess:u32 \
      OpenPath:z16"),
    ("FileIo_V2_SimpleOp", 2, &[0x0441, 0x0442, 0x0449],
     "IrpPtr:ptr TTID:sizet FileObject:ptr FileKey:ptr"),
    ("FileIo_SimpleOp", 3, &[0x0441, 0x0442, 0x0449],
     "IrpPtr:ptr FileObject:ptr FileKey:ptr TTID:u32"),
    ("FileIo_V2_ReadWrite", 2, &[0x0443, 0x0444],
     "Offset:u64 IrpPtr:ptr TTID:sizet FileObject:ptr FileKey:ptr IoSize:u32 IoFlags:u32"),
    ("FileIo_ReadWrite", 3, &[0x0443, 0x0444],
     "Offset:u64 IrpPtr:ptr FileObject:ptr FileKey:ptr TTID:u32 IoSize:u32 IoFlags:u32 \
      +ExtraFlags:u32"),
    ("FileIo_V2_Info", 2, &[0x0445, 0x0446, 0x0447, 0x044A, 0x044B],
     "IrpPtr:ptr TTID:sizet FileObject:ptr FileKey:ptr ExtraInfo:ptr InfoClass:u32"),
    ("FileIo_Info", 3, &[0x0445, 0x0446, 0x0447, 0x044A, 0x044B],
     "IrpPtr:ptr FileObject:ptr FileKey:ptr ExtraInfo:ptr TTID:u32 InfoClass:u32"),
    ("FileIo_V2_DirEnum", 2, &[0x0448, 0x044D],
     "IrpPtr:ptr TTID:sizet FileObject:ptr FileKey:ptr Length:u32 InfoClass:u32 FileIndex:u32 \
      FileName:z16"),
    ("FileIo_DirEnum", 3, &[0x0448, 0x044D],
     "IrpPtr:ptr FileObject:ptr FileKey:ptr TTID:u32 Length:u32 InfoClass:u32 FileIndex:u32 \
      FileName:z16"),
    ("FileIo_V2_OpEnd", 2, &[0x044C],
     "IrpPtr:ptr ExtraInfo:ptr NtStatus:hex32"),
    ("FileIo_OpEnd", 3, &[0x044C],
     "IrpPtr:ptr ExtraInfo:ptr NtStatus:hex32"),
    ("FileIo_PathOperation", 3, &[0x044F, 0x0450, 0x0451],
     "IrpPtr:ptr FileObject:ptr FileKey:ptr ExtraInfo:ptr TTID:u32 InfoClass:u32 FileName:z16"),
    ("FileIo_V2_MapFile", 2, &[0x0425, 0x0426, 0x0427, 0x0428],
     "ViewBase:ptr FileObject:ptr MiscInfo:u64 ViewSize:sizet ProcessId:u32"),
    // Thread.
    ("Thread_V2_TypeGroup1", 2, &[0x0501, 0x0502, 0x0503, 0x0504],
     "ProcessId:u32 TThreadId:u32 StackBase:ptr StackLimit:ptr UserStackBase:ptr \
      UserStackLimit:ptr StartAddr:ptr Win32StartAddr:ptr TebBase:ptr SubProcessTag:u32"),
    ("Thread_V3_TypeGroup1", 3, &[0x0501, 0x0502, 0x0503, 0x0504],
     "ProcessId:u32 TThreadId:u32 StackBase:ptr StackLimit:ptr UserStackBase:ptr \
      UserStackLimit:ptr Affinity:ptr Win32StartAddr:ptr TebBase:ptr SubProcessTag:u32 \
      BasePriority:u8 PagePriority:u8 IoPriority:u8 ThreadFlags:u8 +ThreadName:z16"),
    // TcpIp, UdpIp.
    ("TcpIp_SendIPV4", 2, &[0x060A],
     "PID:u32 size:u32 daddr:ipv4 saddr:ipv4 dport:port sport:port startime:u32 endtime:u32 \
      seqnum:u32 connid:ptr"),
    ("TcpIp_TypeGroup1", 2, &[0x060B, 0x060D, 0x060E, 0x0610, 0x0612],
     "PID:u32 size:u32 daddr:ipv4 saddr:ipv4 dport:port sport:port seqnum:u32 connid:ptr"),
    ("TcpIp_TypeGroup2", 2, &[0x060C, 0x060F],
     "PID:u32 size:u32 daddr:ipv4 saddr:ipv4 dport:port sport:port mss:u16 sackopt:u16 \
      tsopt:u16 wsopt:u16 rcvwin:u32 rcvwinscale:i16 sndwinscale:i16 seqnum:u32 connid:ptr"),
    ("TcpIp_Fail", 2, &[0x0611],
     "Proto:u16 FailureCode:u16"),
    ("TcpIp_SendIPV6", 2, &[0x061A],
     "PID:u32 size:u32 daddr:ipv6 saddr:ipv6 dport:port sport:port startime:u32 endtime:u32 \
      seqnum:u32 connid:ptr"),
    ("TcpIp_TypeGroup3", 2, &[0x061B, 0x061D, 0x061E, 0x0620, 0x0622],
     "PID:u32 size:u32 daddr:ipv6 saddr:ipv6 dport:port sport:port seqnum:u32 connid:ptr"),
    ("TcpIp_TypeGroup4", 2, &[0x061C, 0x061F],
     "PID:u32 size:u32 daddr:ipv6 saddr:ipv6 dport:port sport:port mss:u16 sackopt:u16 \
      tsopt:u16 wsopt:u16 rcvwin:u32 rcvwinscale:i16 sndwinscale:i16 seqnum:u32 connid:ptr"),
    ("UdpIp_TypeGroup1", 2, &[0x080A, 0x080B],
     "PID:u32 size:u32 daddr:ipv4 saddr:ipv4 dport:port sport:port seqnum:u32 connid:ptr"),
    ("UdpIp_Fail", 2, &[0x0811],
     "Proto:u16 FailureCode:u16"),
    ("UdpIp_TypeGroup2", 2, &[0x081A, 0x081B],
     "PID:u32 size:u32 daddr:ipv6 saddr:ipv6 dport:port sport:port seqnum:u32 connid:ptr"),
    // Registry.
    ("Registry_TypeGroup1", 2,
     &[0x090A, 0x090B, 0x090C, 0x090D, 0x090E, 0x090F, 0x0910, 0x0911, 0x0912, 0x0913, 0x0914,
      0x0915, 0x0916, 0x0917, 0x0918, 0x0919, 0x091A, 0x091B, 0x091C, 0x091D],
     "InitialTime:i64 Status:hex32 Index:u32 KeyHandle:ptr KeyName:z16"),
    // SystemConfig.
    ("SystemConfig_V2_CPU", 2, &[0x0B0A],
     "MHz:u32 NumberOfProcessors:u32 MemSize:u32 PageSize:u32 AllocationGranularity:u32 \
      ComputerName:w256 DomainName:w134 HyperThreadingFlag:sizet"),
    ("SystemConfig_V2_PhyDisk", 2, &[0x0B0B],
     "DiskNumber:u32 BytesPerSector:u32 SectorsPerTrack:u32 TracksPerCylinder:u32 \
      Cylinders:u64 SCSIPort:u32 SCSIPath:u32 SCSITarget:u32 SCSILun:u32 Manufacturer:w256 \
      PartitionCount:u32 WriteCacheEnabled:u8 Pad:u8 BootDriveLetter:w3 Spare:w2"),
    ("SystemConfig_V2_LogDisk", 2, &[0x0B0C],
     "StartOffset:u64 PartitionSize:u64 DiskNumber:u32 Size:u32 DriveType:u32 \
      DriveLetterString:w4 Pad1:u32 PartitionNumber:u32 SectorsPerCluster:u32 \
      BytesPerSector:u32 Pad2:u32 NumberOfFreeClusters:i64 TotalNumberOfClusters:i64 \
      FileSystem:w16 VolumeExt:u32 Pad3:u32"),
    ("SystemConfig_V2_NIC", 2, &[0x0B0D],
     "PhysicalAddr:u64 PhysicalAddrLen:u32 Ipv4Index:u32 Ipv6Index:u32 NICDescription:z16 \
      IpAddresses:z16 DnsServerAddresses:z16"),
    ("SystemConfig_V2_Video", 2, &[0x0B0E],
     "MemorySize:u32 XResolution:u32 YResolution:u32 BitsPerPixel:u32 VRefresh:u32 \
      ChipType:w256 DACType:w256 AdapterString:w256 BiosString:w256 DeviceId:w256 \
      StateFlags:u32"),
    ("SystemConfig_V2_Services", 2, &[0x0B0F],
     "ProcessId:u32 ServiceState:u32 SubProcessTag:u32 ServiceName:z16 DisplayName:z16 \
      ProcessName:z16"),
    ("SystemConfig_V3_Services", 3, &[0x0B0F],
     "ProcessId:u32 ServiceState:u32 SubProcessTag:u32 ServiceName:z16 DisplayName:z16 \
      ProcessName:z16 LoadOrderGroup:z16 SvchostGroup:z16"),
    ("SystemConfig_V2_Power", 2, &[0x0B10],
     "S1:u8 S2:u8 S3:u8 S4:u8 S5:u8 Pad1:u8 Pad2:u8 Pad3:u8"),
    ("SystemConfig_V2_Network", 2, &[0x0B11],
     "TcbTablePartitions:u32 MaxHashTableSize:u32 MaxUserPort:u32 TcpTimedWaitDelay:u32"),
    ("SystemConfig_V2_IRQ", 2, &[0x0B15],
     "IRQAffinity:u64 IRQNum:u32 DeviceDescriptionLen:u32 DeviceDescription:z16"),
    ("SystemConfig_V3_IRQ", 3, &[0x0B15],
     "IRQAffinity:u64 IRQGroup:u16 Reserved:u16 IRQNum:u32 DeviceDescriptionLen:u32 \
      DeviceDescription:z16"),
    ("SystemConfig_V2_PnP", 2, &[0x0B16],
     "IDLength:u32 DescriptionLength:u32 FriendlyNameLength:u32 DeviceID:z16 \
      DeviceDescription:z16 FriendlyName:z16"),
    ("SystemConfig_V3_PnP", 3, &[0x0B16],
     "IDLength:u32 DescriptionLength:u32 FriendlyNameLength:u32 DeviceID:z16 \
      DeviceDescription:z16 FriendlyName:z16 PdoName:z16"),
    ("SystemConfig_V2_IDEChannel", 2, &[0x0B17],
     "TargetId:u32 DeviceType:u32 DeviceTimingMode:u32 LocationInformationLen:u32 \
      LocationInformation:z16"),
    ("SystemConfig_V2_DPI", 2, &[0x0B1C],
     "MachineDPI:u32 UserDPI:u32"),
    // PerfInfo.
    ("SampledProfile", 2, &[0x0F2E],
     "InstructionPointer:ptr ThreadId:u32 Count:u16 Flags:u8 Rank:u8"),
    ("PmcCounterProfile", 2, &[0x0F2F],
     "InstructionPointer:ptr ThreadId:u32 ProfileSource:u16 Reserved:u16"),
    ("SampledProfileInterval_V2", 2, &[0x0F48, 0x0F49, 0x0F4A],
     "Source:u32 NewInterval:u32 OldInterval:u32"),
    ("SampledProfileInterval_V3", 3, &[0x0F49, 0x0F4A],
     "Source:u32 NewInterval:u32 OldInterval:u32 SourceName:z16"),
    ("SysCallEnter", 2, &[0x0F33],
     "SysCallAddress:ptr"),
    ("SysCallExit", 2, &[0x0F34],
     "SysCallNtStatus:hex32"),
    ("ISR", 2, &[0x0F43, 0x0F5F],
     "InitialTime:u64 Routine:ptr ReturnValue:u8 Vector:u16 Reserved:u8"),
    ("ISR_MSI", 2, &[0x0F32],
     "InitialTime:u64 Routine:ptr ReturnValue:u8 Vector:u16 Reserved:u8 MessageNumber:u32"),
    ("DPC", 2, &[0x0F42, 0x0F44, 0x0F45, 0x0F46],
     "InitialTime:u64 Routine:ptr"),
    ("DebuggerEnabled", 2, &[0x0F3A],
     ""),
    // Image.
    ("Image_Load_V2", 2, &[0x140A, 0x1402, 0x1403, 0x1404],
     "ImageBase:ptr ImageSize:ptr ProcessId:u32 ImageCheckSum:u32 TimeDateStamp:u32 \
      Reserved0:u32 DefaultBase:ptr Reserved1:u32 Reserved2:u32 Reserved3:u32 Reserved4:u32 \
      FileName:z16"),
    ("KernelImageBase", 2, &[0x1421],
     "ImageBase:ptr"),
    ("HypercallPage", 2, &[0x1422],
     "HypercallPageVa:ptr"),
];

/// One field of a spec: its name, type word, and whether it is appended by newer builds.
fn spec_fields(text: &str) -> Vec<(&str, &str, bool)> {
    text.split_whitespace()
        .map(|f| {
            let (name, ty) = f.split_once(':').expect("Name:type");
            match name.strip_prefix('+') {
                Some(n) => (n, ty, true),
                None => (name, ty, false),
            }
        })
        .collect()
}

/// The wire bytes and the decoded value of field number `i` of type `ty` at width `w`:
/// distinct per field, using each type's whole range (64-bit values above 32 bits, pointers
/// in kernel space, signed values negative).
fn sample(ty: &str, i: usize, w: usize) -> (Vec<u8>, Value) {
    let n = i as u64;
    let text = |s: String| Value::Text(Untrusted::from(s));
    let utf16 = |s: &str| {
        s.encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect::<Vec<u8>>()
    };
    match ty {
        "u8" => (vec![0x80 + i as u8], Value::Number(0x80 + n)),
        "u16" => {
            let v = 0x8000 + 0x101 * i as u16;
            (v.to_le_bytes().to_vec(), Value::Number(u64::from(v)))
        }
        "u32" => {
            let v = 0x8000_0000 + 0x0101_0101 * i as u32;
            (v.to_le_bytes().to_vec(), Value::Number(u64::from(v)))
        }
        "u64" => {
            let v = 0x8000_0000_0000_0000 + n;
            (v.to_le_bytes().to_vec(), Value::Number(v))
        }
        "i16" => {
            let v = -2 - i as i16;
            (v.to_le_bytes().to_vec(), Value::Signed(i64::from(v)))
        }
        "i32" => {
            let v = -0x3FFF_FEC6 - i as i32;
            (v.to_le_bytes().to_vec(), Value::Signed(i64::from(v)))
        }
        "i64" => {
            let v = -0x1_0000_0000 - n as i64;
            (v.to_le_bytes().to_vec(), Value::Signed(v))
        }
        "hex32" => {
            let v = 0xC000_0000 + i as u32;
            (v.to_le_bytes().to_vec(), Value::Address(u64::from(v)))
        }
        "ptr" | "sizet" => {
            let v = if w == 8 {
                0xFFFF_F800_0000_0000 + 0x10 * n
            } else {
                0x8000_0000 + 0x10 * n
            };
            let b = v.to_le_bytes()[..w].to_vec();
            let value = if ty == "ptr" {
                Value::Address(v)
            } else {
                Value::Number(v)
            };
            (b, value)
        }
        "port" => {
            let v = 443 + i as u16;
            (v.to_be_bytes().to_vec(), Value::Number(u64::from(v)))
        }
        "ipv4" => (
            vec![192, 168, 1, i as u8],
            Value::Formatted(format!("192.168.1.{i}")),
        ),
        "ipv6" => {
            let mut b = vec![0x20, 0x01, 0x0d, 0xb8];
            b.resize(14, 0);
            b.extend_from_slice(&(i as u16).to_be_bytes());
            (b, Value::Formatted(format!("2001:db8::{i:x}")))
        }
        "sid" => {
            // TOKEN_USER (SID pointer, attributes), then S-1-5-21-1-2-3-1000.
            let mut b = vec![0xEE; 2 * w];
            b.extend_from_slice(&[1, 5, 0, 0, 0, 0, 0, 5]);
            for s in [21u32, 1, 2, 3, 1000] {
                b.extend_from_slice(&s.to_le_bytes());
            }
            (b, text("S-1-5-21-1-2-3-1000".into()))
        }
        "z8" => {
            let s = format!("name{i}.exe");
            let mut b = s.clone().into_bytes();
            b.push(0);
            (b, text(s))
        }
        "z16" => {
            let s = format!("\\Device\\é{i}");
            let mut b = utf16(&s);
            b.extend_from_slice(&[0, 0]);
            (b, text(s))
        }
        _ => {
            let units: usize = ty.strip_prefix('w').and_then(|c| c.parse().ok()).expect(ty);
            let s: String = format!("F{i}").chars().take(units).collect();
            let mut b = utf16(&s);
            b.resize(2 * units, 0);
            (b, text(s))
        }
    }
}

/// The payload of `fields` (with or without the appended ones) and the expected values.
fn payload(
    fields: &[(&str, &str, bool)],
    w: usize,
    tail: bool,
) -> (Vec<u8>, Vec<(Untrusted, Value)>) {
    let mut bytes = Vec::new();
    let mut values = Vec::new();
    for (i, &(name, ty, appended)) in fields.iter().enumerate() {
        if appended && !tail {
            break;
        }
        let (b, v) = sample(ty, i, w);
        bytes.extend_from_slice(&b);
        values.push((Untrusted::from(name), v));
    }
    (bytes, values)
}

/// A record of header family `perfinfo` (else SYSTEM) and width `w` with `payload`, decoded.
fn decode_record(
    hook: u16,
    version: u8,
    w: usize,
    perfinfo: bool,
    payload: &[u8],
) -> Option<Payload> {
    let (kind, header) = match (perfinfo, w) {
        (true, 8) => (0x11u32, 0x10),
        (true, _) => (0x10, 0x10),
        (false, 8) => (0x02, 0x20),
        (false, _) => (0x01, 0x20),
    };
    let size = header + payload.len();
    let mut rec = (0xC000_0000 | kind << 16 | u32::from(version))
        .to_le_bytes()
        .to_vec();
    rec.extend_from_slice(&(size as u16).to_le_bytes());
    rec.extend_from_slice(&hook.to_le_bytes());
    rec.resize(header, 0x5A);
    rec.extend_from_slice(payload);
    rec.resize(align8(size), 0);
    let mut got = None;
    let w = walk_from(&rec, 0, rec.len(), |r| got = decode(&rec, r));
    assert_eq!(w.count, 1, "{hook:#06x} {payload:02x?}");
    got
}

/// Every class of the tables has exactly one spec, and every hook of a spec finds its class.
#[test]
fn every_class_has_a_spec() {
    let mut seen = 0;
    for group in 0..=u8::MAX {
        for c in classes(group) {
            for &t in c.types {
                let hook = u16::from(group) << 8 | u16::from(t);
                let spec = SPECS
                    .iter()
                    .find(|s| s.1 == c.version && s.2.contains(&hook))
                    .unwrap_or_else(|| panic!("no spec for {} {hook:#06x}", c.name));
                assert_eq!(spec.0, c.name, "{hook:#06x} v{}", c.version);
                seen += 1;
            }
        }
    }
    let hooks: usize = SPECS.iter().map(|s| s.2.len()).sum();
    assert_eq!(seen, hooks, "a spec names a hook no class has");
}

/// Each spec on both widths and both header families: every field's value, no problem; one
/// byte short: a problem; three bytes more: a problem naming the last field.
#[test]
fn specs_decode_every_field() {
    for &(name, version, hooks, text) in SPECS {
        let fields = spec_fields(text);
        for &hook in hooks {
            for (w, perfinfo) in [(8, true), (4, false), (8, false), (4, true)] {
                let at = format!("{name} {hook:#06x} v{version} width {w}");
                let (bytes, values) = payload(&fields, w, false);
                let p = decode_record(hook, version, w, perfinfo, &bytes).expect(&at);
                assert_eq!(
                    (p.class, &p.fields, p.problem.as_deref()),
                    (name, &values, None),
                    "{at}"
                );
                // With the appended fields.
                let (full, all) = payload(&fields, w, true);
                let p = decode_record(hook, version, w, perfinfo, &full).expect(&at);
                assert_eq!((&p.fields, p.problem.as_deref()), (&all, None), "{at}");
                // Three bytes too many.
                let mut long = full.clone();
                long.extend_from_slice(&[0xA5; 3]);
                let p = decode_record(hook, version, w, perfinfo, &long).expect(&at);
                let last = fields.last().map_or("", |f| f.0);
                let want = format!("3 bytes after the last field ({last})");
                let want = if fields.is_empty() {
                    "3 bytes where the class has no fields".to_string()
                } else {
                    want
                };
                assert_eq!(p.problem.as_deref(), Some(want.as_str()), "{at}");
                assert_eq!(p.fields, all, "{at}");
                // One byte short.
                if let Some(cut) = bytes.len().checked_sub(1) {
                    let p = decode_record(hook, version, w, perfinfo, &bytes[..cut]).expect(&at);
                    assert!(p.problem.is_some(), "{at}: {p:?}");
                    assert!(p.fields.len() < values.len(), "{at}");
                    assert_eq!(p.fields[..], values[..p.fields.len()], "{at}");
                }
            }
        }
    }
}

/// Another version of a decoded hook, or a hook of a group without tables: not decoded.
#[test]
fn unknown_versions_and_hooks_are_not_decoded() {
    for (hook, version) in [
        (0x0F44, 1),
        (0x0F44, 3),
        (0x010A, 4),
        (0x0301, 6),
        (0x1D00, 2),
    ] {
        assert_eq!(
            decode_record(hook, version, 8, true, &[0; 16]),
            None,
            "{hook:#06x}"
        );
    }
}

/// Random bytes of every length under every decoded hook: never a panic, never a value past
/// the payload; a payload without problem is exactly consumed (the fixed fields all there).
#[test]
fn random_payloads_are_bounded() {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for &(name, version, hooks, text) in SPECS {
        let fixed = spec_fields(text).iter().filter(|f| !f.2).count();
        for len in 0..96 {
            let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            for (w, perfinfo) in [(8, true), (4, false)] {
                let p = decode_record(hooks[0], version, w, perfinfo, &bytes).expect(name);
                if p.problem.is_none() {
                    assert!(p.fields.len() >= fixed, "{name} {len}");
                }
            }
        }
    }
}

/// Bytes from hex digits.
fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The named values of `p` as (name, Display) pairs, for compact comparisons.
fn shown(p: &Payload) -> Vec<(String, String)> {
    p.fields
        .iter()
        .map(|(k, v)| (k.raw().to_string(), v.to_string()))
        .collect()
}

/// Payloads as Windows writes them: DPC, ISR and MSI payloads copied byte for byte from the
/// real triage dumps of shared/data (the x64 dump's first TIMERDPC and MSI_INTERRUPT records,
/// the arm64 dump's first INTERRUPT), and TCP, UDP, system-call and registry payloads built by
/// hand with realistic values.
#[test]
fn real_and_realistic_payloads() {
    let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    // triage_x64.dmp, TIMERDPC: nt's timer DPC routine.
    let p = decode_record(0x0F45, 2, 8, true, &hex("4816b3770d00000040ecf67b04f8ffff")).unwrap();
    assert_eq!((p.class, p.problem.as_deref()), ("DPC", None));
    assert_eq!(
        shown(&p),
        pairs(&[
            ("InitialTime", "57842800200"),
            ("Routine", "0xfffff8047bf6ec40")
        ])
    );
    // triage_arm64.dmp, INTERRUPT: Vector is the 16-bit 0x0a07 (MOF 10.0.16299, ntwmi.h).
    let isr = "68d310e737000000602ea5f503f8ffff01070a00";
    let p = decode_record(0x0F43, 2, 8, true, &hex(isr)).unwrap();
    assert_eq!((p.class, p.problem.as_deref()), ("ISR", None));
    assert_eq!(
        shown(&p),
        pairs(&[
            ("InitialTime", "240099840872"),
            ("Routine", "0xfffff803f5a52e60"),
            ("ReturnValue", "1"),
            ("Vector", "2567"),
            ("Reserved", "0"),
        ])
    );
    // triage_x64.dmp, MSI_INTERRUPT: storport's ISR, vector 0x60, message 0.
    let msi = "8491e0740d00000070df147a04f8ffff0160000000000000";
    let p = decode_record(0x0F32, 2, 8, true, &hex(msi)).unwrap();
    assert_eq!((p.class, p.problem.as_deref()), ("ISR_MSI", None));
    assert_eq!(p.number("Vector"), Some(0x60));
    assert_eq!(p.number("MessageNumber"), Some(0));
    assert_eq!(p.get("Routine"), Some(&Value::Address(0xfffff8047a14df70)));
    // A TCP receive on 64-bit: 1460 bytes from 93.184.216.34:443 to 10.0.0.5:49712.
    let mut tcp = Vec::new();
    tcp.extend_from_slice(&4242u32.to_le_bytes());
    tcp.extend_from_slice(&1460u32.to_le_bytes());
    tcp.extend_from_slice(&[10, 0, 0, 5, 93, 184, 216, 34]);
    tcp.extend_from_slice(&[0xC2, 0x30, 0x01, 0xBB]);
    tcp.extend_from_slice(&7u32.to_le_bytes());
    tcp.extend_from_slice(&0xFFFF_A08D_1234_5670u64.to_le_bytes());
    let p = decode_record(0x060B, 2, 8, false, &tcp).unwrap();
    assert_eq!((p.class, p.problem.as_deref()), ("TcpIp_TypeGroup1", None));
    assert_eq!(
        shown(&p),
        pairs(&[
            ("PID", "4242"),
            ("size", "1460"),
            ("daddr", "10.0.0.5"),
            ("saddr", "93.184.216.34"),
            ("dport", "49712"),
            ("sport", "443"),
            ("seqnum", "7"),
            ("connid", "0xffffa08d12345670"),
        ])
    );
    // A UDP IPv6 send on 32-bit: a DNS query from fe80::1 to 2001:db8::53.
    let mut udp = Vec::new();
    udp.extend_from_slice(&88u32.to_le_bytes());
    udp.extend_from_slice(&64u32.to_le_bytes());
    udp.extend_from_slice(&hex("20010db8000000000000000000000053"));
    udp.extend_from_slice(&hex("fe800000000000000000000000000001"));
    udp.extend_from_slice(&[0x00, 0x35, 0xC3, 0x50]);
    udp.extend_from_slice(&[0; 8]);
    let p = decode_record(0x081A, 2, 4, false, &udp).unwrap();
    assert_eq!((p.class, p.problem.as_deref()), ("UdpIp_TypeGroup2", None));
    assert_eq!(
        shown(&p)[2..6],
        pairs(&[
            ("daddr", "2001:db8::53"),
            ("saddr", "fe80::1"),
            ("dport", "53"),
            ("sport", "50000"),
        ])[..]
    );
    assert_eq!(p.get("connid"), Some(&Value::Address(0)));
    // A failed system call: STATUS_OBJECT_NAME_NOT_FOUND.
    let p = decode_record(0x0F34, 2, 8, true, &0xC000_0034u32.to_le_bytes()).unwrap();
    assert_eq!(shown(&p), pairs(&[("SysCallNtStatus", "0xc0000034")]));
    // A registry open on 64-bit: InitialTime, STATUS_SUCCESS, index 0, the KCB, the key.
    let mut reg = 1_234_567_890i64.to_le_bytes().to_vec();
    reg.extend_from_slice(&[0; 8]);
    reg.extend_from_slice(&0xFFFF_C00F_0000_1000u64.to_le_bytes());
    for u in "\\REGISTRY\\MACHINE\\SOFTWARE\0".encode_utf16() {
        reg.extend_from_slice(&u.to_le_bytes());
    }
    let p = decode_record(0x090B, 2, 8, true, &reg).unwrap();
    assert_eq!(
        (p.class, p.problem.as_deref()),
        ("Registry_TypeGroup1", None)
    );
    assert_eq!(
        shown(&p),
        pairs(&[
            ("InitialTime", "1234567890"),
            ("Status", "0x0"),
            ("Index", "0"),
            ("KeyHandle", "0xffffc00f00001000"),
            ("KeyName", "\\REGISTRY\\MACHINE\\SOFTWARE"),
        ])
    );
}

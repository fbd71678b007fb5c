//! Volatility 3 ISF fragments copied verbatim from the real 19041 kernel ISF
//! `shared/isf/5278AFF86C341677D7D7835C85B7B844-1.json.xz` (JPCERT Windows-Symbol-Tables,
//! BSD-3-Clause; crash-dump-format.md §2.2): every `base_types` entry, the `_ETW_BUFFER_STATE`
//! enum, and the user types a triage reader needs. `_WMI_BUFFER_HEADER` and its dependencies
//! are complete; `_KPRCB` keeps only a subset of its fields (real offsets, real size 0xAF00);
//! `_KTHREAD` is a stub with the real size (0x430) and no fields. The real ISF has no
//! `_KDDEBUGGER_DATA64`, so none is given here.

/// `base_types` of the real ISF.
pub(crate) const BASE_TYPES: &str = r#"{
  "HRESULT": {"endian":"little","kind":"int","signed":false,"size":4},
  "char": {"endian":"little","kind":"char","signed":true,"size":1},
  "double": {"endian":"little","kind":"float","signed":true,"size":8},
  "f32": {"endian":"little","kind":"float","signed":true,"size":4},
  "int": {"endian":"little","kind":"int","signed":true,"size":4},
  "long": {"endian":"little","kind":"int","signed":true,"size":4},
  "long long": {"endian":"little","kind":"int","signed":true,"size":8},
  "pointer": {"endian":"little","kind":"int","signed":false,"size":8},
  "short": {"endian":"little","kind":"int","signed":true,"size":2},
  "unsigned char": {"endian":"little","kind":"char","signed":false,"size":1},
  "unsigned int": {"endian":"little","kind":"int","signed":false,"size":4},
  "unsigned long": {"endian":"little","kind":"int","signed":false,"size":4},
  "unsigned long long": {"endian":"little","kind":"int","signed":false,"size":8},
  "unsigned short": {"endian":"little","kind":"int","signed":false,"size":2},
  "void": {"endian":"little","kind":"void","signed":true,"size":0},
  "wchar": {"endian":"little","kind":"int","signed":true,"size":2}
}"#;

/// `user_types` (subset, see the module doc).
pub(crate) const USER_TYPES: &str = r#"{
  "_ETW_BUFFER_CONTEXT": {"fields":{"Alignment":{"offset":1,"type":{"kind":"base","name":"unsigned char"}},"LoggerId":{"offset":2,"type":{"kind":"base","name":"unsigned short"}},"ProcessorIndex":{"offset":0,"type":{"kind":"base","name":"unsigned short"}},"ProcessorNumber":{"offset":0,"type":{"kind":"base","name":"unsigned char"}}},"kind":"struct","size":4},
  "_ETW_REF_CLOCK": {"fields":{"StartPerfClock":{"offset":8,"type":{"kind":"union","name":"_LARGE_INTEGER"}},"StartTime":{"offset":0,"type":{"kind":"union","name":"_LARGE_INTEGER"}}},"kind":"struct","size":16},
  "_KPRCB": {"fields":{"CpuID":{"offset":65,"type":{"kind":"base","name":"char"}},"CpuStep":{"offset":66,"type":{"kind":"base","name":"unsigned short"}},"CpuType":{"offset":64,"type":{"kind":"base","name":"char"}},"CpuVendor":{"offset":141,"type":{"kind":"base","name":"unsigned char"}},"CurrentThread":{"offset":8,"type":{"kind":"pointer","subtype":{"kind":"struct","name":"_KTHREAD"}}},"CycleTime":{"offset":32568,"type":{"kind":"base","name":"unsigned long long"}},"DpcTime":{"offset":32396,"type":{"kind":"base","name":"unsigned long"}},"EtwSupport":{"offset":33576,"type":{"kind":"pointer","subtype":{"kind":"base","name":"void"}}},"IdleHalt":{"offset":7,"type":{"kind":"base","name":"unsigned char"}},"IdleThread":{"offset":24,"type":{"kind":"pointer","subtype":{"kind":"struct","name":"_KTHREAD"}}},"InterruptCount":{"offset":32384,"type":{"kind":"base","name":"unsigned long"}},"InterruptTime":{"offset":32400,"type":{"kind":"base","name":"unsigned long"}},"KeExceptionDispatchCount":{"offset":32432,"type":{"kind":"base","name":"unsigned long"}},"LegacyNumber":{"offset":4,"type":{"kind":"base","name":"unsigned char"}},"MHz":{"offset":68,"type":{"kind":"base","name":"unsigned long"}},"MxCsr":{"offset":0,"type":{"kind":"base","name":"unsigned long"}},"NextThread":{"offset":16,"type":{"kind":"pointer","subtype":{"kind":"struct","name":"_KTHREAD"}}},"Number":{"offset":36,"type":{"kind":"base","name":"unsigned long"}},"StartCycles":{"offset":32448,"type":{"kind":"base","name":"unsigned long long"}}},"kind":"struct","size":44800},
  "_KTHREAD": {"fields":{},"kind":"struct","size":1072},
  "_LARGE_INTEGER": {"fields":{"HighPart":{"offset":4,"type":{"kind":"base","name":"long"}},"LowPart":{"offset":0,"type":{"kind":"base","name":"unsigned long"}},"QuadPart":{"offset":0,"type":{"kind":"base","name":"long long"}},"u":{"offset":0,"type":{"kind":"struct","name":"__anonymous_108e"}}},"kind":"union","size":8},
  "_LIST_ENTRY": {"fields":{"Blink":{"offset":8,"type":{"kind":"pointer","subtype":{"kind":"struct","name":"_LIST_ENTRY"}}},"Flink":{"offset":0,"type":{"kind":"pointer","subtype":{"kind":"struct","name":"_LIST_ENTRY"}}}},"kind":"struct","size":16},
  "_SINGLE_LIST_ENTRY": {"fields":{"Next":{"offset":0,"type":{"kind":"pointer","subtype":{"kind":"struct","name":"_SINGLE_LIST_ENTRY"}}}},"kind":"struct","size":8},
  "_WMI_BUFFER_HEADER": {"fields":{"BufferFlag":{"offset":52,"type":{"kind":"base","name":"unsigned short"}},"BufferSize":{"offset":0,"type":{"kind":"base","name":"unsigned long"}},"BufferType":{"offset":54,"type":{"kind":"base","name":"unsigned short"}},"ClientContext":{"offset":40,"type":{"kind":"struct","name":"_ETW_BUFFER_CONTEXT"}},"ClockType":{"offset":32,"type":{"bit_length":3,"bit_position":0,"kind":"bitfield","type":{"kind":"base","name":"unsigned long long"}}},"CurrentOffset":{"offset":8,"type":{"kind":"base","name":"unsigned long"}},"Frequency":{"offset":32,"type":{"bit_length":61,"bit_position":3,"kind":"bitfield","type":{"kind":"base","name":"unsigned long long"}}},"GlobalEntry":{"offset":56,"type":{"kind":"struct","name":"_LIST_ENTRY"}},"NextBuffer":{"offset":32,"type":{"kind":"pointer","subtype":{"kind":"struct","name":"_WMI_BUFFER_HEADER"}}},"Offset":{"offset":48,"type":{"kind":"base","name":"unsigned long"}},"Padding1":{"offset":56,"type":{"count":4,"kind":"array","subtype":{"kind":"base","name":"unsigned long"}}},"Pointer0":{"offset":56,"type":{"kind":"pointer","subtype":{"kind":"base","name":"void"}}},"Pointer1":{"offset":64,"type":{"kind":"pointer","subtype":{"kind":"base","name":"void"}}},"ReferenceCount":{"offset":12,"type":{"kind":"base","name":"long"}},"ReferenceTime":{"offset":56,"type":{"kind":"struct","name":"_ETW_REF_CLOCK"}},"SavedOffset":{"offset":4,"type":{"kind":"base","name":"unsigned long"}},"SequenceNumber":{"offset":24,"type":{"kind":"base","name":"long long"}},"SlistEntry":{"offset":32,"type":{"kind":"struct","name":"_SINGLE_LIST_ENTRY"}},"State":{"offset":44,"type":{"kind":"enum","name":"_ETW_BUFFER_STATE"}},"TimeStamp":{"offset":16,"type":{"kind":"union","name":"_LARGE_INTEGER"}}},"kind":"struct","size":72},
  "__anonymous_108e": {"fields":{"HighPart":{"offset":4,"type":{"kind":"base","name":"long"}},"LowPart":{"offset":0,"type":{"kind":"base","name":"unsigned long"}}},"kind":"struct","size":8}
}"#;

/// `enums` (subset).
pub(crate) const ENUMS: &str = r#"{
  "_ETW_BUFFER_STATE": {"base":"int","constants":{"EtwBufferStateCSwitch":2,"EtwBufferStateCompressed":5,"EtwBufferStateFlush":3,"EtwBufferStateFree":0,"EtwBufferStateGeneralLogging":1,"EtwBufferStateMaximum":7,"EtwBufferStatePendingCompression":4,"EtwBufferStatePlaceholder":6},"size":4}
}"#;

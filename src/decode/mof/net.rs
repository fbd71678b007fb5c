//! TcpIp (group 0x06) and UdpIp (group 0x08), version 2 (Vista and later).
//!
//! Sources (see [`super::process`] for the full references): \[MOF\] the Windows 10 SDK's
//! `wmicore.mof` (10.0.16299) `TcpIp_*` and `UdpIp_*` classes, the same fields as the Vista
//! MOF of TraceEvent's repository (`kerneltraceeventparser.mof`) and learn.microsoft.com's
//! "TcpIp_TypeGroup1 class" and siblings; \[TE\] TraceEvent's TcpIp*TraceData, UdpIp*TraceData.
//! Addresses are in network order, ports big-endian (MOF `extension("Port")`, \[TE\]
//! `ByteSwap16`). No real record of these groups is in shared/data.
//!
//! One disagreement: for the events without timing or connection options (Recv, Disconnect,
//! Retransmit, Reconnect, TCPCopy, IPv4 and IPv6), \[TE\] TcpIpTraceData and TcpIpV6TraceData
//! read `connid` right after the ports and `seqnum` after it, where every MOF text (Vista's,
//! 10.0.16299's, learn.microsoft.com's) and the Microsoft-Windows-Kernel-Network manifest put
//! `seqnum` first, as \[TE\] itself does for Send, Connect and UDP IPv6. We follow the MOF: it
//! is the schema Windows' own decoder (TDH) applies to these records.

use super::{Class, Field, Ty};

/// Process, size and the IPv4 endpoints.
const HEAD_V4: &[Field] = &[
    ("PID", Ty::U32),
    ("size", Ty::U32),
    ("daddr", Ty::Ipv4),
    ("saddr", Ty::Ipv4),
    ("dport", Ty::Port),
    ("sport", Ty::Port),
];

/// Process, size and the IPv6 endpoints.
const HEAD_V6: &[Field] = &[
    ("PID", Ty::U32),
    ("size", Ty::U32),
    ("daddr", Ty::Ipv6),
    ("saddr", Ty::Ipv6),
    ("dport", Ty::Port),
    ("sport", Ty::Port),
];

/// Send: the start and end times.
const SEND_TIMES: &[Field] = &[("startime", Ty::U32), ("endtime", Ty::U32)];

/// Connect, Accept: the negotiated options.
const OPTIONS: &[Field] = &[
    ("mss", Ty::U16),
    ("sackopt", Ty::U16),
    ("tsopt", Ty::U16),
    ("wsopt", Ty::U16),
    ("rcvwin", Ty::U32),
    ("rcvwinscale", Ty::I16),
    ("sndwinscale", Ty::I16),
];

/// Every event but Fail ends with these.
const SEQ_CONN: &[Field] = &[("seqnum", Ty::U32), ("connid", Ty::Ptr)];

/// Fail: the protocol and the failure code (\[TE\] exact length 4).
const FAIL: &[Field] = &[("Proto", Ty::U16), ("FailureCode", Ty::U16)];

/// The TcpIp group.
pub(super) const TCP_IP: &[Class] = &[
    // [MOF] TcpIp_SendIPV4; [TE] TcpIpSendTraceData (seqnum at 28, connid at 32).
    Class {
        name: "TcpIp_SendIPV4",
        types: &[10],
        version: 2,
        fields: &[HEAD_V4, SEND_TIMES, SEQ_CONN],
        tail: &[],
    },
    // [MOF] TcpIp_TypeGroup1 (RecvIPV4, DisconnectIPV4, RetransmitIPV4, ReconnectIPV4,
    // TCPCopyIPV4); [TE] disagrees on the last two fields' order (module comment).
    Class {
        name: "TcpIp_TypeGroup1",
        types: &[11, 13, 14, 16, 18],
        version: 2,
        fields: &[HEAD_V4, SEQ_CONN],
        tail: &[],
    },
    // [MOF] TcpIp_TypeGroup2 (ConnectIPV4, AcceptIPV4); [TE] TcpIpConnectTraceData (seqnum at
    // 36, connid at 40).
    Class {
        name: "TcpIp_TypeGroup2",
        types: &[12, 15],
        version: 2,
        fields: &[HEAD_V4, OPTIONS, SEQ_CONN],
        tail: &[],
    },
    // [MOF] TcpIp_Fail; [TE] TcpIpFailTraceData.
    Class {
        name: "TcpIp_Fail",
        types: &[17],
        version: 2,
        fields: &[FAIL],
        tail: &[],
    },
    // [MOF] TcpIp_SendIPV6; [TE] TcpIpV6SendTraceData (exact length HostOffset(60, 1)).
    Class {
        name: "TcpIp_SendIPV6",
        types: &[26],
        version: 2,
        fields: &[HEAD_V6, SEND_TIMES, SEQ_CONN],
        tail: &[],
    },
    // [MOF] TcpIp_TypeGroup3 (RecvIPV6, DisconnectIPV6, RetransmitIPV6, ReconnectIPV6,
    // TCPCopyIPV6); [TE] disagrees on the last two fields' order (module comment).
    Class {
        name: "TcpIp_TypeGroup3",
        types: &[27, 29, 30, 32, 34],
        version: 2,
        fields: &[HEAD_V6, SEQ_CONN],
        tail: &[],
    },
    // [MOF] TcpIp_TypeGroup4 (ConnectIPV6, AcceptIPV6); [TE] TcpIpV6ConnectTraceData (exact
    // length HostOffset(68, 1)).
    Class {
        name: "TcpIp_TypeGroup4",
        types: &[28, 31],
        version: 2,
        fields: &[HEAD_V6, OPTIONS, SEQ_CONN],
        tail: &[],
    },
];

/// The UdpIp group.
pub(super) const UDP_IP: &[Class] = &[
    // [MOF] UdpIp_TypeGroup1 (SendIPV4, RecvIPV4); [TE] UdpIpTraceData reads the same head
    // (at least 20 bytes) and not the rest.
    Class {
        name: "UdpIp_TypeGroup1",
        types: &[10, 11],
        version: 2,
        fields: &[HEAD_V4, SEQ_CONN],
        tail: &[],
    },
    // [MOF] UdpIp_Fail; [TE] UdpIpFailTraceData (exact length 4).
    Class {
        name: "UdpIp_Fail",
        types: &[17],
        version: 2,
        fields: &[FAIL],
        tail: &[],
    },
    // [MOF] UdpIp_TypeGroup2 (SendIPV6, RecvIPV6); [TE] UpdIpV6TraceData (seqnum at 44,
    // connid at 48, exact length HostOffset(52, 1)).
    Class {
        name: "UdpIp_TypeGroup2",
        types: &[26, 27],
        version: 2,
        fields: &[HEAD_V6, SEQ_CONN],
        tail: &[],
    },
];

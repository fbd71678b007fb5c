/* Compiled WITH CodeView debug info into every tiny fuzz PDB (fuzz/seedgen/tiny_pdb/build.sh):
 * the enumerations etwdump reads constants from (the fixtures have none of them), two kernel
 * globals as S_GDATA32 records (the fixtures' globals are S_PUB32 publics only), and one
 * structure carrying the type shapes a few small roots lack (what the fixtures' big _KPRCB
 * and _EPROCESS closures have): arrays of pointers, of enums, of structures and of arrays,
 * modifiers, a function pointer, bitfields on 8/32/64-bit units, an anonymous union, a member
 * past offset 0x8000 and enumerators of every numeric-leaf width. So the seeds reach
 * `enum_constants`, the S_GDATA32 branch of `read_symbols`, every arm of `size_of` and
 * `type_ref`, and the `pdb` crate's numeric leaves, in a few KB. */

enum _KWAIT_REASON {
    Executive, FreePage, PageIn, PoolAllocation, DelayExecution, Suspended, UserRequest,
    WrExecutive, WrFreePage, WrPageIn, WrPoolAllocation, WrDelayExecution, WrSuspended,
    WrUserRequest, WrEventPair, WrQueue, WrLpcReceive, WrLpcReply, WrVirtualMemory, WrPageOut,
    WrRendezvous, WrKeyedEvent, WrTerminated, WrProcessInSwap, WrCpuRateControl,
    WrCalloutStack, WrKernel, WrResource, WrPushLock, WrMutex, WrQuantumEnd, WrDispatchInt,
    WrPreempted, WrYieldExecution, WrFastMutex, WrGuardedMutex, WrRundown, WrAlertByThreadId,
    WrDeferredPreempt, WrPhysicalFault, MaximumWaitReason
};

enum _KTHREAD_STATE {
    Initialized, Ready, Running, Standby, Terminated, Waiting, Transition, DeferredReady,
    GateWaitObsolete, WaitingForProcessInSwap
};

#define DATA __attribute__((section(".data")))

DATA enum _KWAIT_REASON EtwdumpFuzzWaitReason = MaximumWaitReason;
DATA enum _KTHREAD_STATE EtwdumpFuzzThreadState = WaitingForProcessInSwap;
/* S_GDATA32 records for two globals etwdump looks up (not in globals.c). */
DATA unsigned long EtwpActiveSystemLoggers = 0;
DATA unsigned char EtwpGroupMasks[0x40] = {0};

/* Enumerator values of every CodeView numeric-leaf width (LF_CHAR, LF_SHORT, LF_LONG,
 * LF_ULONG, LF_QUADWORD, LF_UQUADWORD; small values are inline). */
enum EtwdumpFuzzValues : long long {
    FuzzNegChar = -1, FuzzNegShort = -200, FuzzNegLong = -70000, FuzzUShort = 0xF000,
    FuzzULong = 0x12345678, FuzzQuad = -0x123456789LL, FuzzUQuad = 0x7123456789ABCDEFLL
};

struct EtwdumpFuzzInner {
    unsigned short A;
    unsigned char B;
};

union EtwdumpFuzzUnion {
    unsigned long long Q;
    struct EtwdumpFuzzInner In;
};

typedef long (*EtwdumpFuzzRoutine)(void *Context, unsigned long Count);

/* NOT the real _KDDEBUGGER_DATA64: a name etwdump asks a PDB for (WANTED_TYPES) that the
 * layout sources of the tiny seeds do not define, so this structure is converted. */
struct _KDDEBUGGER_DATA64 {
    struct _KDDEBUGGER_DATA64 *Self;
    void *Pointers[3];
    struct EtwdumpFuzzInner *const volatile Modified;
    unsigned long Matrix[2][3];
    enum _KWAIT_REASON Reasons[4];
    enum EtwdumpFuzzValues Value;
    struct EtwdumpFuzzInner Inner[2];
    struct EtwdumpFuzzInner *InnerPointers[2];
    union EtwdumpFuzzUnion Unions[2];
    const unsigned long Constants[2];
    union EtwdumpFuzzUnion U;
    union {
        unsigned long Whole;
        struct {
            unsigned long Low : 5;
            unsigned long High : 27;
        };
    };
    unsigned long long Wide : 40;
    unsigned long long Rest : 24;
    unsigned char Flag : 1;
    signed char SignedChar;
    short Short;
    unsigned short WChar;
    float Float;
    double Double;
    long long Quad;
    EtwdumpFuzzRoutine Routine;
    const char *Name;
    unsigned char Gap[0x8000];
    unsigned long PastGap;
};

DATA struct _KDDEBUGGER_DATA64 *EtwdumpFuzzDebuggerData = 0;
DATA enum EtwdumpFuzzValues EtwdumpFuzzValue = FuzzUQuad;

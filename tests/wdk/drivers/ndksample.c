/*
 * ndksample - an NDK consumer driver written the way Windows storage and
 * transport drivers in the style of SMB Direct are written, built with the
 * WDK kit and run by ndkhost (docs/porting.md).
 *
 * DriverEntry registers with WSK, asks WskControlClient for the NDK
 * extension and opens NDK adapters by interface index. A listener and a
 * client run in one driver, each on a system thread, each connection with
 * its own adapter, PD, CQs, QP and connector. Every asynchronous NDK call is
 * finished through a KEVENT that its completion sets; work completions are
 * read from a receive CQ and an initiator CQ, whose notifications (at
 * DISPATCH_LEVEL) set a KEVENT each.
 * Local buffers are described by MDLs and LAMs (NdkBuildLAM) and used with
 * the PD's privileged token; buffers the peer reads and writes are
 * fast-registered MRs.
 *
 * The exchange is rping's (rdma-core librdmacm/examples/rping.c), so the
 * client can also talk to rping on Linux siw: per ping the client Sends the
 * address, token and size of its start buffer (16 bytes, big-endian); the
 * server RDMA-Reads it and Sends a go-ahead; the client Sends its RDMA
 * buffer; the server RDMA-Writes into it and Sends a go-ahead; the client
 * compares the two buffers. Between two copies of this driver an extended
 * phase follows (message size field 0xFFFFFFFF): the server fast-registers
 * its buffer and Sends its address and token; the client RDMA-Writes a
 * pattern there and Reads it back, then a SendAndInvalidate invalidates the
 * server's region (the server checks the invalidated token in its receive
 * completion and Sends its verdict), then the client invalidates its own
 * region with NdkInvalidate. The client disconnects; on the disconnect event
 * the server disconnects too and flushes its queue (NdkFlush); both count
 * their receives completed with STATUS_CANCELLED. DriverUnload closes
 * everything and reports the verdict.
 *
 * Parameters: the kit has no registry, so the test passes them after the
 * service name in the registry path, ';'-separated:
 *   mode=both|client|server  server-if=N client-if=N  server=A.B.C.D
 *   client=A.B.C.D  port=N  pings=N  size=N  ext=0|1  delay-first=MS
 * Defaults: both, interfaces 71 and 72, 10.71.0.1 and 10.71.0.2, port 7471,
 * 10 pings of 64 bytes, ext=1.
 */
#include <ntddk.h>
#include <wdmsec.h>
#include <ntstrsafe.h>
#include <netioapi.h>
#include <wsk.h>
#include <wskndk.h>
#include <ndkpi.h>

DRIVER_INITIALIZE DriverEntry;
static DRIVER_UNLOAD SampleUnload;
static KSTART_ROUTINE ServerThread;
static KSTART_ROUTINE ClientThread;

#define SAMPLE_TAG 'pmSN' /* "NSmp" */
#define MSG_LEN 16
#define RQ_DEPTH 4
#define SQ_DEPTH 16
#define WAIT_MS 10000
#define EXT_MARK 0xFFFFFFFFu
#define PATTERN2 0x5A

#define LOG(fmt, ...) DbgPrintEx(DPFLTR_IHVDRIVER_ID, DPFLTR_ERROR_LEVEL, "ndksample: " fmt "\n", __VA_ARGS__)

typedef struct _CONFIG {
    BOOLEAN Server, Client, Ext;
    NET_IFINDEX ServerIf, ClientIf;
    IN_ADDR ServerAddr, ClientAddr;
    USHORT Port; /* network order */
    ULONG Pings, Size, DelayFirstMs;
} CONFIG;

/* One asynchronous call at a time per side: its completion lands here. */
typedef struct _SYNC {
    KEVENT Event;
    NTSTATUS Status;
    NDK_OBJECT_HEADER *Object;
} SYNC;

/* A connection end: its adapter and objects, and one buffer laid out as
 * [RQ_DEPTH receive messages | send message] in the first page, then
 * [start buffer | RDMA buffer] from the next page on. */
typedef struct _SIDE {
    const char *Name;
    NET_IFINDEX IfIndex;
    NDK_ADAPTER *Adapter;
    NDK_ADAPTER_INFO Info;
    NDK_PD *Pd;
    UINT32 PrivilegedToken;
    NDK_CQ *Rcq, *Icq; /* receive and initiator completions */
    KEVENT RcqEvent, IcqEvent;
    NDK_QP *Qp;
    NDK_CONNECTOR *Connector;
    NDK_LISTENER *Listener; /* the server's; closed after the connector it made */
    NDK_MR *Frmr;
    BOOLEAN FrmrValid;
    KEVENT Disconnected;
    SYNC Sync;
    PUCHAR Buffer;
    SIZE_T BufferSize;
    PMDL Mdl;
    NDK_LOGICAL_ADDRESS_MAPPING *Lam;
    ULONG LamSize, Fbo;
    ULONG DataOffset; /* start buffer; the RDMA buffer follows it */
    ULONG Cancelled;  /* receives flushed at the end */
    NTSTATUS Result;
} SIDE;

typedef struct _SAMPLE {
    CONFIG Config;
    WSK_REGISTRATION WskRegistration;
    WSK_PROVIDER_NPI WskProvider;
    WSK_PROVIDER_NDK_DISPATCH Ndk;
    BOOLEAN WskRegistered, WskCaptured;
    PDEVICE_OBJECT Device;
    KEVENT ConnectRequest;
    NDK_CONNECTOR *volatile Incoming;
    SIDE Server, Client;
    HANDLE ServerHandle, ClientHandle;
} SAMPLE;

static SAMPLE *Sample;
static SYNC RejectedClose;
static const WSK_CLIENT_DISPATCH WskAppDispatch = {MAKE_WSK_VERSION(1, 0), 0, NULL};

/* ---- completions: set the KEVENT the caller waits on (any IRQL <= DISPATCH) ---- */
static VOID RequestDone(PVOID Context, NTSTATUS Status)
{
    SYNC *s = Context;
    s->Status = Status;
    KeSetEvent(&s->Event, IO_NO_INCREMENT, FALSE);
}

static VOID CreateDone(PVOID Context, NTSTATUS Status, NDK_OBJECT_HEADER *Object)
{
    SYNC *s = Context;
    s->Object = Object;
    s->Status = Status;
    KeSetEvent(&s->Event, IO_NO_INCREMENT, FALSE);
}

static VOID CloseDone(PVOID Context)
{
    SYNC *s = Context;
    s->Status = STATUS_SUCCESS;
    KeSetEvent(&s->Event, IO_NO_INCREMENT, FALSE);
}

static VOID CqNotify(PVOID Context, NTSTATUS CqStatus)
{
    PKEVENT event = Context;
    UNREFERENCED_PARAMETER(CqStatus);
    NT_ASSERT(KeGetCurrentIrql() == DISPATCH_LEVEL);
    KeSetEvent(event, IO_NO_INCREMENT, FALSE);
}

static VOID DisconnectEvent(PVOID Context)
{
    SIDE *side = Context;
    KeSetEvent(&side->Disconnected, IO_NO_INCREMENT, FALSE);
}

static VOID ConnectEvent(PVOID Context, NDK_CONNECTOR *Connector)
{
    SAMPLE *s = Context;
    if (InterlockedCompareExchangePointer((PVOID volatile *)&s->Incoming, Connector, NULL) != NULL) {
        /* One connection at a time: refuse the others. */
        Connector->Dispatch->NdkReject(Connector, NULL, 0);
        Connector->Dispatch->NdkCloseConnector(&Connector->Header, CloseDone, &RejectedClose);
        return;
    }
    KeSetEvent(&s->ConnectRequest, IO_NO_INCREMENT, FALSE);
}

/* Starts a call with SYNC as its context; finishes it if it pends. */
static VOID SyncReset(SYNC *s)
{
    KeClearEvent(&s->Event);
    s->Status = STATUS_PENDING;
    s->Object = NULL;
}

static NTSTATUS SyncFinish(SYNC *s, NTSTATUS Status)
{
    LARGE_INTEGER timeout;
    if (Status != STATUS_PENDING)
        return Status;
    timeout.QuadPart = -(LONGLONG)WAIT_MS * 10000;
    if (KeWaitForSingleObject(&s->Event, Executive, KernelMode, FALSE, &timeout) == STATUS_TIMEOUT)
        return STATUS_IO_TIMEOUT;
    return s->Status;
}

static LONG CloseFailures;

static VOID CloseObject(SIDE *side, NDK_OBJECT_HEADER *Object, NDK_FN_CLOSE_OBJECT Close)
{
    NTSTATUS status;
    SyncReset(&side->Sync);
    status = SyncFinish(&side->Sync, Close(Object, CloseDone, &side->Sync));
    if (!NT_SUCCESS(status)) {
        LOG("%s: closing an object of type %d failed with %08X", side->Name, Object->ObjectType,
            status);
        InterlockedIncrement(&CloseFailures);
    }
}

/* The next completion of a CQ, waiting for it when none is there: poll,
 * arm, poll again (a completion may land before the arm), wait. While the
 * connection is up, a disconnect event ends the wait too. */
static NTSTATUS NextCompletion(SIDE *side, NDK_CQ *Cq, PKEVENT CqEvent, NDK_RESULT_EX *Result,
                               BOOLEAN StopOnDisconnect)
{
    LARGE_INTEGER timeout;
    PVOID events[2] = {CqEvent, &side->Disconnected};
    timeout.QuadPart = -(LONGLONG)WAIT_MS * 10000;
    for (;;) {
        NTSTATUS status;
        if (Cq->Dispatch->NdkGetCqResultsEx(Cq, Result, 1) == 1)
            return STATUS_SUCCESS;
        KeClearEvent(CqEvent);
        Cq->Dispatch->NdkArmCq(Cq, NDK_CQ_NOTIFY_ANY);
        if (Cq->Dispatch->NdkGetCqResultsEx(Cq, Result, 1) == 1)
            return STATUS_SUCCESS;
        status = KeWaitForMultipleObjects(StopOnDisconnect ? 2 : 1, events, WaitAny, Executive,
                                          KernelMode, FALSE, &timeout, NULL);
        if (status == STATUS_TIMEOUT)
            return STATUS_IO_TIMEOUT;
        if (status == STATUS_WAIT_1)
            return STATUS_CONNECTION_DISCONNECTED;
    }
}

/* Waits for the completion of one request of the given type. */
static NTSTATUS Expect(SIDE *side, NDK_OPERATION_TYPE Type, NDK_RESULT_EX *Out)
{
    NDK_RESULT_EX r;
    BOOLEAN receive = Type == NdkOperationTypeReceive;
    NTSTATUS status = NextCompletion(side, receive ? side->Rcq : side->Icq,
                                     receive ? &side->RcqEvent : &side->IcqEvent, &r, TRUE);
    if (!NT_SUCCESS(status))
        return status;
    if (Out)
        *Out = r;
    if (r.Type != Type && !(Type == NdkOperationTypeReceive &&
                            r.Type == NdkOperationTypeReceiveAndInvalidate)) {
        LOG("%s: completion of type %d, expected %d (status %08X)", side->Name, r.Type, Type,
            r.Status);
        return STATUS_UNSUCCESSFUL;
    }
    return r.Status;
}

/* ---- memory: local SGEs are logical addresses with the privileged token ---- */
static ULONG BuildSgl(SIDE *side, ULONG Offset, ULONG Length, NDK_SGE *Sgl, ULONG MaxSge)
{
    ULONG n = 0;
    while (Length && n < MaxSge) {
        ULONG pos = side->Fbo + Offset;
        ULONG inPage = PAGE_SIZE - (pos & (PAGE_SIZE - 1));
        ULONG len = Length < inPage ? Length : inPage;
        Sgl[n].LogicalAddress.QuadPart =
            side->Lam->AdapterPageArray[pos >> PAGE_SHIFT].QuadPart + (pos & (PAGE_SIZE - 1));
        Sgl[n].Length = len;
        Sgl[n].MemoryRegionToken = side->PrivilegedToken;
        n++;
        Offset += len;
        Length -= len;
    }
    return Length ? 0 : n;
}

static NTSTATUS PostReceive(SIDE *side, ULONG Slot)
{
    NDK_SGE sge[2];
    ULONG n = BuildSgl(side, Slot * MSG_LEN, MSG_LEN, sge, 2);
    return side->Qp->Dispatch->NdkReceive(side->Qp, (PVOID)(ULONG_PTR)Slot, sge, n);
}

static VOID PutBe(PUCHAR p, ULONG64 v, ULONG bytes)
{
    for (ULONG i = 0; i < bytes; i++)
        p[i] = (UCHAR)(v >> (8 * (bytes - 1 - i)));
}

static ULONG64 GetBe(const UCHAR *p, ULONG bytes)
{
    ULONG64 v = 0;
    for (ULONG i = 0; i < bytes; i++)
        v = (v << 8) | p[i];
    return v;
}

/* Sends a 16-byte message {address, token, size} and waits for it. */
static NTSTATUS SendMessage(SIDE *side, ULONG64 Address, UINT32 Token, ULONG Size,
                            BOOLEAN Invalidate, UINT32 RemoteToken)
{
    NDK_SGE sge[2];
    PUCHAR msg = side->Buffer + RQ_DEPTH * MSG_LEN;
    ULONG n;
    NTSTATUS status;
    PutBe(msg, Address, 8);
    PutBe(msg + 8, Token, 4);
    PutBe(msg + 12, Size, 4);
    n = BuildSgl(side, RQ_DEPTH * MSG_LEN, MSG_LEN, sge, 2);
    if (Invalidate)
        status = side->Qp->Dispatch->NdkSendAndInvalidate(side->Qp, NULL, sge, n, 0, RemoteToken);
    else
        status = side->Qp->Dispatch->NdkSend(side->Qp, NULL, sge, n, 0);
    if (!NT_SUCCESS(status))
        return status;
    return Expect(side, NdkOperationTypeSend, NULL);
}

/* Waits for the next message, reposts its buffer, returns its fields. */
static NTSTATUS ReceiveMessage(SIDE *side, ULONG64 *Address, UINT32 *Token, ULONG *Size,
                               NDK_RESULT_EX *Result)
{
    NDK_RESULT_EX r;
    NTSTATUS status = Expect(side, NdkOperationTypeReceive, &r);
    ULONG slot;
    PUCHAR msg;
    if (!NT_SUCCESS(status))
        return status;
    slot = (ULONG)(ULONG_PTR)r.RequestContext;
    msg = side->Buffer + slot * MSG_LEN;
    if (r.BytesTransferred != MSG_LEN)
        return STATUS_INVALID_NETWORK_RESPONSE;
    *Address = GetBe(msg, 8);
    *Token = (UINT32)GetBe(msg + 8, 4);
    *Size = (ULONG)GetBe(msg + 12, 4);
    if (Result)
        *Result = r;
    return PostReceive(side, slot);
}

/* Fast-registers [Offset, Offset + Length) of the buffer for remote access
 * at its own virtual address; the token is read once the registration has
 * completed. */
static NTSTATUS FastRegister(SIDE *side, ULONG Offset, ULONG Length, UINT32 *Token)
{
    ULONG pos = side->Fbo + Offset, first = pos >> PAGE_SHIFT;
    ULONG pages = ADDRESS_AND_SIZE_TO_SPAN_PAGES(pos & (PAGE_SIZE - 1), Length);
    NTSTATUS status = side->Qp->Dispatch->NdkFastRegister(
        side->Qp, NULL, side->Frmr, pages, &side->Lam->AdapterPageArray[first],
        pos & (PAGE_SIZE - 1), Length, side->Buffer + Offset,
        NDK_OP_FLAG_ALLOW_REMOTE_READ | NDK_OP_FLAG_ALLOW_REMOTE_WRITE);
    if (!NT_SUCCESS(status))
        return status;
    status = Expect(side, NdkOperationTypeFastRegister, NULL);
    if (NT_SUCCESS(status)) {
        side->FrmrValid = TRUE;
        *Token = side->Frmr->Dispatch->NdkGetRemoteTokenFromMr(side->Frmr);
    }
    return status;
}

/* ---- one side's objects ---- */
static NTSTATUS OpenSide(SAMPLE *s, SIDE *side, const char *Name, NET_IFINDEX IfIndex)
{
    NDK_VERSION version = {2, 1};
    NET_LUID luid;
    MIB_IF_ROW2 row;
    ULONG size = sizeof side->Info;
    NTSTATUS status;
    ULONG data = s->Config.Size;

    side->Name = Name;
    side->IfIndex = IfIndex;
    KeInitializeEvent(&side->Sync.Event, NotificationEvent, FALSE);
    KeInitializeEvent(&side->RcqEvent, NotificationEvent, FALSE);
    KeInitializeEvent(&side->IcqEvent, NotificationEvent, FALSE);
    KeInitializeEvent(&side->Disconnected, NotificationEvent, FALSE);

    status = ConvertInterfaceIndexToLuid(IfIndex, &luid);
    if (!NT_SUCCESS(status)) {
        LOG("%s: no interface with index %u (%08X)", Name, IfIndex, status);
        return status;
    }
    RtlZeroMemory(&row, sizeof row);
    row.InterfaceLuid = luid;
    status = GetIfEntry2(&row);
    if (!NT_SUCCESS(status))
        return status;
    LOG("%s: interface %u is %ws, MTU %u", Name, IfIndex, row.Alias, row.Mtu);

    status = s->Ndk.WskOpenNdkAdapter(s->WskProvider.Client, version, IfIndex, &side->Adapter);
    if (!NT_SUCCESS(status)) {
        LOG("%s: WskOpenNdkAdapter(%u) failed with %08X", Name, IfIndex, status);
        return status;
    }
    status = side->Adapter->Dispatch->NdkQueryAdapterInfo(side->Adapter, &side->Info, &size);
    if (!NT_SUCCESS(status))
        return status;

    SyncReset(&side->Sync);
    status = SyncFinish(&side->Sync, side->Adapter->Dispatch->NdkCreatePd(
                                         side->Adapter, CreateDone, &side->Sync, &side->Pd));
    if (!NT_SUCCESS(status))
        return status;
    side->Pd->Dispatch->NdkGetPrivilegedMemoryRegionToken(side->Pd, &side->PrivilegedToken);

    SyncReset(&side->Sync);
    status = SyncFinish(&side->Sync, side->Adapter->Dispatch->NdkCreateCq(
                                         side->Adapter, RQ_DEPTH, CqNotify, &side->RcqEvent, NULL,
                                         CreateDone, &side->Sync, &side->Rcq));
    if (!NT_SUCCESS(status))
        return status;
    SyncReset(&side->Sync);
    status = SyncFinish(&side->Sync, side->Adapter->Dispatch->NdkCreateCq(
                                         side->Adapter, SQ_DEPTH, CqNotify, &side->IcqEvent, NULL,
                                         CreateDone, &side->Sync, &side->Icq));
    if (!NT_SUCCESS(status))
        return status;

    SyncReset(&side->Sync);
    status = SyncFinish(&side->Sync, side->Pd->Dispatch->NdkCreateQp(
                                         side->Pd, side->Rcq, side->Icq, side, RQ_DEPTH, SQ_DEPTH,
                                         2, min(4, side->Info.MaxInitiatorRequestSge), 0,
                                         CreateDone, &side->Sync, &side->Qp));
    if (!NT_SUCCESS(status))
        return status;

    /* The buffer: messages in the first page, the data pages after it. */
    side->DataOffset = PAGE_SIZE;
    side->BufferSize = PAGE_SIZE + 2 * (SIZE_T)ROUND_TO_PAGES(data);
    side->Buffer = ExAllocatePool2(POOL_FLAG_NON_PAGED, side->BufferSize, SAMPLE_TAG);
    if (!side->Buffer)
        return STATUS_INSUFFICIENT_RESOURCES;
    side->Mdl = IoAllocateMdl(side->Buffer, (ULONG)side->BufferSize, FALSE, FALSE, NULL);
    if (!side->Mdl)
        return STATUS_INSUFFICIENT_RESOURCES;
    MmBuildMdlForNonPagedPool(side->Mdl);

    /* NdkBuildLAM: ask for the size, then build. */
    side->LamSize = 0;
    status = side->Adapter->Dispatch->NdkBuildLAM(side->Adapter, side->Mdl, side->BufferSize,
                                                  RequestDone, &side->Sync, NULL, &side->LamSize,
                                                  &side->Fbo);
    if (status != STATUS_BUFFER_TOO_SMALL)
        return NT_SUCCESS(status) ? STATUS_UNSUCCESSFUL : status;
    side->Lam = ExAllocatePool2(POOL_FLAG_NON_PAGED, side->LamSize, SAMPLE_TAG);
    if (!side->Lam)
        return STATUS_INSUFFICIENT_RESOURCES;
    SyncReset(&side->Sync);
    status = SyncFinish(&side->Sync, side->Adapter->Dispatch->NdkBuildLAM(
                                         side->Adapter, side->Mdl, side->BufferSize, RequestDone,
                                         &side->Sync, side->Lam, &side->LamSize, &side->Fbo));
    if (!NT_SUCCESS(status)) {
        ExFreePoolWithTag(side->Lam, SAMPLE_TAG);
        side->Lam = NULL;
        return status;
    }

    /* A fast-register MR for the pages the peer reads and writes. */
    SyncReset(&side->Sync);
    status = SyncFinish(&side->Sync, side->Pd->Dispatch->NdkCreateMr(side->Pd, TRUE, CreateDone,
                                                                    &side->Sync, &side->Frmr));
    if (!NT_SUCCESS(status))
        return status;
    SyncReset(&side->Sync);
    status = SyncFinish(&side->Sync, side->Frmr->Dispatch->NdkInitializeFastRegisterMr(
                                         side->Frmr, side->Lam->AdapterPageCount, TRUE, RequestDone,
                                         &side->Sync));
    if (!NT_SUCCESS(status))
        return status;

    for (ULONG i = 0; i < RQ_DEPTH; i++) {
        status = PostReceive(side, i);
        if (!NT_SUCCESS(status))
            return status;
    }
    return STATUS_SUCCESS;
}

static VOID CloseSide(SAMPLE *s, SIDE *side)
{
    if (side->Connector)
        CloseObject(side, &side->Connector->Header, side->Connector->Dispatch->NdkCloseConnector);
    if (side->Listener)
        CloseObject(side, &side->Listener->Header, side->Listener->Dispatch->NdkCloseListener);
    if (side->Qp)
        CloseObject(side, &side->Qp->Header, side->Qp->Dispatch->NdkCloseQp);
    if (side->Frmr)
        CloseObject(side, &side->Frmr->Header, side->Frmr->Dispatch->NdkCloseMr);
    if (side->Rcq)
        CloseObject(side, &side->Rcq->Header, side->Rcq->Dispatch->NdkCloseCq);
    if (side->Icq)
        CloseObject(side, &side->Icq->Header, side->Icq->Dispatch->NdkCloseCq);
    if (side->Pd)
        CloseObject(side, &side->Pd->Header, side->Pd->Dispatch->NdkClosePd);
    if (side->Lam) {
        side->Adapter->Dispatch->NdkReleaseLAM(side->Adapter, side->Lam);
        ExFreePoolWithTag(side->Lam, SAMPLE_TAG);
    }
    if (side->Mdl)
        IoFreeMdl(side->Mdl);
    if (side->Buffer)
        ExFreePoolWithTag(side->Buffer, SAMPLE_TAG);
    if (side->Adapter)
        s->Ndk.WskCloseNdkAdapter(s->WskProvider.Client, side->Adapter);
    side->Connector = NULL;
    side->Listener = NULL;
    side->Qp = NULL;
    side->Frmr = NULL;
    side->Rcq = side->Icq = NULL;
    side->Pd = NULL;
    side->Lam = NULL;
    side->Mdl = NULL;
    side->Buffer = NULL;
    side->Adapter = NULL;
}

/* Drains the CQ after the connection ended: every receive still posted
 * completes with STATUS_CANCELLED. */
static NTSTATUS DrainCancelled(SIDE *side)
{
    NDK_RESULT_EX r;
    while (side->Cancelled < RQ_DEPTH) {
        NTSTATUS status = NextCompletion(side, side->Rcq, &side->RcqEvent, &r, FALSE);
        if (!NT_SUCCESS(status))
            return status;
        if (r.Status != STATUS_CANCELLED)
            return r.Status == STATUS_SUCCESS ? STATUS_UNSUCCESSFUL : r.Status;
        side->Cancelled++;
    }
    return STATUS_SUCCESS;
}

static VOID SockaddrOf(SOCKADDR_IN *sa, IN_ADDR Addr, USHORT Port)
{
    RtlZeroMemory(sa, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = Port;
    sa->sin_addr = Addr;
}

/* ---- the server: rping's server, then the extended phase ---- */
static NTSTATUS ServeExtended(SIDE *side, ULONG Size)
{
    NDK_RESULT_EX r;
    ULONG64 addr;
    UINT32 token, myToken = 0;
    ULONG size;
    NTSTATUS status;
    PUCHAR rdma = side->Buffer + side->DataOffset + ROUND_TO_PAGES(Size);

    status = FastRegister(side, side->DataOffset + (ULONG)ROUND_TO_PAGES(Size), Size, &myToken);
    if (!NT_SUCCESS(status))
        return status;
    status = SendMessage(side, (ULONG64)(ULONG_PTR)rdma, myToken, Size, FALSE, 0);
    if (!NT_SUCCESS(status))
        return status;
    /* The client writes, reads back, then sends and invalidates our region. */
    status = ReceiveMessage(side, &addr, &token, &size, &r);
    if (!NT_SUCCESS(status))
        return status;
    if (r.Type != NdkOperationTypeReceiveAndInvalidate || (UINT32)r.TypeSpecificCompletionOutput != myToken) {
        LOG("server: expected a receive that invalidated %08X, got type %d, %08X", myToken, r.Type,
            (UINT32)r.TypeSpecificCompletionOutput);
        SendMessage(side, 0, 0, (ULONG)STATUS_UNSUCCESSFUL, FALSE, 0);
        return STATUS_UNSUCCESSFUL;
    }
    side->FrmrValid = FALSE;
    for (ULONG i = 0; i < Size; i++)
        if (rdma[i] != PATTERN2) {
            LOG("server: byte %u of the client's RDMA Write is %02X", i, rdma[i]);
            return STATUS_DATA_ERROR;
        }
    LOG("server: the client's Write landed, its SendAndInvalidate invalidated token %08X", myToken);
    return SendMessage(side, 0, 0, STATUS_SUCCESS, FALSE, 0);
}

static NTSTATUS Serve(SAMPLE *s, SIDE *side)
{
    const CONFIG *c = &s->Config;
    NDK_SGE sge[4];
    ULONG64 addr;
    UINT32 token;
    ULONG size, pings = 0, n, inbound = 0, outbound = 0, pdLen = 0;
    NTSTATUS status;
    LARGE_INTEGER timeout;
    PUCHAR rdma = side->Buffer + side->DataOffset;

    timeout.QuadPart = -30LL * 10000000;
    if (KeWaitForSingleObject(&s->ConnectRequest, Executive, KernelMode, FALSE, &timeout) ==
        STATUS_TIMEOUT) {
        LOG("%s", "server: no connection request within 30 s");
        return STATUS_IO_TIMEOUT;
    }
    if (!s->Incoming)
        return STATUS_CANCELLED; /* DriverEntry failed after this thread started */
    side->Connector = s->Incoming;
    /* The request's IRD/ORD, read before the accept (as rping's server). */
    status = side->Connector->Dispatch->NdkGetConnectionData(side->Connector, &inbound, &outbound,
                                                             NULL, &pdLen);
    if (!NT_SUCCESS(status) && status != STATUS_BUFFER_TOO_SMALL)
        return status;
    SyncReset(&side->Sync);
    status = SyncFinish(&side->Sync, side->Connector->Dispatch->NdkAccept(
                                         side->Connector, side->Qp, min(inbound, 1u),
                                         min(outbound, 1u), NULL, 0, DisconnectEvent, side,
                                         RequestDone, &side->Sync));
    if (!NT_SUCCESS(status)) {
        LOG("server: NdkAccept failed with %08X", status);
        return status;
    }
    for (;;) {
        status = ReceiveMessage(side, &addr, &token, &size, NULL);
        if (!NT_SUCCESS(status))
            break;
        if (size == EXT_MARK) {
            status = ServeExtended(side, c->Size);
            if (!NT_SUCCESS(status))
                return status;
            continue;
        }
        if (size == 0 || size > c->Size)
            return STATUS_INVALID_NETWORK_RESPONSE;
        /* RDMA Read the client's start buffer, then go ahead. */
        n = BuildSgl(side, side->DataOffset, size, sge, 4);
        status = side->Qp->Dispatch->NdkRead(side->Qp, NULL, sge, n, addr, token, 0);
        if (NT_SUCCESS(status))
            status = Expect(side, NdkOperationTypeRead, NULL);
        if (NT_SUCCESS(status))
            status = SendMessage(side, 0, 0, 0, FALSE, 0);
        /* The client's RDMA buffer: write what we read into it. */
        if (NT_SUCCESS(status))
            status = ReceiveMessage(side, &addr, &token, &size, NULL);
        if (NT_SUCCESS(status) && (size == 0 || size > c->Size))
            status = STATUS_INVALID_NETWORK_RESPONSE;
        if (NT_SUCCESS(status)) {
            n = BuildSgl(side, side->DataOffset, size, sge, 4);
            status = side->Qp->Dispatch->NdkWrite(side->Qp, NULL, sge, n, addr, token, 0);
        }
        if (NT_SUCCESS(status))
            status = Expect(side, NdkOperationTypeWrite, NULL);
        if (NT_SUCCESS(status))
            status = SendMessage(side, 0, 0, 0, FALSE, 0);
        if (!NT_SUCCESS(status)) {
            LOG("server: ping %u failed with %08X", pings + 1, status);
            return status;
        }
        pings++;
    }
    /* The client disconnected: answer with our FIN (NdkDisconnect), then
     * NdkFlush and count every receive that was still posted as cancelled
     * (the one that ended the loop may already be one). */
    if (status != STATUS_CONNECTION_DISCONNECTED && status != STATUS_CANCELLED) {
        LOG("server: receive failed with %08X", status);
        return status;
    }
    side->Cancelled = status == STATUS_CANCELLED ? 1 : 0;
    SyncReset(&side->Sync);
    status = SyncFinish(&side->Sync, side->Connector->Dispatch->NdkDisconnect(
                                         side->Connector, RequestDone, &side->Sync));
    if (!NT_SUCCESS(status)) {
        LOG("server: NdkDisconnect failed with %08X", status);
        return status;
    }
    side->Qp->Dispatch->NdkFlush(side->Qp);
    status = DrainCancelled(side);
    if (!NT_SUCCESS(status))
        return status;
    LOG("server: %u pings served (%u bytes: '%.*s'), flushed %u receives", pings, c->Size,
        (int)min(c->Size - 1, 24), rdma, side->Cancelled);
    return pings == c->Pings ? STATUS_SUCCESS : STATUS_UNSUCCESSFUL;
}

static VOID ServerThread(PVOID Context)
{
    SAMPLE *s = Context;
    s->Server.Result = Serve(s, &s->Server);
    LOG("server: %s (%08X)", NT_SUCCESS(s->Server.Result) ? "done" : "FAILED", s->Server.Result);
    PsTerminateSystemThread(STATUS_SUCCESS);
}

/* ---- the client: rping's client, then the extended phase ---- */
static NTSTATUS ClientExtended(SIDE *side, ULONG Size)
{
    NDK_SGE sge[4];
    ULONG64 addr;
    UINT32 token, result, n;
    ULONG size;
    NTSTATUS status;
    PUCHAR start = side->Buffer + side->DataOffset;
    PUCHAR rdma = start + ROUND_TO_PAGES(Size);

    status = SendMessage(side, 0, 0, EXT_MARK, FALSE, 0);
    if (NT_SUCCESS(status))
        status = ReceiveMessage(side, &addr, &token, &size, NULL);
    if (!NT_SUCCESS(status))
        return status;
    if (size != Size)
        return STATUS_INVALID_NETWORK_RESPONSE;
    /* Write a pattern into the server's region, read it back. */
    RtlFillMemory(start, Size, PATTERN2);
    RtlZeroMemory(rdma, Size);
    n = BuildSgl(side, side->DataOffset, Size, sge, 4);
    status = side->Qp->Dispatch->NdkWrite(side->Qp, NULL, sge, n, addr, token, 0);
    if (NT_SUCCESS(status))
        status = Expect(side, NdkOperationTypeWrite, NULL);
    if (!NT_SUCCESS(status))
        return status;
    n = BuildSgl(side, side->DataOffset + (ULONG)ROUND_TO_PAGES(Size), Size, sge, 4);
    status = side->Qp->Dispatch->NdkRead(side->Qp, NULL, sge, n, addr, token, 0);
    if (NT_SUCCESS(status))
        status = Expect(side, NdkOperationTypeRead, NULL);
    if (!NT_SUCCESS(status))
        return status;
    if (RtlCompareMemory(start, rdma, Size) != Size) {
        LOG("%s", "client: the RDMA Read did not return what the RDMA Write put there");
        return STATUS_DATA_ERROR;
    }
    /* SendAndInvalidate the server's region; it answers with its verdict. */
    status = SendMessage(side, 0, 0, 0, TRUE, token);
    if (NT_SUCCESS(status))
        status = ReceiveMessage(side, &addr, &result, &size, NULL);
    if (!NT_SUCCESS(status))
        return status;
    if (size != (ULONG)STATUS_SUCCESS) {
        LOG("client: the server's verdict on SendAndInvalidate is %08X", size);
        return STATUS_UNSUCCESSFUL;
    }
    /* Invalidate our own region. */
    status = side->Qp->Dispatch->NdkInvalidate(side->Qp, NULL, &side->Frmr->Header, 0);
    if (NT_SUCCESS(status))
        status = Expect(side, NdkOperationTypeInvalidate, NULL);
    if (NT_SUCCESS(status)) {
        side->FrmrValid = FALSE;
        LOG("%s", "client: RDMA Write and Read back verified, SendAndInvalidate and Invalidate done");
    }
    return status;
}

static NTSTATUS Run(SAMPLE *s, SIDE *side)
{
    const CONFIG *c = &s->Config;
    SOCKADDR_IN local, remote;
    UINT32 token = 0, peerToken;
    ULONG64 addr;
    ULONG size, ping;
    NTSTATUS status;
    PUCHAR start = side->Buffer + side->DataOffset;
    PUCHAR rdma = start + ROUND_TO_PAGES(c->Size);
    LARGE_INTEGER delay;
    CHAR text[INET_ADDRSTRLEN];

    SyncReset(&side->Sync);
    status = SyncFinish(&side->Sync, side->Adapter->Dispatch->NdkCreateConnector(
                                         side->Adapter, CreateDone, &side->Sync, &side->Connector));
    if (!NT_SUCCESS(status))
        return status;
    SockaddrOf(&local, c->ClientAddr, 0);
    SockaddrOf(&remote, c->ServerAddr, c->Port);
    RtlIpv4AddressToStringA(&c->ServerAddr, text);
    LOG("client: connecting to %s:%u from interface %u", text, RtlUshortByteSwap(c->Port),
        side->IfIndex);
    SyncReset(&side->Sync);
    status = SyncFinish(&side->Sync, side->Connector->Dispatch->NdkConnect(
                                         side->Connector, side->Qp, (PSOCKADDR)&local, sizeof local,
                                         (PSOCKADDR)&remote, sizeof remote, 1, 1, NULL, 0,
                                         RequestDone, &side->Sync));
    if (!NT_SUCCESS(status)) {
        LOG("client: NdkConnect failed with %08X", status);
        return status;
    }
    SyncReset(&side->Sync);
    status = SyncFinish(&side->Sync, side->Connector->Dispatch->NdkCompleteConnect(
                                         side->Connector, DisconnectEvent, side, RequestDone,
                                         &side->Sync));
    if (!NT_SUCCESS(status))
        return status;
    if (c->DelayFirstMs) {
        delay.QuadPart = -(LONGLONG)c->DelayFirstMs * 10000;
        KeDelayExecutionThread(KernelMode, FALSE, &delay);
    }
    /* Both buffers are one fast-registered region at their own addresses. */
    status = FastRegister(side, side->DataOffset, (ULONG)ROUND_TO_PAGES(c->Size) + c->Size, &token);
    if (!NT_SUCCESS(status))
        return status;
    for (ping = 0; ping < c->Pings; ping++) {
        /* rping's data: "rdma-ping-N: " then a rotating alphabet. */
        RtlStringCbPrintfA((PSTR)start, c->Size, "rdma-ping-%u: ", ping);
        for (ULONG i = (ULONG)strlen((PSTR)start); i < c->Size - 1; i++)
            start[i] = (UCHAR)('A' + (ping + i) % 26);
        start[c->Size - 1] = 0;
        RtlZeroMemory(rdma, c->Size);
        /* The server's go-ahead messages carry nothing we use. */
        status = SendMessage(side, (ULONG64)(ULONG_PTR)start, token, c->Size, FALSE, 0);
        if (NT_SUCCESS(status))
            status = ReceiveMessage(side, &addr, &peerToken, &size, NULL);
        if (NT_SUCCESS(status))
            status = SendMessage(side, (ULONG64)(ULONG_PTR)rdma, token, c->Size, FALSE, 0);
        if (NT_SUCCESS(status))
            status = ReceiveMessage(side, &addr, &peerToken, &size, NULL);
        if (!NT_SUCCESS(status)) {
            LOG("client: ping %u failed with %08X", ping + 1, status);
            return status;
        }
        if (RtlCompareMemory(start, rdma, c->Size) != c->Size) {
            LOG("client: ping %u: the RDMA buffer differs from the start buffer", ping + 1);
            return STATUS_DATA_ERROR;
        }
    }
    LOG("client: %u pings of %u bytes verified ('%.*s')", c->Pings, c->Size,
        (int)min(c->Size - 1, 24), start);
    if (c->Ext) {
        status = ClientExtended(side, c->Size);
        if (!NT_SUCCESS(status))
            return status;
    }
    /* Disconnect; the receives still posted are flushed. */
    SyncReset(&side->Sync);
    status = SyncFinish(&side->Sync, side->Connector->Dispatch->NdkDisconnect(
                                         side->Connector, RequestDone, &side->Sync));
    if (!NT_SUCCESS(status)) {
        LOG("client: NdkDisconnect failed with %08X", status);
        return status;
    }
    status = DrainCancelled(side);
    if (NT_SUCCESS(status))
        LOG("client: disconnected, %u receives cancelled", side->Cancelled);
    return status;
}

static VOID ClientThread(PVOID Context)
{
    SAMPLE *s = Context;
    s->Client.Result = Run(s, &s->Client);
    LOG("client: %s (%08X)", NT_SUCCESS(s->Client.Result) ? "done" : "FAILED", s->Client.Result);
    PsTerminateSystemThread(STATUS_SUCCESS);
}

/* ---- parameters ---- */
static BOOLEAN ParseUlong(PCSTR v, ULONG *Out)
{
    ULONG x = 0;
    if (!*v)
        return FALSE;
    for (; *v; v++) {
        if (*v < '0' || *v > '9' || x > 429496728)
            return FALSE;
        x = x * 10 + (ULONG)(*v - '0');
    }
    *Out = x;
    return TRUE;
}

static NTSTATUS ParseConfig(PUNICODE_STRING RegistryPath, CONFIG *c)
{
    ANSI_STRING text;
    NTSTATUS status;
    PSTR p;
    ULONG v = 0;

    c->Server = c->Client = c->Ext = TRUE;
    c->ServerIf = 71;
    c->ClientIf = 72;
    c->Port = RtlUshortByteSwap(7471);
    c->Pings = 10;
    c->Size = 64;
    c->DelayFirstMs = 0;
    RtlIpv4StringToAddressExA("10.71.0.1", TRUE, &c->ServerAddr, &c->Port);
    c->Port = RtlUshortByteSwap(7471);
    RtlIpv4StringToAddressExA("10.71.0.2", TRUE, &c->ClientAddr, &c->Port);
    c->Port = RtlUshortByteSwap(7471);

    status = RtlUnicodeStringToAnsiString(&text, RegistryPath, TRUE);
    if (!NT_SUCCESS(status))
        return status;
    p = strchr(text.Buffer, ';');
    while (p && NT_SUCCESS(status)) {
        PSTR key = p + 1, val, end = strchr(key, ';');
        USHORT port;
        if (end)
            *end = 0;
        val = strchr(key, '=');
        if (!val) {
            status = STATUS_INVALID_PARAMETER;
            break;
        }
        *val++ = 0;
        if (!strcmp(key, "mode")) {
            c->Server = !strcmp(val, "both") || !strcmp(val, "server");
            c->Client = !strcmp(val, "both") || !strcmp(val, "client");
            if (!c->Server && !c->Client)
                status = STATUS_INVALID_PARAMETER;
        } else if (!strcmp(key, "server-if")) {
            status = ParseUlong(val, &c->ServerIf) ? STATUS_SUCCESS : STATUS_INVALID_PARAMETER;
        } else if (!strcmp(key, "client-if")) {
            status = ParseUlong(val, &c->ClientIf) ? STATUS_SUCCESS : STATUS_INVALID_PARAMETER;
        } else if (!strcmp(key, "server")) {
            status = RtlIpv4StringToAddressExA(val, TRUE, &c->ServerAddr, &port);
        } else if (!strcmp(key, "client")) {
            status = RtlIpv4StringToAddressExA(val, TRUE, &c->ClientAddr, &port);
        } else if (!strcmp(key, "port")) {
            status = ParseUlong(val, &v) && v && v < 65536 ? STATUS_SUCCESS : STATUS_INVALID_PARAMETER;
            c->Port = RtlUshortByteSwap((USHORT)v);
        } else if (!strcmp(key, "pings")) {
            status = ParseUlong(val, &c->Pings) ? STATUS_SUCCESS : STATUS_INVALID_PARAMETER;
        } else if (!strcmp(key, "size")) {
            status = ParseUlong(val, &c->Size) && c->Size >= 23 && c->Size <= 3 * PAGE_SIZE
                         ? STATUS_SUCCESS
                         : STATUS_INVALID_PARAMETER;
        } else if (!strcmp(key, "ext")) {
            status = ParseUlong(val, &v) ? STATUS_SUCCESS : STATUS_INVALID_PARAMETER;
            c->Ext = v != 0;
        } else if (!strcmp(key, "delay-first")) {
            status = ParseUlong(val, &c->DelayFirstMs) ? STATUS_SUCCESS : STATUS_INVALID_PARAMETER;
        } else {
            status = STATUS_INVALID_PARAMETER;
        }
        if (!NT_SUCCESS(status))
            LOG("bad parameter %s=%s", key, val);
        p = end ? end : NULL;
    }
    RtlFreeAnsiString(&text);
    if (!(c->Server && c->Client))
        c->Ext = c->Ext && c->Server; /* the extended phase needs this driver at both ends */
    return status;
}

/* ---- load and unload ---- */
static VOID Cleanup(SAMPLE *s)
{
    PVOID thread;
    HANDLE handles[2] = {s->ServerHandle, s->ClientHandle};
    for (int i = 0; i < 2; i++) {
        if (!handles[i])
            continue;
        if (NT_SUCCESS(ObReferenceObjectByHandle(handles[i], SYNCHRONIZE, *PsThreadType, KernelMode,
                                                 &thread, NULL))) {
            KeWaitForSingleObject(thread, Executive, KernelMode, FALSE, NULL);
            ObDereferenceObject(thread);
        }
        ZwClose(handles[i]);
    }
    CloseSide(s, &s->Client);
    CloseSide(s, &s->Server);
    if (s->WskCaptured)
        WskReleaseProviderNPI(&s->WskRegistration);
    if (s->WskRegistered)
        WskDeregister(&s->WskRegistration);
    if (s->Device)
        IoDeleteDevice(s->Device);
    ExFreePoolWithTag(s, SAMPLE_TAG);
}

static VOID SampleUnload(PDRIVER_OBJECT DriverObject)
{
    SAMPLE *s = Sample;
    NTSTATUS server = s->Config.Server ? s->Server.Result : STATUS_SUCCESS;
    NTSTATUS client = s->Config.Client ? s->Client.Result : STATUS_SUCCESS;
    UNREFERENCED_PARAMETER(DriverObject);
    PAGED_CODE();
    Cleanup(s);
    Sample = NULL;
    LOG("unloaded: server %08X, client %08X", server, client);
    NT_ASSERTMSG("the exchange succeeded at both ends", NT_SUCCESS(server) && NT_SUCCESS(client));
    NT_ASSERTMSG("every NDK object closed", CloseFailures == 0);
}

static NTSTATUS Start(SAMPLE *s, PDRIVER_OBJECT DriverObject, PUNICODE_STRING RegistryPath)
{
    WSK_CLIENT_NPI npi = {s, &WskAppDispatch};
    SIZE_T got = 0;
    SOCKADDR_IN addr;
    NTSTATUS status;

    status = ParseConfig(RegistryPath, &s->Config);
    if (!NT_SUCCESS(status))
        return status;
    status = IoCreateDeviceSecure(DriverObject, 0, NULL, FILE_DEVICE_NETWORK, FILE_DEVICE_SECURE_OPEN,
                                  FALSE, &SDDL_DEVOBJ_SYS_ALL_ADM_ALL, NULL, &s->Device);
    if (!NT_SUCCESS(status))
        return status;
    status = WskRegister(&npi, &s->WskRegistration);
    if (!NT_SUCCESS(status))
        return status;
    s->WskRegistered = TRUE;
    status = WskCaptureProviderNPI(&s->WskRegistration, WSK_INFINITE_WAIT, &s->WskProvider);
    if (!NT_SUCCESS(status))
        return status;
    s->WskCaptured = TRUE;
    status = s->WskProvider.Dispatch->WskControlClient(
        s->WskProvider.Client, WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH, 0, NULL, sizeof s->Ndk,
        &s->Ndk, &got, NULL);
    if (!NT_SUCCESS(status) || got != sizeof s->Ndk) {
        LOG("WskControlClient(NDK dispatch) failed with %08X", status);
        return NT_SUCCESS(status) ? STATUS_NOT_SUPPORTED : status;
    }
    KeInitializeEvent(&s->ConnectRequest, SynchronizationEvent, FALSE);
    KeInitializeEvent(&RejectedClose.Event, NotificationEvent, FALSE);
    s->Server.Result = s->Client.Result = STATUS_PENDING;

    if (s->Config.Server) {
        status = OpenSide(s, &s->Server, "server", s->Config.ServerIf);
        if (!NT_SUCCESS(status))
            return status;
        SyncReset(&s->Server.Sync);
        status = SyncFinish(&s->Server.Sync, s->Server.Adapter->Dispatch->NdkCreateListener(
                                                 s->Server.Adapter, ConnectEvent, s, CreateDone,
                                                 &s->Server.Sync, &s->Server.Listener));
        if (!NT_SUCCESS(status))
            return status;
        SockaddrOf(&addr, s->Config.ServerAddr, s->Config.Port);
        SyncReset(&s->Server.Sync);
        status = SyncFinish(&s->Server.Sync, s->Server.Listener->Dispatch->NdkListen(
                                                 s->Server.Listener, (PSOCKADDR)&addr, sizeof addr,
                                                 RequestDone, &s->Server.Sync));
        if (!NT_SUCCESS(status)) {
            LOG("server: NdkListen failed with %08X", status);
            return status;
        }
        status = PsCreateSystemThread(&s->ServerHandle, THREAD_ALL_ACCESS, NULL, NULL, NULL,
                                      ServerThread, s);
        if (!NT_SUCCESS(status))
            return status;
    }
    if (s->Config.Client) {
        status = OpenSide(s, &s->Client, "client", s->Config.ClientIf);
        if (!NT_SUCCESS(status))
            return status;
        status = PsCreateSystemThread(&s->ClientHandle, THREAD_ALL_ACCESS, NULL, NULL, NULL,
                                      ClientThread, s);
    }
    return status;
}

NTSTATUS DriverEntry(PDRIVER_OBJECT DriverObject, PUNICODE_STRING RegistryPath)
{
    NTSTATUS status;
    PAGED_CODE();
    Sample = ExAllocatePool2(POOL_FLAG_NON_PAGED, sizeof *Sample, SAMPLE_TAG);
    if (!Sample)
        return STATUS_INSUFFICIENT_RESOURCES;
    status = Start(Sample, DriverObject, RegistryPath);
    if (!NT_SUCCESS(status)) {
        LOG("DriverEntry failed with %08X", status);
        /* A failed DriverEntry is not unloaded: release everything here.
         * Threads already started end on their own (their waits time out). */
        if (Sample->ServerHandle)
            KeSetEvent(&Sample->ConnectRequest, IO_NO_INCREMENT, FALSE);
        Cleanup(Sample);
        Sample = NULL;
        return status;
    }
    DriverObject->DriverUnload = SampleUnload;
    return STATUS_SUCCESS;
}

/*
 * ndk.h - the Linux entry points that NDKPI leaves to the platform.
 *
 * On Windows, NDIS opens and closes NDK adapters (OPEN_NDK_ADAPTER_HANDLER /
 * CLOSE_NDK_ADAPTER_HANDLER). Here a consumer lists the adapters, opens one by
 * interface name or by one of its IP addresses, and closes it with a blocking
 * call. Everything else goes through the NDKPI dispatch tables of ndkpi.h.
 *
 * Memory: NdkRegisterMr and NdkBuildLAM take an MDL, laid out as the
 * Windows x64 MDL (ndkpi.h). libndk reads Next, StartVa, ByteOffset and
 * ByteCount: each MDL of a chain describes a virtually contiguous buffer
 * (starting at StartVa + ByteOffset) that the caller keeps mapped while it
 * is registered; MmGetMdlVirtualAddress() and MmGetMdlByteCount() read it
 * as on Windows. The provider uses only the virtual range: TOs on the wire
 * are these virtual addresses.
 *
 * Adapters: libndk's software iWARP provider exposes one adapter per network
 * interface that has at least one IPv4 or IPv6 address (loopback included).
 * Its addresses are the interface's addresses; on a loopback interface every
 * address of 127.0.0.0/8 counts as local. Connections run over TCP and speak
 * MPA revision 2 (RFC 5044 + RFC 6581), DDP and RDMAP, so Linux siw and iWARP
 * RNICs can be peers.
 */
#ifndef NDK_NDK_H
#define NDK_NDK_H

#include <netinet/in.h>
#include <net/if.h>

#include <ndk/ndkpi.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define NDK_API __attribute__((visibility("default")))
#else
#define NDK_API
#endif

/* The status codes of the platform entry points (STATUS_NOT_FOUND,
 * STATUS_INVALID_NETWORK_RESPONSE) are in ndk/ndkstatus.h with the others. */

/* The NDK version libndk implements: 2.1. Requests for major 1 (minor <= 2)
 * are served at 1.2, requests for major 2 (minor <= 1) at 2.1 (rules V1 and
 * V3, docs/rules.md); the dispatch tables are the same superset either way. */
#define NDK_PROVIDER_MAJOR_VERSION 2
#define NDK_PROVIDER_MINOR_VERSION 1

/* An IPv4 or IPv6 socket address, as NDKPI passes them. */
typedef union _NDK_SOCKADDR {
    struct sockaddr sa;
    struct sockaddr_in in4;
    struct sockaddr_in6 in6;
} NDK_SOCKADDR;

#define NDK_MAX_ADAPTER_ADDRESSES 16

#define NDK_ADAPTER_DESC_UP 0x1       /* the interface is up */
#define NDK_ADAPTER_DESC_LOOPBACK 0x2 /* the interface is a loopback interface */

typedef struct _NDK_ADAPTER_DESCRIPTION {
    char Name[IF_NAMESIZE]; /* interface name: "lo", "eth0", ... */
    ULONG IfIndex;          /* kernel interface index */
    ULONG Flags;            /* NDK_ADAPTER_DESC_* */
    ULONG Mtu;              /* interface MTU in bytes */
    ULONG AddressCount;     /* valid entries in Addresses (at most NDK_MAX_ADAPTER_ADDRESSES) */
    NDK_SOCKADDR Addresses[NDK_MAX_ADAPTER_ADDRESSES]; /* port 0 */
} NDK_ADAPTER_DESCRIPTION;

/*
 * Lists the adapters. *pCount in: entries available at pList (pList may be
 * NULL when *pCount is 0); out: the number of adapters.
 * Returns STATUS_SUCCESS, or STATUS_BUFFER_TOO_SMALL when more adapters exist
 * than fit (the first *pCount-in entries are filled), or
 * STATUS_INSUFFICIENT_RESOURCES when the interface list cannot be read.
 */
NDK_API NTSTATUS ndk_list_adapters(NDK_ADAPTER_DESCRIPTION *pList, ULONG *pCount);

/* Options for ndk_open_adapter. Zero in any field means "the default". */
typedef struct _NDK_OPEN_OPTIONS {
    ULONG Size;                /* sizeof(NDK_OPEN_OPTIONS) */
    ULONG Flags;               /* NDK_OPEN_FLAG_* */
    ULONG TcpConnectTimeoutMs; /* TCP handshake of NdkConnect*; default 20000 -> STATUS_IO_TIMEOUT */
    ULONG MpaReplyTimeoutMs;   /* initiator waiting for the MPA Reply; default 10000 (as siw)
                                  -> STATUS_IO_TIMEOUT */
    ULONG MpaRequestTimeoutMs; /* responder waiting for the MPA Request after the TCP accept;
                                  default 5000 (as siw); the socket is then closed silently */
    ULONG RtrTimeoutMs;        /* NdkAccept waiting for the initiator's NdkCompleteConnect (its
                                  RTR); default 10000 -> STATUS_IO_TIMEOUT */
    ULONG DisconnectTimeoutMs; /* NdkDisconnect waiting for the peer's FIN; default 10000
                                  -> STATUS_IO_TIMEOUT */
    ULONG ListenBacklog;       /* per listener: connect events delivered and not yet accepted,
                                  rejected or closed; further requests are refused; default 128 */
    ULONG MaxHalfOpen;         /* per listener: TCP connections still waiting for their MPA
                                  Request; a further one resets the one that waited
                                  longest; default 1024 */
    ULONG SocketSendBufferBytes;    /* SO_SNDBUF of every connection's socket (Linux doubles
                                       it and enforces its minimum); default: the system's,
                                       which TCP autotunes */
    ULONG SocketReceiveBufferBytes; /* SO_RCVBUF likewise (set before the handshake, so the
                                       window scale fits); default: the system's */
    ULONG ReceiveGraceMs; /* a Send that finds no posted receive (nor one in the SRQ):
                             stop reading that connection, so TCP holds the rest back
                             and the peer is flow-controlled, until a receive is posted
                             or this long has passed, and only then end it with the
                             Terminate RFC 5040 asks for (DDP untagged, no buffer);
                             default 1000, enough for a receive posted from the accept
                             completion; NDK_OPEN_FLAG_NO_RECEIVE_GRACE: at once */
    /*
     * Dead-peer detection (docs/behaviour.md "Dead peers"), set on every
     * connection's socket. A peer whose host vanished or whose path broke
     * never sends a FIN or RST: TCP_USER_TIMEOUT ends the connection when
     * sent data stays unacknowledged that long, and keepalive probes find
     * an idle connection's dead peer (with a user timeout, the connection
     * ends once probes went unanswered for that long). The connection then
     * fails as on any socket error: the disconnect event with
     * NDK_DISCONNECT_REASON_ABORTED, outstanding requests completed with
     * STATUS_CANCELLED, a pending NdkDisconnect with STATUS_IO_TIMEOUT or
     * STATUS_CONNECTION_ABORTED. The defaults suit storage traffic: a dead
     * peer is noticed within about 30 s, busy or idle, where the system's
     * settings take 15 min (busy) or never (idle).
     * NDK_OPEN_OPTION_SYSTEM (all bits set) in any of these four leaves the
     * system's setting (no TCP_USER_TIMEOUT; for the idle time: keepalive
     * off).
     */
    ULONG TcpUserTimeoutMs;         /* TCP_USER_TIMEOUT; default 30000 */
    ULONG KeepAliveIdleSeconds;     /* SO_KEEPALIVE with TCP_KEEPIDLE: the first probe after
                                       this long without traffic; default 10 */
    ULONG KeepAliveIntervalSeconds; /* TCP_KEEPINTVL between unanswered probes; default 5 */
    ULONG KeepAliveProbes;          /* TCP_KEEPCNT: unanswered probes that end the connection
                                       (without a user timeout); default 3 */
    ULONG VerifyConnectEventMs; /* verifier (NDK_OPEN_FLAG_VERIFY): a connect event not answered
                                   by NdkAccept, NdkReject or a close within this time is
                                   reported (rule N3); default 5000 */
    ULONG VerifyDeferMs;        /* verifier: NDK_OP_FLAG_DEFER requests not followed by a post
                                   without DEFER on that queue within this time are reported
                                   (rule D5); default 1000 */
    ULONG MaxEngines; /* progress engines of the interface (each a thread pinned to one CPU,
                         with its own event loop): at most this many; default one per CPU
                         of the opening thread's affinity mask (at most 64). Read by the
                         open that starts the interface's engines (the first of its
                         instances); later instances share them */
    ULONG EngineSpinMicroseconds; /* an engine that just handled socket input looks for more
                                     this long, yielding its CPU between looks, before it
                                     sleeps: a reply that comes meanwhile costs no wake-up
                                     (docs/behaviour.md, Engine spin); default 50, at most
                                     1000; NDK_OPEN_FLAG_NO_ENGINE_SPIN: none. Read like
                                     MaxEngines, by the open that starts the engines */
} NDK_OPEN_OPTIONS;

/* In a field of NDK_OPEN_OPTIONS that allows it: leave the system's setting. */
#define NDK_OPEN_OPTION_SYSTEM ((ULONG)0xFFFFFFFF)

#define NDK_OPEN_FLAG_REQUEST_CRC 0x1 /* ask for MPA CRC32c in Requests and Replies (C=1) */
#define NDK_OPEN_FLAG_NO_P2P 0x2      /* initiator: client/server model, no RTR (A=0), as siw */
#define NDK_OPEN_FLAG_MPA_REV1 0x4    /* initiator: MPA revision 1 Requests, no IRD/ORD word */
#define NDK_OPEN_FLAG_RELAXED_TX_GATE 0x10 /* responder to a client/server initiator: send
                                              after the initiator's first FPDU or 100 ms
                                              after the Reply, whichever comes first, for
                                              servers that speak first (RFC 5044 holds
                                              sending until the first FPDU; a siw
                                              initiator fails on data right behind the
                                              Reply, which the delay avoids) */
#define NDK_OPEN_FLAG_FRMR_NEW_TOKEN 0x20 /* every NdkFastRegister gives the MR a new remote
                                             token (NdkGetRemoteTokenFromMr answers it once
                                             the post returned), so a peer holding an older
                                             one is refused for good. Default: a fast-register
                                             MR keeps the token NdkInitializeFastRegisterMr
                                             gave it, as consumers that cache that token
                                             expect; an access through it is refused only
                                             while the MR is invalidated (NdkInvalidate,
                                             NdkSendAndInvalidate), until its next
                                             NdkFastRegister */
#define NDK_OPEN_FLAG_NO_RECEIVE_GRACE 0x40 /* a Send that finds no posted receive ends the
                                               connection at once (no ReceiveGraceMs) */
#define NDK_OPEN_FLAG_VERIFY 0x80 /* the NDK verifier checks every call of this adapter's
                                     consumer against NDKPI's rules and reports each violation
                                     (docs/verifier.md); also for every adapter of a process
                                     run with NDK_VERIFY=1 */
#define NDK_OPEN_FLAG_VERIFY_ABORT 0x100 /* the verifier, and every report ends the process with
                                           abort(), as a bug check (NDK_VERIFY=abort) */
#define NDK_OPEN_FLAG_NO_SHM 0x200 /* keep this adapter's connections on TCP even when the peer is
                                      a libndk process of this host and user (the same-host
                                      shared-memory path, docs/shm.md; also for every adapter
                                      of a process run with NDK_SHM=0): its listeners offer
                                      no fast path and its initiators ask for none */
#define NDK_OPEN_FLAG_BUSY_POLL 0x8   /* NdkGetCqResults[Ex] on an empty CQ reads the sockets of
                                         its QPs itself: lowest latency, no thread hop, for
                                         consumers that poll their CQs; while they poll, the
                                         progress thread leaves those sockets' input to them
                                         (until an ArmCq, or 1-2 ms without a poll) */
#define NDK_OPEN_FLAG_NO_ENGINE_SPIN 0x400 /* engines sleep as soon as they have nothing to
                                              do (no EngineSpinMicroseconds): the least CPU,
                                              a wake-up per message that finds them asleep;
                                              also for every adapter of a process run with
                                              NDK_ENGINE_SPIN_US=0 */

/*
 * ProviderDisconnectReason of NDK_FN_DISCONNECT_EVENT_CALLBACK_EX (NDKPI
 * leaves the values to the provider; libndk always gives one of these).
 */
#define NDK_DISCONNECT_REASON_PEER_CLOSED 1 /* the peer closed gracefully: its FIN, after a
                                               whole FPDU */
#define NDK_DISCONNECT_REASON_ABORTED 2     /* the connection was reset or broken: a RST, a
                                               socket error, the stream ending inside an
                                               FPDU */
#define NDK_DISCONNECT_REASON_TERMINATE_RECEIVED 3 /* the peer ended it with an RDMAP
                                                      Terminate */
#define NDK_DISCONNECT_REASON_TERMINATE_SENT 4 /* libndk ended it with a Terminate: what the
                                                  peer sent broke a protocol or protection
                                                  rule, or memory an inbound Read named was
                                                  deregistered before its response left */
#define NDK_DISCONNECT_REASON_LOCAL_ERROR 5 /* a CQ of the QP overflowed, or its read queues
                                               could not be allocated: the QP is unusable
                                               and the connection was reset */

/*
 * Opens an instance of an interface's adapter, by interface name ("lo") or
 * by one of its addresses ("127.0.0.1", "::1"), at the requested version:
 * Version.Major is the major version wanted and Version.Minor the lowest
 * minor version accepted (rule V1). pOptions may be NULL. Every call
 * returns a new instance; objects of one instance may be used with those of
 * another instance of the same interface (docs/behaviour.md).
 *
 * Returns STATUS_SUCCESS with *ppAdapter set; STATUS_INVALID_PARAMETER (NULL
 * name or output, bad options Size); STATUS_NOT_FOUND (no interface has that
 * name or address, or the interface has no IPv4/IPv6 address: it is no
 * adapter); NDIS_STATUS_ADAPTER_NOT_READY (the interface has an address but
 * is down); NDIS_STATUS_BAD_VERSION (version not supported);
 * STATUS_INSUFFICIENT_RESOURCES.
 */
NDK_API NTSTATUS ndk_open_adapter(const char *NameOrAddress, NDK_VERSION Version,
                                const NDK_OPEN_OPTIONS *pOptions, NDK_ADAPTER **ppAdapter);

/*
 * Closes an adapter instance; blocks until every callback of every object
 * created through it has returned (rule L12). Close pending objects'
 * completions are delivered before it returns; objects the consumer never
 * closed are torn down without callbacks; other instances of the interface
 * keep working. When it is the interface's last open instance, a
 * connection it rejected (NdkReject, or a Request asking for markers) is
 * closed only after the initiator closed it, so that our FIN cannot
 * overtake the reject: the call may wait for that, at most 500 ms. Must
 * not be called from inside a callback.
 */
NDK_API VOID ndk_close_adapter(NDK_ADAPTER *pAdapter);

/*
 * The number of the adapter's objects of one type that are open: created
 * (their create call returned, even if its completion is still pending) and
 * not yet closed (a pending close counts until its completion is on its
 * way: queued or running).
 * NdkObjectTypeUndefined counts every type; the adapter itself is never
 * counted. For hosts that report what a consumer left open before they
 * close the adapter for it; 0 for a NULL or unknown adapter.
 */
NDK_API ULONG ndk_adapter_object_count(NDK_ADAPTER *pAdapter, NDK_OBJECT_TYPE Type);

/*
 * The NDK verifier (docs/verifier.md). Each violation is reported once per
 * object and rule, as one line on stderr that starts with "ndk verifier: ",
 * then the rule's identifier (docs/rules.md) and words, the call, the
 * object and its adapter, what was found and what to do instead. The
 * callback, when installed, gets the same line (without a newline) and
 * the rule's identifier ("N1"); it runs on the thread that made the
 * offending call (or the verifier's watchdog, or the receive path), maybe
 * on several threads at once, must not call libndk, and is process-wide:
 * NULL removes it.
 */
typedef VOID (*NDK_FN_VERIFIER_REPORT)(PVOID Context, NDK_ADAPTER *pAdapter, const char *Rule,
                                       const char *Line);
NDK_API VOID ndk_verifier_set_report_callback(NDK_FN_VERIFIER_REPORT Report, PVOID Context);
/* The number of reports made in this process so far, by every adapter. */
NDK_API ULONG ndk_verifier_findings(VOID);

/* Whether connections of this adapter may carry their operations through
 * shared memory (docs/shm.md); *pDetail (optional, a static string): the
 * mode when TRUE ("single copy", or why payloads would be copied), why not
 * when FALSE (NDK_SHM=0, NDK_OPEN_FLAG_NO_SHM, a kernel without memfd or
 * pidfd). A local check only: it says nothing of any peer. */
NDK_API BOOLEAN ndk_shm_available(NDK_ADAPTER *pAdapter, const char **pDetail);

/* "STATUS_CONNECTION_REFUSED" for 0xC0000236, or "0x........" for unknown
 * values (in a static buffer per thread). */
NDK_API const char *ndk_status_name(NTSTATUS Status);

#ifdef __cplusplus
}
#endif

#endif

/*
 * ndkstatus.h - every NTSTATUS value libndk's public headers define, with
 * its number (ntstatus.h / ndis.h numbers; the NDK pages only name them):
 * first as the STATUS_* macros consumers use, each guarded so a
 * Windows-compatibility header may define it first (the WDK kit's
 * ntstatus.h includes this header and adds only the codes NDKPI does not
 * name), then as NDK_STATUS_LIST(X), which expands X(name, value) for each,
 * in numeric order within success, warning and error.
 *
 * ndk_status_name (ndk.h) is made from the list, and libndk's build asserts
 * that every macro equals its entry there. The two NDIS aliases (NDIS_STATUS_SUCCESS, NDIS_STATUS_RESOURCES) share a
 * number with an entry and are named by it.
 */
#ifndef NDK_NDKSTATUS_H
#define NDK_NDKSTATUS_H

/* Success and informational codes are >= 0, so STATUS_PENDING counts as
 * success; warnings (0x8...) and errors (0xC...) are negative. */
#ifndef NT_SUCCESS
#define NT_SUCCESS(s) (((NTSTATUS)(s)) >= 0)
#endif

#ifndef STATUS_SUCCESS
#define STATUS_SUCCESS ((NTSTATUS)0x00000000L)
#endif
#ifndef STATUS_PENDING
#define STATUS_PENDING ((NTSTATUS)0x00000103L)
#endif
#ifndef STATUS_BUFFER_OVERFLOW
#define STATUS_BUFFER_OVERFLOW ((NTSTATUS)0x80000005L)
#endif
#ifndef STATUS_UNSUCCESSFUL
#define STATUS_UNSUCCESSFUL ((NTSTATUS)0xC0000001L)
#endif
#ifndef STATUS_ACCESS_VIOLATION
#define STATUS_ACCESS_VIOLATION ((NTSTATUS)0xC0000005L)
#endif
#ifndef STATUS_INVALID_PARAMETER
#define STATUS_INVALID_PARAMETER ((NTSTATUS)0xC000000DL)
#endif
#ifndef STATUS_INVALID_DEVICE_REQUEST
#define STATUS_INVALID_DEVICE_REQUEST ((NTSTATUS)0xC0000010L)
#endif
#ifndef STATUS_NO_MEMORY
#define STATUS_NO_MEMORY ((NTSTATUS)0xC0000017L)
#endif
#ifndef STATUS_BUFFER_TOO_SMALL
#define STATUS_BUFFER_TOO_SMALL ((NTSTATUS)0xC0000023L)
#endif
#ifndef STATUS_INVALID_PARAMETER_MIX
#define STATUS_INVALID_PARAMETER_MIX ((NTSTATUS)0xC0000030L)
#endif
#ifndef STATUS_SHARING_VIOLATION
#define STATUS_SHARING_VIOLATION ((NTSTATUS)0xC0000043L)
#endif
#ifndef STATUS_INSUFFICIENT_RESOURCES
#define STATUS_INSUFFICIENT_RESOURCES ((NTSTATUS)0xC000009AL)
#endif
#ifndef STATUS_IO_TIMEOUT
#define STATUS_IO_TIMEOUT ((NTSTATUS)0xC00000B5L)
#endif
#ifndef STATUS_NOT_SUPPORTED
#define STATUS_NOT_SUPPORTED ((NTSTATUS)0xC00000BBL)
#endif
#ifndef STATUS_INVALID_NETWORK_RESPONSE
/* The peer's MPA Reply was malformed or asked for something libndk cannot do
 * (markers, a revision or RTR type it does not support); ndk.h. */
#define STATUS_INVALID_NETWORK_RESPONSE ((NTSTATUS)0xC00000C3L)
#endif
#ifndef STATUS_INTERNAL_ERROR
#define STATUS_INTERNAL_ERROR ((NTSTATUS)0xC00000E5L)
#endif
#ifndef STATUS_CANCELLED
#define STATUS_CANCELLED ((NTSTATUS)0xC0000120L)
#endif
#ifndef STATUS_REMOTE_RESOURCES
#define STATUS_REMOTE_RESOURCES ((NTSTATUS)0xC000013DL)
#endif
#ifndef STATUS_INVALID_ADDRESS
#define STATUS_INVALID_ADDRESS ((NTSTATUS)0xC0000141L)
#endif
#ifndef STATUS_INVALID_DEVICE_STATE
#define STATUS_INVALID_DEVICE_STATE ((NTSTATUS)0xC0000184L)
#endif
#ifndef STATUS_INVALID_BUFFER_SIZE
#define STATUS_INVALID_BUFFER_SIZE ((NTSTATUS)0xC0000206L)
#endif
#ifndef STATUS_TOO_MANY_ADDRESSES
#define STATUS_TOO_MANY_ADDRESSES ((NTSTATUS)0xC0000209L)
#endif
#ifndef STATUS_ADDRESS_ALREADY_EXISTS
#define STATUS_ADDRESS_ALREADY_EXISTS ((NTSTATUS)0xC000020AL)
#endif
#ifndef STATUS_CONNECTION_DISCONNECTED
#define STATUS_CONNECTION_DISCONNECTED ((NTSTATUS)0xC000020CL)
#endif
#ifndef STATUS_CONNECTION_RESET
#define STATUS_CONNECTION_RESET ((NTSTATUS)0xC000020DL)
#endif
#ifndef STATUS_NOT_FOUND
#define STATUS_NOT_FOUND ((NTSTATUS)0xC0000225L) /* ndk.h: no adapter has that name or address */
#endif
#ifndef STATUS_CONNECTION_REFUSED
#define STATUS_CONNECTION_REFUSED ((NTSTATUS)0xC0000236L)
#endif
#ifndef STATUS_CONNECTION_INVALID
#define STATUS_CONNECTION_INVALID ((NTSTATUS)0xC000023AL)
#endif
#ifndef STATUS_NETWORK_UNREACHABLE
#define STATUS_NETWORK_UNREACHABLE ((NTSTATUS)0xC000023CL)
#endif
#ifndef STATUS_HOST_UNREACHABLE
#define STATUS_HOST_UNREACHABLE ((NTSTATUS)0xC000023DL)
#endif
#ifndef STATUS_REQUEST_ABORTED
#define STATUS_REQUEST_ABORTED ((NTSTATUS)0xC0000240L)
#endif
#ifndef STATUS_CONNECTION_ABORTED
#define STATUS_CONNECTION_ABORTED ((NTSTATUS)0xC0000241L)
#endif
#ifndef STATUS_IMPLEMENTATION_LIMIT
#define STATUS_IMPLEMENTATION_LIMIT ((NTSTATUS)0xC000042BL)
#endif

/* Results of opening an adapter (NDIS names on Windows). */
#ifndef NDIS_STATUS_SUCCESS
#define NDIS_STATUS_SUCCESS ((NTSTATUS)0x00000000L)
#endif
#ifndef NDIS_STATUS_RESOURCES
#define NDIS_STATUS_RESOURCES ((NTSTATUS)0xC000009AL) /* = STATUS_INSUFFICIENT_RESOURCES */
#endif
#ifndef NDIS_STATUS_BAD_VERSION
#define NDIS_STATUS_BAD_VERSION ((NTSTATUS)0xC0010004L)
#endif
#ifndef NDIS_STATUS_ADAPTER_NOT_READY
#define NDIS_STATUS_ADAPTER_NOT_READY ((NTSTATUS)0xC0010011L)
#endif

/* The same codes as a list, for tables (ndk_status_name). */
#define NDK_STATUS_LIST(X)                                                                    \
    X(STATUS_SUCCESS, 0x00000000)                                                             \
    X(STATUS_PENDING, 0x00000103)                                                             \
    X(STATUS_BUFFER_OVERFLOW, 0x80000005)                                                     \
    X(STATUS_UNSUCCESSFUL, 0xC0000001)                                                        \
    X(STATUS_ACCESS_VIOLATION, 0xC0000005)                                                    \
    X(STATUS_INVALID_PARAMETER, 0xC000000D)                                                   \
    X(STATUS_INVALID_DEVICE_REQUEST, 0xC0000010)                                              \
    X(STATUS_NO_MEMORY, 0xC0000017)                                                           \
    X(STATUS_BUFFER_TOO_SMALL, 0xC0000023)                                                    \
    X(STATUS_INVALID_PARAMETER_MIX, 0xC0000030)                                               \
    X(STATUS_SHARING_VIOLATION, 0xC0000043)                                                   \
    X(STATUS_INSUFFICIENT_RESOURCES, 0xC000009A)                                              \
    X(STATUS_IO_TIMEOUT, 0xC00000B5)                                                          \
    X(STATUS_NOT_SUPPORTED, 0xC00000BB)                                                       \
    X(STATUS_INVALID_NETWORK_RESPONSE, 0xC00000C3)                                            \
    X(STATUS_INTERNAL_ERROR, 0xC00000E5)                                                      \
    X(STATUS_CANCELLED, 0xC0000120)                                                           \
    X(STATUS_REMOTE_RESOURCES, 0xC000013D)                                                    \
    X(STATUS_INVALID_ADDRESS, 0xC0000141)                                                     \
    X(STATUS_INVALID_DEVICE_STATE, 0xC0000184)                                                \
    X(STATUS_INVALID_BUFFER_SIZE, 0xC0000206)                                                 \
    X(STATUS_TOO_MANY_ADDRESSES, 0xC0000209)                                                  \
    X(STATUS_ADDRESS_ALREADY_EXISTS, 0xC000020A)                                              \
    X(STATUS_CONNECTION_DISCONNECTED, 0xC000020C)                                             \
    X(STATUS_CONNECTION_RESET, 0xC000020D)                                                    \
    X(STATUS_NOT_FOUND, 0xC0000225)                                                           \
    X(STATUS_CONNECTION_REFUSED, 0xC0000236)                                                  \
    X(STATUS_CONNECTION_INVALID, 0xC000023A)                                                  \
    X(STATUS_NETWORK_UNREACHABLE, 0xC000023C)                                                 \
    X(STATUS_HOST_UNREACHABLE, 0xC000023D)                                                    \
    X(STATUS_REQUEST_ABORTED, 0xC0000240)                                                     \
    X(STATUS_CONNECTION_ABORTED, 0xC0000241)                                                  \
    X(STATUS_IMPLEMENTATION_LIMIT, 0xC000042B)                                                \
    X(NDIS_STATUS_BAD_VERSION, 0xC0010004)                                                    \
    X(NDIS_STATUS_ADAPTER_NOT_READY, 0xC0010011)

#endif

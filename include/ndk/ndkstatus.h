/*
 * ndkstatus.h - every NTSTATUS value libndk's public headers define, each
 * once, with its number (ntstatus.h / ndis.h numbers; the NDK pages only
 * name them). NDK_STATUS_LIST(X) expands X(name, value) for each, in
 * numeric order within success, warning and error.
 *
 * ndk_status_name (ndk.h) is made from this list. The STATUS_* macros of
 * ndkpi.h and ndk.h stay macros, each guarded so a Windows-compatibility
 * header may define it first; libndk's build asserts that every one of
 * them equals its entry here. The two NDIS aliases of ndkpi.h
 * (NDIS_STATUS_SUCCESS, NDIS_STATUS_RESOURCES) share a number with an
 * entry and are named by it.
 */
#ifndef NDK_NDKSTATUS_H
#define NDK_NDKSTATUS_H

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

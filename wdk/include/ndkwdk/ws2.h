/*
 * ndkwdk/ws2.h - the socket address types of ws2def.h, ws2ipdef.h,
 * inaddr.h and in6addr.h, and the address conversions of ip2string.h.
 *
 * Address families are Linux's (AF_INET 2, AF_INET6 10; Winsock's AF_INET6
 * is 23), because the addresses go to libndk and the Linux stack as they
 * are. IN_ADDR and IN6_ADDR have the Windows members (S_un.S_addr, u.Byte,
 * s_addr, s6_addr) and layouts; a source that includes <netinet/in.h>
 * before the kit's headers gets glibc's definitions instead (the same
 * layouts, the Linux member names).
 */
#ifndef NDKWDK_WS2_H
#define NDKWDK_WS2_H

#include <ntdef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef USHORT ADDRESS_FAMILY;
#ifndef AF_UNSPEC
#define AF_UNSPEC 0
#endif
#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif

#ifndef _NETINET_IN_H
typedef struct in_addr {
    union {
        struct {
            UCHAR s_b1, s_b2, s_b3, s_b4;
        } S_un_b;
        struct {
            USHORT s_w1, s_w2;
        } S_un_w;
        ULONG S_addr;
    } S_un;
} IN_ADDR, *PIN_ADDR;
#define s_addr S_un.S_addr

typedef struct in6_addr {
    union {
        UCHAR Byte[16];
        USHORT Word[8];
    } u;
} IN6_ADDR, *PIN6_ADDR;
#define s6_addr u.Byte

typedef struct sockaddr_in {
    ADDRESS_FAMILY sin_family;
    USHORT sin_port;
    IN_ADDR sin_addr;
    CHAR sin_zero[8];
} SOCKADDR_IN, *PSOCKADDR_IN;

typedef struct sockaddr_in6 {
    ADDRESS_FAMILY sin6_family;
    USHORT sin6_port;
    ULONG sin6_flowinfo;
    IN6_ADDR sin6_addr;
    ULONG sin6_scope_id;
} SOCKADDR_IN6, *PSOCKADDR_IN6;
#else
typedef struct in_addr IN_ADDR, *PIN_ADDR;
typedef struct in6_addr IN6_ADDR, *PIN6_ADDR;
typedef struct sockaddr_in SOCKADDR_IN, *PSOCKADDR_IN;
typedef struct sockaddr_in6 SOCKADDR_IN6, *PSOCKADDR_IN6;
#endif
typedef CONST IN_ADDR *PCIN_ADDR;
typedef CONST IN6_ADDR *PCIN6_ADDR;
typedef struct sockaddr_in6 SOCKADDR_IN6_LH, *PSOCKADDR_IN6_LH;
typedef struct sockaddr_storage SOCKADDR_STORAGE, *PSOCKADDR_STORAGE;

typedef union _SOCKADDR_INET {
    SOCKADDR_IN Ipv4;
    SOCKADDR_IN6 Ipv6;
    ADDRESS_FAMILY si_family;
} SOCKADDR_INET, *PSOCKADDR_INET;

/* Windows leaves room for a port (and a scope); glibc's values are smaller. */
#ifndef INET_ADDRSTRLEN
#define INET_ADDRSTRLEN 22
#endif
#ifndef INET6_ADDRSTRLEN
#define INET6_ADDRSTRLEN 65
#endif

/* ---- interface identifiers (ifdef.h) ---- */
/* The interface index is the Linux interface index (docs/porting.md). */
typedef ULONG NET_IFINDEX, *PNET_IFINDEX;
typedef ULONG IF_INDEX, *PIF_INDEX;
typedef USHORT NET_IFTYPE, *PNET_IFTYPE;
typedef ULONG IFTYPE;
#define NET_IFINDEX_UNSPECIFIED ((NET_IFINDEX)0)
typedef union _NET_LUID_LH {
    ULONG64 Value;
    struct {
        ULONG64 Reserved : 24;
        ULONG64 NetLuidIndex : 24;
        ULONG64 IfType : 16;
    } Info;
} NET_LUID_LH, *PNET_LUID_LH, NET_LUID, *PNET_LUID, IF_LUID, *PIF_LUID;

/* ---- ip2string.h. Ports are in network byte order, as on Windows. ---- */
NTSTATUS RtlIpv4StringToAddressA(PCSTR S, BOOLEAN Strict, PCSTR *Terminator, IN_ADDR *Addr);
NTSTATUS RtlIpv4StringToAddressW(PCWSTR S, BOOLEAN Strict, PCWSTR *Terminator, IN_ADDR *Addr);
NTSTATUS RtlIpv4StringToAddressExA(PCSTR AddressString, BOOLEAN Strict, IN_ADDR *Address,
                                   PUSHORT Port);
NTSTATUS RtlIpv4StringToAddressExW(PCWSTR AddressString, BOOLEAN Strict, IN_ADDR *Address,
                                   PUSHORT Port);
NTSTATUS RtlIpv6StringToAddressA(PCSTR S, PCSTR *Terminator, IN6_ADDR *Addr);
NTSTATUS RtlIpv6StringToAddressW(PCWSTR S, PCWSTR *Terminator, IN6_ADDR *Addr);
NTSTATUS RtlIpv6StringToAddressExA(PCSTR AddressString, IN6_ADDR *Address, PULONG ScopeId,
                                   PUSHORT Port);
NTSTATUS RtlIpv6StringToAddressExW(PCWSTR AddressString, IN6_ADDR *Address, PULONG ScopeId,
                                   PUSHORT Port);
/* Return a pointer to the terminating NUL written into S. */
PSTR RtlIpv4AddressToStringA(const IN_ADDR *Addr, PSTR S);
PWSTR RtlIpv4AddressToStringW(const IN_ADDR *Addr, PWSTR S);
PSTR RtlIpv6AddressToStringA(const IN6_ADDR *Addr, PSTR S);
PWSTR RtlIpv6AddressToStringW(const IN6_ADDR *Addr, PWSTR S);
/* *AddressStringLength in: characters available; out: characters needed,
 * the NUL included (STATUS_INVALID_PARAMETER when too small). */
NTSTATUS RtlIpv4AddressToStringExA(const IN_ADDR *Address, USHORT Port, PSTR AddressString,
                                   PULONG AddressStringLength);
NTSTATUS RtlIpv4AddressToStringExW(const IN_ADDR *Address, USHORT Port, PWSTR AddressString,
                                   PULONG AddressStringLength);
NTSTATUS RtlIpv6AddressToStringExA(const IN6_ADDR *Address, ULONG ScopeId, USHORT Port,
                                   PSTR AddressString, PULONG AddressStringLength);
NTSTATUS RtlIpv6AddressToStringExW(const IN6_ADDR *Address, ULONG ScopeId, USHORT Port,
                                   PWSTR AddressString, PULONG AddressStringLength);

/* Byte order (the kernel's RtlUshortByteSwap family). */
#define RtlUshortByteSwap(x) __builtin_bswap16((USHORT)(x))
#define RtlUlongByteSwap(x) __builtin_bswap32((ULONG)(x))
#define RtlUlonglongByteSwap(x) __builtin_bswap64((ULONGLONG)(x))

#ifdef __cplusplus
}
#endif

#endif /* NDKWDK_WS2_H */

/*
 * netioapi.h (libndk WDK kit) - interface identifiers, as far as NDK
 * consumers use them: index <-> LUID <-> name and alias, and GetIfEntry2.
 *
 * Interfaces are Linux's: the index is the Linux interface index; the LUID
 * carries that index (NetLuidIndex) and the interface type (IfType); name
 * and alias are the Linux interface name ("eth0"), where Windows names look
 * like "ethernet_32768" and aliases like "Ethernet 2".
 */
#ifndef NDKWDK_NETIOAPI_H
#define NDKWDK_NETIOAPI_H

#include <ntddk.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef NTSTATUS NETIO_STATUS;
#define IF_MAX_STRING_SIZE 256
#define IF_MAX_PHYS_ADDRESS_LENGTH 32
#define NDIS_IF_MAX_STRING_SIZE IF_MAX_STRING_SIZE

#define IF_TYPE_OTHER 1
#define IF_TYPE_ETHERNET_CSMACD 6
#define IF_TYPE_PPP 23
#define IF_TYPE_SOFTWARE_LOOPBACK 24
#define IF_TYPE_IEEE80211 71
#define IF_TYPE_TUNNEL 131

typedef enum { IfOperStatusUp = 1, IfOperStatusDown, IfOperStatusTesting, IfOperStatusUnknown,
               IfOperStatusDormant, IfOperStatusNotPresent, IfOperStatusLowerLayerDown }
    IF_OPER_STATUS;
typedef enum _NET_IF_ADMIN_STATUS { NET_IF_ADMIN_STATUS_UP = 1, NET_IF_ADMIN_STATUS_DOWN,
                                    NET_IF_ADMIN_STATUS_TESTING } NET_IF_ADMIN_STATUS;
typedef enum _NET_IF_MEDIA_CONNECT_STATE { MediaConnectStateUnknown, MediaConnectStateConnected,
                                           MediaConnectStateDisconnected }
    NET_IF_MEDIA_CONNECT_STATE;
typedef enum { TUNNEL_TYPE_NONE = 0, TUNNEL_TYPE_OTHER = 1 } TUNNEL_TYPE;
typedef enum _NDIS_MEDIUM { NdisMedium802_3 = 0, NdisMediumLoopback = 11 } NDIS_MEDIUM;
typedef enum _NDIS_PHYSICAL_MEDIUM { NdisPhysicalMediumUnspecified = 0,
                                     NdisPhysicalMedium802_3 = 14 } NDIS_PHYSICAL_MEDIUM;
typedef enum _NET_IF_ACCESS_TYPE { NET_IF_ACCESS_LOOPBACK = 1, NET_IF_ACCESS_BROADCAST,
                                   NET_IF_ACCESS_POINT_TO_POINT,
                                   NET_IF_ACCESS_POINT_TO_MULTI_POINT, NET_IF_ACCESS_MAXIMUM }
    NET_IF_ACCESS_TYPE;
typedef enum _NET_IF_DIRECTION_TYPE { NET_IF_DIRECTION_SENDRECEIVE, NET_IF_DIRECTION_SENDONLY,
                                      NET_IF_DIRECTION_RECEIVEONLY, NET_IF_DIRECTION_MAXIMUM }
    NET_IF_DIRECTION_TYPE;
typedef enum _NET_IF_CONNECTION_TYPE { NET_IF_CONNECTION_DEDICATED = 1,
                                       NET_IF_CONNECTION_PASSIVE, NET_IF_CONNECTION_DEMAND,
                                       NET_IF_CONNECTION_MAXIMUM } NET_IF_CONNECTION_TYPE;
typedef GUID NET_IF_NETWORK_GUID;

/* GetIfEntry2 fills the identity, names, addresses, MTU, type, states and
 * link speeds from Linux; statistics and GUIDs are zero. */
typedef struct _MIB_IF_ROW2 {
    NET_LUID InterfaceLuid;
    NET_IFINDEX InterfaceIndex;
    GUID InterfaceGuid;
    WCHAR Alias[IF_MAX_STRING_SIZE + 1];
    WCHAR Description[IF_MAX_STRING_SIZE + 1];
    ULONG PhysicalAddressLength;
    UCHAR PhysicalAddress[IF_MAX_PHYS_ADDRESS_LENGTH];
    UCHAR PermanentPhysicalAddress[IF_MAX_PHYS_ADDRESS_LENGTH];
    ULONG Mtu;
    IFTYPE Type;
    TUNNEL_TYPE TunnelType;
    NDIS_MEDIUM MediaType;
    NDIS_PHYSICAL_MEDIUM PhysicalMediumType;
    NET_IF_ACCESS_TYPE AccessType;
    NET_IF_DIRECTION_TYPE DirectionType;
    struct {
        BOOLEAN HardwareInterface : 1;
        BOOLEAN FilterInterface : 1;
        BOOLEAN ConnectorPresent : 1;
        BOOLEAN NotAuthenticated : 1;
        BOOLEAN NotMediaConnected : 1;
        BOOLEAN Paused : 1;
        BOOLEAN LowPower : 1;
        BOOLEAN EndPointInterface : 1;
    } InterfaceAndOperStatusFlags;
    IF_OPER_STATUS OperStatus;
    NET_IF_ADMIN_STATUS AdminStatus;
    NET_IF_MEDIA_CONNECT_STATE MediaConnectState;
    NET_IF_NETWORK_GUID NetworkGuid;
    NET_IF_CONNECTION_TYPE ConnectionType;
    ULONG64 TransmitLinkSpeed;
    ULONG64 ReceiveLinkSpeed;
    ULONG64 InOctets;
    ULONG64 InUcastPkts;
    ULONG64 InNUcastPkts;
    ULONG64 InDiscards;
    ULONG64 InErrors;
    ULONG64 InUnknownProtos;
    ULONG64 InUcastOctets;
    ULONG64 InMulticastOctets;
    ULONG64 InBroadcastOctets;
    ULONG64 OutOctets;
    ULONG64 OutUcastPkts;
    ULONG64 OutNUcastPkts;
    ULONG64 OutDiscards;
    ULONG64 OutErrors;
    ULONG64 OutUcastOctets;
    ULONG64 OutMulticastOctets;
    ULONG64 OutBroadcastOctets;
    ULONG64 OutQLen;
} MIB_IF_ROW2, *PMIB_IF_ROW2;

/* STATUS_NOT_FOUND (ERROR_FILE_NOT_FOUND in user mode) for an unknown
 * interface; STATUS_INVALID_PARAMETER for NULL outputs; names that do not
 * fit: STATUS_BUFFER_TOO_SMALL. */
NETIO_STATUS ConvertInterfaceIndexToLuid(NET_IFINDEX InterfaceIndex, PNET_LUID InterfaceLuid);
NETIO_STATUS ConvertInterfaceLuidToIndex(CONST NET_LUID *InterfaceLuid,
                                         PNET_IFINDEX InterfaceIndex);
NETIO_STATUS ConvertInterfaceLuidToNameA(CONST NET_LUID *InterfaceLuid, PSTR InterfaceName,
                                         SIZE_T Length);
NETIO_STATUS ConvertInterfaceLuidToNameW(CONST NET_LUID *InterfaceLuid, PWSTR InterfaceName,
                                         SIZE_T Length);
NETIO_STATUS ConvertInterfaceNameToLuidA(CONST CHAR *InterfaceName, PNET_LUID InterfaceLuid);
NETIO_STATUS ConvertInterfaceNameToLuidW(CONST WCHAR *InterfaceName, PNET_LUID InterfaceLuid);
NETIO_STATUS ConvertInterfaceLuidToAlias(CONST NET_LUID *InterfaceLuid, PWSTR InterfaceAlias,
                                         SIZE_T Length);
NETIO_STATUS ConvertInterfaceAliasToLuid(CONST WCHAR *InterfaceAlias, PNET_LUID InterfaceLuid);
/* Row->InterfaceLuid, or Row->InterfaceIndex when the LUID is zero. */
NETIO_STATUS GetIfEntry2(PMIB_IF_ROW2 Row);

#ifdef __cplusplus
}
#endif

#endif /* NDKWDK_NETIOAPI_H */

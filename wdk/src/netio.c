/* netioapi.h: interface index, LUID, name and alias, and GetIfEntry2, from
 * the Linux interface list. The LUID carries the Linux index and an IfType
 * from the link type; names and aliases are the Linux interface names. */
#include <net/if.h>
#include <net/if_arp.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "kit.h"
#include <netioapi.h>

struct link_info {
    char name[IF_NAMESIZE];
    unsigned flags;
    unsigned mtu;
    unsigned arphrd;
    unsigned char mac[IF_MAX_PHYS_ADDRESS_LENGTH];
    unsigned maclen;
    uint64_t speed_bps;
};

static bool link_query(NET_IFINDEX index, struct link_info *li)
{
    memset(li, 0, sizeof *li);
    if (index == 0 || !if_indextoname(index, li->name))
        return false;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return true;
    struct ifreq r;
    memset(&r, 0, sizeof r);
    snprintf(r.ifr_name, sizeof r.ifr_name, "%s", li->name);
    if (ioctl(fd, SIOCGIFFLAGS, &r) == 0)
        li->flags = (unsigned short)r.ifr_flags;
    if (ioctl(fd, SIOCGIFMTU, &r) == 0)
        li->mtu = (unsigned)r.ifr_mtu;
    if (ioctl(fd, SIOCGIFHWADDR, &r) == 0) {
        li->arphrd = r.ifr_hwaddr.sa_family;
        if (li->arphrd == ARPHRD_ETHER) {
            li->maclen = 6;
            memcpy(li->mac, r.ifr_hwaddr.sa_data, 6);
        }
    }
    close(fd);
    char path[96];
    snprintf(path, sizeof path, "/sys/class/net/%s/speed", li->name);
    FILE *f = fopen(path, "r");
    long mbps = 0;
    if (f) {
        if (fscanf(f, "%ld", &mbps) != 1 || mbps < 0)
            mbps = 0;
        fclose(f);
    }
    li->speed_bps = (uint64_t)mbps * 1000000u;
    return true;
}

static ULONG if_type(const struct link_info *li)
{
    if (li->flags & IFF_LOOPBACK)
        return IF_TYPE_SOFTWARE_LOOPBACK;
    if (li->arphrd == ARPHRD_ETHER)
        return IF_TYPE_ETHERNET_CSMACD;
    if (li->arphrd == ARPHRD_PPP)
        return IF_TYPE_PPP;
    return IF_TYPE_OTHER;
}

NETIO_STATUS ConvertInterfaceIndexToLuid(NET_IFINDEX InterfaceIndex, PNET_LUID InterfaceLuid)
{
    kit_touch();
    if (!InterfaceLuid)
        return STATUS_INVALID_PARAMETER;
    struct link_info li;
    if (!link_query(InterfaceIndex, &li)) {
        InterfaceLuid->Value = 0;
        return STATUS_NOT_FOUND;
    }
    InterfaceLuid->Value = 0;
    InterfaceLuid->Info.NetLuidIndex = InterfaceIndex;
    InterfaceLuid->Info.IfType = if_type(&li);
    return STATUS_SUCCESS;
}

NETIO_STATUS ConvertInterfaceLuidToIndex(CONST NET_LUID *InterfaceLuid,
                                         PNET_IFINDEX InterfaceIndex)
{
    kit_touch();
    if (!InterfaceLuid || !InterfaceIndex)
        return STATUS_INVALID_PARAMETER;
    NET_LUID check;
    NET_IFINDEX index = (NET_IFINDEX)InterfaceLuid->Info.NetLuidIndex;
    if (!NT_SUCCESS(ConvertInterfaceIndexToLuid(index, &check)) ||
        check.Value != InterfaceLuid->Value) {
        *InterfaceIndex = NET_IFINDEX_UNSPECIFIED;
        return STATUS_NOT_FOUND;
    }
    *InterfaceIndex = index;
    return STATUS_SUCCESS;
}

NETIO_STATUS ConvertInterfaceLuidToNameA(CONST NET_LUID *InterfaceLuid, PSTR InterfaceName,
                                         SIZE_T Length)
{
    NET_IFINDEX index;
    NETIO_STATUS st = ConvertInterfaceLuidToIndex(InterfaceLuid, &index);
    if (!NT_SUCCESS(st))
        return st;
    char name[IF_NAMESIZE];
    if (!InterfaceName || !if_indextoname(index, name))
        return STATUS_INVALID_PARAMETER;
    if (strlen(name) + 1 > Length)
        return STATUS_BUFFER_TOO_SMALL;
    memcpy(InterfaceName, name, strlen(name) + 1);
    return STATUS_SUCCESS;
}

NETIO_STATUS ConvertInterfaceLuidToNameW(CONST NET_LUID *InterfaceLuid, PWSTR InterfaceName,
                                         SIZE_T Length)
{
    char name[IF_NAMESIZE];
    NETIO_STATUS st = ConvertInterfaceLuidToNameA(InterfaceLuid, name, sizeof name);
    if (!NT_SUCCESS(st))
        return st;
    if (!InterfaceName)
        return STATUS_INVALID_PARAMETER;
    size_t n = strlen(name);
    if (n + 1 > Length)
        return STATUS_BUFFER_TOO_SMALL;
    for (size_t i = 0; i <= n; i++)
        InterfaceName[i] = (unsigned char)name[i];
    return STATUS_SUCCESS;
}

NETIO_STATUS ConvertInterfaceLuidToAlias(CONST NET_LUID *InterfaceLuid, PWSTR InterfaceAlias,
                                         SIZE_T Length)
{
    return ConvertInterfaceLuidToNameW(InterfaceLuid, InterfaceAlias, Length);
}

NETIO_STATUS ConvertInterfaceNameToLuidA(CONST CHAR *InterfaceName, PNET_LUID InterfaceLuid)
{
    kit_touch();
    if (!InterfaceName || !InterfaceLuid)
        return STATUS_INVALID_PARAMETER;
    NET_IFINDEX index = if_nametoindex(InterfaceName);
    if (!index) {
        InterfaceLuid->Value = 0;
        return STATUS_NOT_FOUND;
    }
    return ConvertInterfaceIndexToLuid(index, InterfaceLuid);
}

NETIO_STATUS ConvertInterfaceNameToLuidW(CONST WCHAR *InterfaceName, PNET_LUID InterfaceLuid)
{
    char name[IF_NAMESIZE];
    size_t i = 0;
    if (!InterfaceName)
        return STATUS_INVALID_PARAMETER;
    for (; InterfaceName[i]; i++) {
        if (i + 1 >= sizeof name || InterfaceName[i] > 0x7e)
            return STATUS_INVALID_PARAMETER;
        name[i] = (char)InterfaceName[i];
    }
    name[i] = 0;
    return ConvertInterfaceNameToLuidA(name, InterfaceLuid);
}

NETIO_STATUS ConvertInterfaceAliasToLuid(CONST WCHAR *InterfaceAlias, PNET_LUID InterfaceLuid)
{
    return ConvertInterfaceNameToLuidW(InterfaceAlias, InterfaceLuid);
}

NETIO_STATUS GetIfEntry2(PMIB_IF_ROW2 Row)
{
    kit_touch();
    kit_require_irql(PASSIVE_LEVEL, "GetIfEntry2", KIT_CALLER);
    if (!Row)
        return STATUS_INVALID_PARAMETER;
    NET_IFINDEX index = Row->InterfaceLuid.Value ? (NET_IFINDEX)Row->InterfaceLuid.Info.NetLuidIndex
                                                 : Row->InterfaceIndex;
    NET_LUID luid;
    NETIO_STATUS st = ConvertInterfaceIndexToLuid(index, &luid);
    if (!NT_SUCCESS(st))
        return st;
    if (Row->InterfaceLuid.Value && Row->InterfaceLuid.Value != luid.Value)
        return STATUS_NOT_FOUND;
    struct link_info li;
    link_query(index, &li);
    memset(Row, 0, sizeof *Row);
    Row->InterfaceLuid = luid;
    Row->InterfaceIndex = index;
    for (size_t i = 0; li.name[i] && i < IF_MAX_STRING_SIZE; i++)
        Row->Alias[i] = Row->Description[i] = (unsigned char)li.name[i];
    Row->PhysicalAddressLength = li.maclen;
    memcpy(Row->PhysicalAddress, li.mac, li.maclen);
    memcpy(Row->PermanentPhysicalAddress, li.mac, li.maclen);
    Row->Mtu = li.mtu;
    Row->Type = if_type(&li);
    Row->TunnelType = TUNNEL_TYPE_NONE;
    Row->MediaType = (li.flags & IFF_LOOPBACK) ? NdisMediumLoopback : NdisMedium802_3;
    Row->PhysicalMediumType = (li.flags & IFF_LOOPBACK) ? NdisPhysicalMediumUnspecified
                                                        : NdisPhysicalMedium802_3;
    Row->AccessType = (li.flags & IFF_LOOPBACK)      ? NET_IF_ACCESS_LOOPBACK
                      : (li.flags & IFF_POINTOPOINT) ? NET_IF_ACCESS_POINT_TO_POINT
                                                     : NET_IF_ACCESS_BROADCAST;
    Row->DirectionType = NET_IF_DIRECTION_SENDRECEIVE;
    Row->InterfaceAndOperStatusFlags.ConnectorPresent = !(li.flags & IFF_LOOPBACK);
    Row->InterfaceAndOperStatusFlags.NotMediaConnected = !(li.flags & IFF_RUNNING);
    Row->OperStatus = (li.flags & IFF_UP) && (li.flags & IFF_RUNNING) ? IfOperStatusUp
                                                                      : IfOperStatusDown;
    Row->AdminStatus = (li.flags & IFF_UP) ? NET_IF_ADMIN_STATUS_UP : NET_IF_ADMIN_STATUS_DOWN;
    Row->MediaConnectState = (li.flags & IFF_RUNNING) ? MediaConnectStateConnected
                                                      : MediaConnectStateDisconnected;
    Row->ConnectionType = NET_IF_CONNECTION_DEDICATED;
    Row->TransmitLinkSpeed = Row->ReceiveLinkSpeed = li.speed_bps;
    return STATUS_SUCCESS;
}

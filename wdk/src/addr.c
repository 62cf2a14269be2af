/* ip2string.h: IPv4 and IPv6 addresses to and from text, on the C
 * library's parsers. Strict IPv4 is four-part dotted decimal; non-strict
 * also takes the shorter, octal and hexadecimal forms (as inet_aton).
 * Ports are in network byte order. W forms convert ASCII text. */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "kit.h"

/* Copies the leading run of s made of the characters in set into buf, NUL
 * terminated; *term (if asked) is where the run ends. False when the run is
 * empty or does not fit. */
static bool take_run(const char *s, const char *set, const char **term, char *buf, size_t cap)
{
    size_t n = strspn(s, set);
    if (term)
        *term = s + n;
    if (n == 0 || n >= cap)
        return false;
    memcpy(buf, s, n);
    buf[n] = 0;
    return true;
}

static NTSTATUS v4_parse(const char *s, bool strict, const char **term, struct in_addr *a)
{
    char buf[64];
    if (!take_run(s, strict ? "0123456789." : "0123456789abcdefABCDEFxX.", term, buf, sizeof buf))
        return STATUS_INVALID_PARAMETER;
    int ok = strict ? inet_pton(AF_INET, buf, a) : inet_aton(buf, a);
    return ok == 1 ? STATUS_SUCCESS : STATUS_INVALID_PARAMETER;
}

static NTSTATUS v6_parse(const char *s, const char **term, struct in6_addr *a)
{
    char buf[64];
    if (!take_run(s, "0123456789abcdefABCDEF:.", term, buf, sizeof buf))
        return STATUS_INVALID_PARAMETER;
    return inet_pton(AF_INET6, buf, a) == 1 ? STATUS_SUCCESS : STATUS_INVALID_PARAMETER;
}

static bool parse_port(const char *s, USHORT *port)
{
    char *end;
    if (*s < '0' || *s > '9')
        return false;
    unsigned long v = strtoul(s, &end, 10);
    if (*end || v > 0xFFFF)
        return false;
    *port = htons((uint16_t)v);
    return true;
}

/* Wide text to a narrow copy; NULL if it does not fit. */
static char *narrow(const WCHAR *w, char *buf, size_t cap)
{
    size_t i = 0;
    for (; w[i]; i++) {
        if (i + 1 >= cap)
            return NULL;
        buf[i] = w[i] > 0x7e ? '?' : (char)w[i];
    }
    buf[i] = 0;
    return buf;
}

static void widen(const char *s, WCHAR *w)
{
    size_t i = 0;
    for (; s[i]; i++)
        w[i] = (unsigned char)s[i];
    w[i] = 0;
}

NTSTATUS RtlIpv4StringToAddressA(PCSTR S, BOOLEAN Strict, PCSTR *Terminator, IN_ADDR *Addr)
{
    if (!S || !Addr)
        return STATUS_INVALID_PARAMETER;
    return v4_parse(S, Strict, Terminator, Addr);
}

NTSTATUS RtlIpv4StringToAddressW(PCWSTR S, BOOLEAN Strict, PCWSTR *Terminator, IN_ADDR *Addr)
{
    char buf[128];
    const char *t;
    if (!S || !Addr || !narrow(S, buf, sizeof buf))
        return STATUS_INVALID_PARAMETER;
    NTSTATUS st = v4_parse(buf, Strict, &t, Addr);
    if (Terminator)
        *Terminator = S + (t - buf);
    return st;
}

NTSTATUS RtlIpv4StringToAddressExA(PCSTR AddressString, BOOLEAN Strict, IN_ADDR *Address,
                                   PUSHORT Port)
{
    const char *t;
    if (!AddressString || !Address || !Port)
        return STATUS_INVALID_PARAMETER;
    if (!NT_SUCCESS(v4_parse(AddressString, Strict, &t, Address)))
        return STATUS_INVALID_PARAMETER;
    *Port = 0;
    if (*t == 0)
        return STATUS_SUCCESS;
    return *t == ':' && parse_port(t + 1, Port) ? STATUS_SUCCESS : STATUS_INVALID_PARAMETER;
}

NTSTATUS RtlIpv4StringToAddressExW(PCWSTR AddressString, BOOLEAN Strict, IN_ADDR *Address,
                                   PUSHORT Port)
{
    char buf[128];
    if (!AddressString || !narrow(AddressString, buf, sizeof buf))
        return STATUS_INVALID_PARAMETER;
    return RtlIpv4StringToAddressExA(buf, Strict, Address, Port);
}

NTSTATUS RtlIpv6StringToAddressA(PCSTR S, PCSTR *Terminator, IN6_ADDR *Addr)
{
    if (!S || !Addr)
        return STATUS_INVALID_PARAMETER;
    return v6_parse(S, Terminator, Addr);
}

NTSTATUS RtlIpv6StringToAddressW(PCWSTR S, PCWSTR *Terminator, IN6_ADDR *Addr)
{
    char buf[128];
    const char *t;
    if (!S || !Addr || !narrow(S, buf, sizeof buf))
        return STATUS_INVALID_PARAMETER;
    NTSTATUS st = v6_parse(buf, &t, Addr);
    if (Terminator)
        *Terminator = S + (t - buf);
    return st;
}

/* "addr", "addr%scope", "[addr]", "[addr%scope]", each bracketed form
 * optionally followed by ":port". */
NTSTATUS RtlIpv6StringToAddressExA(PCSTR AddressString, IN6_ADDR *Address, PULONG ScopeId,
                                   PUSHORT Port)
{
    if (!AddressString || !Address || !ScopeId || !Port)
        return STATUS_INVALID_PARAMETER;
    const char *s = AddressString, *t;
    bool bracket = *s == '[';
    if (bracket)
        s++;
    if (!NT_SUCCESS(v6_parse(s, &t, Address)))
        return STATUS_INVALID_PARAMETER;
    *ScopeId = 0;
    *Port = 0;
    if (*t == '%') {
        char *end;
        unsigned long v = strtoul(t + 1, &end, 10);
        if (end == t + 1 || v > 0xFFFFFFFFul)
            return STATUS_INVALID_PARAMETER;
        *ScopeId = (ULONG)v;
        t = end;
    }
    if (bracket) {
        if (*t++ != ']')
            return STATUS_INVALID_PARAMETER;
        if (*t == ':')
            return parse_port(t + 1, Port) ? STATUS_SUCCESS : STATUS_INVALID_PARAMETER;
    }
    return *t == 0 ? STATUS_SUCCESS : STATUS_INVALID_PARAMETER;
}

NTSTATUS RtlIpv6StringToAddressExW(PCWSTR AddressString, IN6_ADDR *Address, PULONG ScopeId,
                                   PUSHORT Port)
{
    char buf[128];
    if (!AddressString || !narrow(AddressString, buf, sizeof buf))
        return STATUS_INVALID_PARAMETER;
    return RtlIpv6StringToAddressExA(buf, Address, ScopeId, Port);
}

/* The Rtl*AddressToString routines: S has room for the family's longest
 * text (INET_ADDRSTRLEN or INET6_ADDRSTRLEN characters); each returns the
 * end of what it wrote. */
static PSTR addr_to_string_a(int af, const void *addr, PSTR S, socklen_t room)
{
    inet_ntop(af, addr, S, room);
    return S + strlen(S);
}

static PWSTR addr_to_string_w(int af, const void *addr, PWSTR S)
{
    char buf[INET6_ADDRSTRLEN];
    inet_ntop(af, addr, buf, sizeof buf);
    widen(buf, S);
    return S + strlen(buf);
}

PSTR RtlIpv4AddressToStringA(const IN_ADDR *Addr, PSTR S)
{
    return addr_to_string_a(AF_INET, Addr, S, INET_ADDRSTRLEN);
}

PWSTR RtlIpv4AddressToStringW(const IN_ADDR *Addr, PWSTR S)
{
    return addr_to_string_w(AF_INET, Addr, S);
}

PSTR RtlIpv6AddressToStringA(const IN6_ADDR *Addr, PSTR S)
{
    return addr_to_string_a(AF_INET6, Addr, S, INET6_ADDRSTRLEN);
}

PWSTR RtlIpv6AddressToStringW(const IN6_ADDR *Addr, PWSTR S)
{
    return addr_to_string_w(AF_INET6, Addr, S);
}

/* Copies text out if *len holds it (the NUL included); *len gets the need. */
static NTSTATUS give(const char *text, void *out, PULONG len, bool wide)
{
    ULONG need = (ULONG)strlen(text) + 1;
    if (!out || *len < need) {
        *len = need;
        return STATUS_INVALID_PARAMETER;
    }
    if (wide)
        widen(text, out);
    else
        memcpy(out, text, need);
    *len = need;
    return STATUS_SUCCESS;
}

/* The Rtl*AddressToStringEx routines: "a.b.c.d:port" or "[v6%scope]:port",
 * without the port (and brackets) when it is 0, the scope only for IPv6. */
static NTSTATUS addr_to_string_ex(int af, const void *a, ULONG scope, USHORT port, void *out,
                                  PULONG len, bool wide)
{
    char addr[INET6_ADDRSTRLEN], sc[16] = "", text[96];
    if (!len || !a || !inet_ntop(af, a, addr, sizeof addr))
        return STATUS_INVALID_PARAMETER;
    if (af == AF_INET6 && scope)
        snprintf(sc, sizeof sc, "%%%u", scope);
    if (!port)
        snprintf(text, sizeof text, "%s%s", addr, sc);
    else if (af == AF_INET6)
        snprintf(text, sizeof text, "[%s%s]:%u", addr, sc, ntohs(port));
    else
        snprintf(text, sizeof text, "%s:%u", addr, ntohs(port));
    return give(text, out, len, wide);
}

NTSTATUS RtlIpv4AddressToStringExA(const IN_ADDR *Address, USHORT Port, PSTR AddressString,
                                   PULONG AddressStringLength)
{
    return addr_to_string_ex(AF_INET, Address, 0, Port, AddressString, AddressStringLength, false);
}

NTSTATUS RtlIpv4AddressToStringExW(const IN_ADDR *Address, USHORT Port, PWSTR AddressString,
                                   PULONG AddressStringLength)
{
    return addr_to_string_ex(AF_INET, Address, 0, Port, AddressString, AddressStringLength, true);
}

NTSTATUS RtlIpv6AddressToStringExA(const IN6_ADDR *Address, ULONG ScopeId, USHORT Port,
                                   PSTR AddressString, PULONG AddressStringLength)
{
    return addr_to_string_ex(AF_INET6, Address, ScopeId, Port, AddressString,
                             AddressStringLength, false);
}

NTSTATUS RtlIpv6AddressToStringExW(const IN6_ADDR *Address, ULONG ScopeId, USHORT Port,
                                   PWSTR AddressString, PULONG AddressStringLength)
{
    return addr_to_string_ex(AF_INET6, Address, ScopeId, Port, AddressString,
                             AddressStringLength, true);
}

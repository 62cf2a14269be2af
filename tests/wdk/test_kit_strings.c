/* Counted strings, ntstrsafe.h, the Windows printf conventions, memory
 * comparison, and ip2string.h's address conversions. */
#include <ntstrsafe.h>
#include <ip2string.h>

#include "kittest.h"

static int wide_eq(const WCHAR *w, const char *s)
{
    size_t i = 0;
    for (; s[i]; i++)
        if (w[i] != (unsigned char)s[i])
            return 0;
    return w[i] == 0;
}

static void test_counted_strings(void)
{
    UNICODE_STRING u, v;
    ANSI_STRING a;
    WCHAR buf[16];
    RtlInitUnicodeString(&u, L"Hello");
    CHECK_EQ(u.Length, 10);
    CHECK_EQ(u.MaximumLength, 12);
    RtlInitUnicodeString(&v, L"hello");
    CHECK(!RtlEqualUnicodeString(&u, &v, FALSE));
    CHECK(RtlEqualUnicodeString(&u, &v, TRUE));
    CHECK(RtlCompareUnicodeString(&u, &v, FALSE) < 0);
    CHECK_EQ(RtlUnicodeStringToAnsiString(&a, &u, TRUE), STATUS_SUCCESS);
    CHECK_EQ(a.Length, 5);
    CHECK(strcmp(a.Buffer, "Hello") == 0);
    CHECK_EQ(RtlAnsiStringToUnicodeString(&v, &a, TRUE), STATUS_SUCCESS);
    CHECK(RtlEqualUnicodeString(&u, &v, FALSE));
    RtlFreeUnicodeString(&v);
    RtlFreeAnsiString(&a);
    v.Buffer = buf;
    v.Length = 0;
    v.MaximumLength = sizeof buf;
    RtlCopyUnicodeString(&v, &u);
    CHECK_EQ(RtlAppendUnicodeToString(&v, L"!"), STATUS_SUCCESS);
    CHECK(wide_eq(buf, "Hello!"));
    CHECK_EQ(RtlAppendUnicodeToString(&v, L"0123456789ABC"), STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ(v.Length, 12); /* unchanged */
    CHECK_EQ(RtlIntegerToUnicodeString(255, 16, &v), STATUS_SUCCESS);
    CHECK(wide_eq(buf, "FF"));
    ULONG n = 0;
    RtlInitUnicodeString(&u, L"  1234x");
    CHECK_EQ(RtlUnicodeStringToInteger(&u, 10, &n), STATUS_SUCCESS);
    CHECK_EQ(n, 1234);
    UCHAR x[4] = {1, 2, 3, 4}, y[4] = {1, 2, 9, 4};
    CHECK_EQ(RtlCompareMemory(x, y, 4), 2);
    CHECK(RtlEqualMemory(x, x, 4));
}

static void test_strsafe(void)
{
    char s[8];
    WCHAR w[8];
    size_t len = 99;
    CHECK_EQ(RtlStringCchCopyA(s, sizeof s, "abc"), STATUS_SUCCESS);
    CHECK_EQ(RtlStringCchCatA(s, sizeof s, "defgh"), STATUS_BUFFER_OVERFLOW);
    CHECK(strcmp(s, "abcdefg") == 0);
    CHECK_EQ(RtlStringCchCopyA(s, 0, "x"), STATUS_INVALID_PARAMETER);
    CHECK_EQ(RtlStringCchCopyNA(s, sizeof s, "abcdef", 2), STATUS_SUCCESS);
    CHECK(strcmp(s, "ab") == 0);
    CHECK_EQ(RtlStringCchLengthA(s, sizeof s, &len), STATUS_SUCCESS);
    CHECK_EQ(len, 2);
    CHECK_EQ(RtlStringCchLengthA("toolong", 3, &len), STATUS_INVALID_PARAMETER);
    CHECK_EQ(RtlStringCbCopyW(w, sizeof w, L"wide"), STATUS_SUCCESS);
    CHECK(wide_eq(w, "wide"));
    CHECK_EQ(RtlStringCbLengthW(w, sizeof w, &len), STATUS_SUCCESS);
    CHECK_EQ(len, 8);
    CHECK_EQ(RtlStringCchCatW(w, RTL_NUMBER_OF(w), L"st"), STATUS_SUCCESS);
    CHECK(wide_eq(w, "widest"));
    CHECK_EQ(RtlStringCchPrintfA(s, sizeof s, "%d-%d", 12, 34), STATUS_SUCCESS);
    CHECK(strcmp(s, "12-34") == 0);
    CHECK_EQ(RtlStringCchPrintfA(s, sizeof s, "%s", "123456789"), STATUS_BUFFER_OVERFLOW);
    CHECK(strcmp(s, "1234567") == 0);
}

static void test_formats(void)
{
    char s[160];
    LONG neg = -5;
    ULONG big = 0xFFFFFFFFu;
    LONG64 l64 = -1234567890123LL;
    SIZE_T sz = 77;
    UNICODE_STRING u;
    ANSI_STRING a;
    WCHAR w[40];
    RtlInitUnicodeString(&u, L"uni");
    RtlInitAnsiString(&a, "ansi");
    /* l is 32 bits, as a Windows LONG; I64 and I are 64 bits. */
    RtlStringCbPrintfA(s, sizeof s, "%ld %lu %lx %I64d %Iu %08X %-4s| %ws %S %wZ %Z %c %%", neg, big,
                       big, l64, sz, 0xABCu, "ab", L"wide", L"cap", &u, &a, 'z');
    CHECK(strcmp(s, "-5 4294967295 ffffffff -1234567890123 77 00000ABC ab  | wide cap uni ansi z %") == 0);
    if (strcmp(s, "-5 4294967295 ffffffff -1234567890123 77 00000ABC ab  | wide cap uni ansi z %"))
        fprintf(stderr, "got '%s'\n", s);
    /* In a W format, %s is wide and %S narrow. */
    RtlStringCchPrintfW(w, RTL_NUMBER_OF(w), L"%s/%S/%d", L"w", "n", 42);
    CHECK(wide_eq(w, "w/n/42"));
}

static void test_addresses(void)
{
    IN_ADDR a4;
    IN6_ADDR a6;
    PCSTR term;
    USHORT port;
    ULONG scope, len;
    char text[INET6_ADDRSTRLEN];
    WCHAR wtext[INET6_ADDRSTRLEN];
    CHECK_EQ(RtlIpv4StringToAddressA("10.1.2.3 rest", TRUE, &term, &a4), STATUS_SUCCESS);
    CHECK(strcmp(term, " rest") == 0);
    CHECK_EQ(((UCHAR *)&a4)[0], 10);
    CHECK_EQ(((UCHAR *)&a4)[3], 3);
    CHECK_EQ(RtlIpv4StringToAddressA("10.1", TRUE, &term, &a4), STATUS_INVALID_PARAMETER);
    CHECK_EQ(RtlIpv4StringToAddressA("0x0A000001", FALSE, &term, &a4), STATUS_SUCCESS);
    CHECK_EQ(((UCHAR *)&a4)[3], 1);
    CHECK_EQ(RtlIpv4StringToAddressExA("192.168.0.9:7471", TRUE, &a4, &port), STATUS_SUCCESS);
    CHECK_EQ(port, RtlUshortByteSwap(7471));
    CHECK_EQ(RtlIpv4StringToAddressExA("192.168.0.9:70000", TRUE, &a4, &port), STATUS_INVALID_PARAMETER);
    CHECK(RtlIpv4AddressToStringA(&a4, text) == text + strlen("192.168.0.9"));
    CHECK(strcmp(text, "192.168.0.9") == 0);
    len = sizeof text;
    CHECK_EQ(RtlIpv4AddressToStringExA(&a4, RtlUshortByteSwap(80), text, &len), STATUS_SUCCESS);
    CHECK(strcmp(text, "192.168.0.9:80") == 0);
    CHECK_EQ(len, 15);
    len = 4;
    CHECK_EQ(RtlIpv4AddressToStringExA(&a4, 0, text, &len), STATUS_INVALID_PARAMETER);
    CHECK_EQ(len, 12);
    CHECK_EQ(RtlIpv6StringToAddressExA("[fe80::1%3]:443", &a6, &scope, &port), STATUS_SUCCESS);
    CHECK_EQ(scope, 3);
    CHECK_EQ(port, RtlUshortByteSwap(443));
    CHECK_EQ(((UCHAR *)&a6)[0], 0xfe);
    CHECK_EQ(((UCHAR *)&a6)[15], 1);
    len = RTL_NUMBER_OF(wtext);
    CHECK_EQ(RtlIpv6AddressToStringExW(&a6, 3, RtlUshortByteSwap(443), wtext, &len), STATUS_SUCCESS);
    CHECK(wide_eq(wtext, "[fe80::1%3]:443"));
    CHECK_EQ(RtlIpv6StringToAddressW(L"::1", NULL, &a6), STATUS_SUCCESS);
    RtlIpv6AddressToStringA(&a6, text);
    CHECK(strcmp(text, "::1") == 0);
    /* The parse stops at the first character that cannot belong. */
    CHECK_EQ(RtlIpv6StringToAddressA("fe80::1 zz", &term, &a6), STATUS_SUCCESS);
    CHECK(strcmp(term, " zz") == 0);
    CHECK_EQ(RtlIpv6StringToAddressA("fe80:::1", &term, &a6), STATUS_INVALID_PARAMETER);
}

int main(void)
{
    kt_start();
    RUN(test_counted_strings);
    RUN(test_strsafe);
    RUN(test_formats);
    RUN(test_addresses);
    return tl_finish();
}

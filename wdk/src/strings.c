/* Counted strings (RtlXxxString) and ntstrsafe.h. The safe-string
 * routines share one implementation for char (A) and WCHAR (W) text:
 * elem is the character size. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "kit.h"
#include <ntstrsafe.h>

#define STRING_TAG 0x72747355 /* 'rtsU', shown as "Ustr" */

/* ---- counted strings ---- */
VOID RtlInitUnicodeString(PUNICODE_STRING DestinationString, PCWSTR SourceString)
{
    size_t n = SourceString ? kit_wcslen(SourceString) * sizeof(WCHAR) : 0;
    if (n > UNICODE_STRING_MAX_BYTES - sizeof(WCHAR))
        n = UNICODE_STRING_MAX_BYTES - sizeof(WCHAR);
    DestinationString->Length = (USHORT)n;
    DestinationString->MaximumLength = SourceString ? (USHORT)(n + sizeof(WCHAR)) : 0;
    DestinationString->Buffer = (PWCH)SourceString;
}

NTSTATUS RtlInitUnicodeStringEx(PUNICODE_STRING DestinationString, PCWSTR SourceString)
{
    if (SourceString && kit_wcslen(SourceString) * sizeof(WCHAR) > UNICODE_STRING_MAX_BYTES - 2)
        return STATUS_INVALID_PARAMETER;
    RtlInitUnicodeString(DestinationString, SourceString);
    return STATUS_SUCCESS;
}

VOID RtlInitString(PSTRING DestinationString, PCSZ SourceString)
{
    size_t n = SourceString ? strlen(SourceString) : 0;
    if (n > 0xFFFE)
        n = 0xFFFE;
    DestinationString->Length = (USHORT)n;
    DestinationString->MaximumLength = SourceString ? (USHORT)(n + 1) : 0;
    DestinationString->Buffer = (PCHAR)SourceString;
}

VOID RtlInitAnsiString(PANSI_STRING DestinationString, PCSZ SourceString)
{
    RtlInitString(DestinationString, SourceString);
}

VOID RtlCopyUnicodeString(PUNICODE_STRING DestinationString, PCUNICODE_STRING SourceString)
{
    if (!SourceString) {
        DestinationString->Length = 0;
        return;
    }
    USHORT n = SourceString->Length < DestinationString->MaximumLength
                   ? SourceString->Length
                   : DestinationString->MaximumLength;
    memmove(DestinationString->Buffer, SourceString->Buffer, n);
    DestinationString->Length = n;
    if (n + sizeof(WCHAR) <= DestinationString->MaximumLength)
        DestinationString->Buffer[n / sizeof(WCHAR)] = 0;
}

NTSTATUS RtlAppendUnicodeStringToString(PUNICODE_STRING Destination, PCUNICODE_STRING Source)
{
    if (Source->Length == 0)
        return STATUS_SUCCESS;
    if ((size_t)Destination->Length + Source->Length > Destination->MaximumLength)
        return STATUS_BUFFER_TOO_SMALL;
    memmove((char *)Destination->Buffer + Destination->Length, Source->Buffer, Source->Length);
    Destination->Length += Source->Length;
    if (Destination->Length + sizeof(WCHAR) <= Destination->MaximumLength)
        Destination->Buffer[Destination->Length / sizeof(WCHAR)] = 0;
    return STATUS_SUCCESS;
}

NTSTATUS RtlAppendUnicodeToString(PUNICODE_STRING Destination, PCWSTR Source)
{
    UNICODE_STRING s;
    RtlInitUnicodeString(&s, Source);
    return RtlAppendUnicodeStringToString(Destination, &s);
}

static WCHAR fold(WCHAR c, BOOLEAN ci)
{
    return ci && c >= 'a' && c <= 'z' ? (WCHAR)(c - 'a' + 'A') : c;
}

LONG RtlCompareUnicodeString(PCUNICODE_STRING String1, PCUNICODE_STRING String2,
                             BOOLEAN CaseInSensitive)
{
    size_t n1 = String1->Length / sizeof(WCHAR), n2 = String2->Length / sizeof(WCHAR);
    for (size_t i = 0; i < n1 && i < n2; i++) {
        WCHAR a = fold(String1->Buffer[i], CaseInSensitive);
        WCHAR b = fold(String2->Buffer[i], CaseInSensitive);
        if (a != b)
            return (LONG)a - (LONG)b;
    }
    return (LONG)n1 - (LONG)n2;
}

BOOLEAN RtlEqualUnicodeString(PCUNICODE_STRING String1, PCUNICODE_STRING String2,
                              BOOLEAN CaseInSensitive)
{
    return String1->Length == String2->Length &&
           RtlCompareUnicodeString(String1, String2, CaseInSensitive) == 0;
}

NTSTATUS RtlUnicodeStringToAnsiString(PANSI_STRING DestinationString,
                                      PCUNICODE_STRING SourceString,
                                      BOOLEAN AllocateDestinationString)
{
    size_t n = SourceString->Length / sizeof(WCHAR);
    if (AllocateDestinationString) {
        if (n + 1 > 0xFFFF)
            return STATUS_INVALID_PARAMETER_2;
        DestinationString->Buffer = kit_pool_alloc(true, n + 1, STRING_TAG, false, KIT_CALLER);
        if (!DestinationString->Buffer)
            return STATUS_NO_MEMORY;
        DestinationString->MaximumLength = (USHORT)(n + 1);
    } else if (n >= DestinationString->MaximumLength) {
        return STATUS_BUFFER_OVERFLOW;
    }
    for (size_t i = 0; i < n; i++) {
        WCHAR c = SourceString->Buffer[i];
        DestinationString->Buffer[i] = c > 0x7e ? '?' : (CHAR)c;
    }
    DestinationString->Buffer[n] = 0;
    DestinationString->Length = (USHORT)n;
    return STATUS_SUCCESS;
}

NTSTATUS RtlAnsiStringToUnicodeString(PUNICODE_STRING DestinationString,
                                      PCANSI_STRING SourceString,
                                      BOOLEAN AllocateDestinationString)
{
    size_t n = SourceString->Length;
    if ((n + 1) * sizeof(WCHAR) > 0xFFFF)
        return STATUS_INVALID_PARAMETER_2;
    if (AllocateDestinationString) {
        DestinationString->Buffer =
            kit_pool_alloc(true, (n + 1) * sizeof(WCHAR), STRING_TAG, false, KIT_CALLER);
        if (!DestinationString->Buffer)
            return STATUS_NO_MEMORY;
        DestinationString->MaximumLength = (USHORT)((n + 1) * sizeof(WCHAR));
    } else if (n * sizeof(WCHAR) > DestinationString->MaximumLength) {
        return STATUS_BUFFER_OVERFLOW;
    }
    for (size_t i = 0; i < n; i++)
        DestinationString->Buffer[i] = (unsigned char)SourceString->Buffer[i];
    if ((n + 1) * sizeof(WCHAR) <= DestinationString->MaximumLength)
        DestinationString->Buffer[n] = 0;
    DestinationString->Length = (USHORT)(n * sizeof(WCHAR));
    return STATUS_SUCCESS;
}

VOID RtlFreeUnicodeString(PUNICODE_STRING UnicodeString)
{
    if (UnicodeString->Buffer)
        kit_pool_free(UnicodeString->Buffer, STRING_TAG, true, KIT_CALLER);
    UnicodeString->Buffer = NULL;
    UnicodeString->Length = UnicodeString->MaximumLength = 0;
}

VOID RtlFreeAnsiString(PANSI_STRING AnsiString)
{
    if (AnsiString->Buffer)
        kit_pool_free(AnsiString->Buffer, STRING_TAG, true, KIT_CALLER);
    AnsiString->Buffer = NULL;
    AnsiString->Length = AnsiString->MaximumLength = 0;
}

NTSTATUS RtlIntegerToUnicodeString(ULONG Value, ULONG Base, PUNICODE_STRING String)
{
    if (Base == 0)
        Base = 10;
    if (Base != 2 && Base != 8 && Base != 10 && Base != 16)
        return STATUS_INVALID_PARAMETER;
    char tmp[40];
    size_t n = 0;
    do {
        tmp[n++] = "0123456789ABCDEF"[Value % Base];
        Value /= Base;
    } while (Value);
    if ((n + 1) * sizeof(WCHAR) > String->MaximumLength)
        return STATUS_BUFFER_OVERFLOW;
    for (size_t i = 0; i < n; i++)
        String->Buffer[i] = (WCHAR)tmp[n - 1 - i];
    String->Buffer[n] = 0;
    String->Length = (USHORT)(n * sizeof(WCHAR));
    return STATUS_SUCCESS;
}

NTSTATUS RtlUnicodeStringToInteger(PCUNICODE_STRING String, ULONG Base, PULONG Value)
{
    size_t n = String->Length / sizeof(WCHAR), i = 0;
    while (i < n && (String->Buffer[i] == ' ' || String->Buffer[i] == '\t'))
        i++;
    bool neg = false;
    if (i < n && (String->Buffer[i] == '-' || String->Buffer[i] == '+'))
        neg = String->Buffer[i++] == '-';
    if (Base == 0) {
        Base = 10;
        if (i + 1 < n && String->Buffer[i] == '0') {
            WCHAR p = String->Buffer[i + 1];
            Base = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 10;
            if (Base != 10)
                i += 2;
        }
    } else if (Base != 2 && Base != 8 && Base != 10 && Base != 16) {
        return STATUS_INVALID_PARAMETER;
    }
    ULONG v = 0;
    for (; i < n; i++) {
        WCHAR c = String->Buffer[i];
        ULONG d = c >= '0' && c <= '9'   ? (ULONG)(c - '0')
                  : c >= 'a' && c <= 'f' ? (ULONG)(c - 'a' + 10)
                  : c >= 'A' && c <= 'F' ? (ULONG)(c - 'A' + 10)
                                         : 99;
        if (d >= Base)
            break;
        v = v * Base + d;
    }
    *Value = neg ? (ULONG)(0u - v) : v;
    return STATUS_SUCCESS;
}

/* ---- ntstrsafe: one implementation, elem = 1 (A) or 2 (W) ---- */
static unsigned get(const void *s, size_t elem, size_t i)
{
    return elem == 1 ? (unsigned char)((const char *)s)[i] : ((const WCHAR *)s)[i];
}

static void set(void *s, size_t elem, size_t i, unsigned c)
{
    if (elem == 1)
        ((char *)s)[i] = (char)c;
    else
        ((WCHAR *)s)[i] = (WCHAR)c;
}

static NTSTATUS safe_copy(void *dst, size_t cch, const void *src, size_t max_src, size_t elem)
{
    if (cch == 0 || cch > NTSTRSAFE_MAX_CCH || !dst)
        return STATUS_INVALID_PARAMETER;
    size_t i = 0;
    while (i < cch - 1 && i < max_src && get(src, elem, i)) {
        set(dst, elem, i, get(src, elem, i));
        i++;
    }
    set(dst, elem, i, 0);
    bool truncated = i == cch - 1 && i < max_src && get(src, elem, i) != 0;
    return truncated ? STATUS_BUFFER_OVERFLOW : STATUS_SUCCESS;
}

static NTSTATUS safe_length(const void *s, size_t cch_max, size_t *len, size_t elem)
{
    if (!s || cch_max == 0 || cch_max > NTSTRSAFE_MAX_CCH) {
        if (len)
            *len = 0;
        return STATUS_INVALID_PARAMETER;
    }
    size_t i = 0;
    while (i < cch_max && get(s, elem, i))
        i++;
    if (i == cch_max) {
        if (len)
            *len = 0;
        return STATUS_INVALID_PARAMETER;
    }
    if (len)
        *len = i;
    return STATUS_SUCCESS;
}

static NTSTATUS safe_cat(void *dst, size_t cch, const void *src, size_t elem)
{
    size_t have;
    NTSTATUS st = safe_length(dst, cch, &have, elem);
    if (!NT_SUCCESS(st))
        return st;
    return safe_copy((char *)dst + have * elem, cch - have, src, (size_t)-1, elem);
}

static NTSTATUS safe_vprintf(void *dst, size_t cch, const void *fmt, va_list ap, size_t elem)
{
    if (cch == 0 || cch > NTSTRSAFE_MAX_CCH || !dst)
        return STATUS_INVALID_PARAMETER;
    char small[512];
    char *tmp = cch <= sizeof small ? small : malloc(cch);
    if (!tmp)
        return STATUS_INSUFFICIENT_RESOURCES;
    size_t need = kit_vformat(tmp, cch, elem == 2, fmt, ap);
    size_t n = need < cch ? need : cch - 1;
    for (size_t i = 0; i < n; i++)
        set(dst, elem, i, (unsigned char)tmp[i]);
    set(dst, elem, n, 0);
    if (tmp != small)
        free(tmp);
    return need >= cch ? STATUS_BUFFER_OVERFLOW : STATUS_SUCCESS;
}

NTSTATUS RtlStringCchCopyA(NTSTRSAFE_PSTR pszDest, size_t cchDest, NTSTRSAFE_PCSTR pszSrc)
{
    return safe_copy(pszDest, cchDest, pszSrc, (size_t)-1, 1);
}
NTSTATUS RtlStringCchCopyW(NTSTRSAFE_PWSTR pszDest, size_t cchDest, NTSTRSAFE_PCWSTR pszSrc)
{
    return safe_copy(pszDest, cchDest, pszSrc, (size_t)-1, 2);
}
NTSTATUS RtlStringCbCopyA(NTSTRSAFE_PSTR pszDest, size_t cbDest, NTSTRSAFE_PCSTR pszSrc)
{
    return safe_copy(pszDest, cbDest, pszSrc, (size_t)-1, 1);
}
NTSTATUS RtlStringCbCopyW(NTSTRSAFE_PWSTR pszDest, size_t cbDest, NTSTRSAFE_PCWSTR pszSrc)
{
    return safe_copy(pszDest, cbDest / sizeof(WCHAR), pszSrc, (size_t)-1, 2);
}
NTSTATUS RtlStringCchCopyNA(NTSTRSAFE_PSTR pszDest, size_t cchDest, NTSTRSAFE_PCSTR pszSrc,
                            size_t cchToCopy)
{
    return safe_copy(pszDest, cchDest, pszSrc, cchToCopy, 1);
}
NTSTATUS RtlStringCchCopyNW(NTSTRSAFE_PWSTR pszDest, size_t cchDest, NTSTRSAFE_PCWSTR pszSrc,
                            size_t cchToCopy)
{
    return safe_copy(pszDest, cchDest, pszSrc, cchToCopy, 2);
}
NTSTATUS RtlStringCbCopyNA(NTSTRSAFE_PSTR pszDest, size_t cbDest, NTSTRSAFE_PCSTR pszSrc,
                           size_t cbToCopy)
{
    return safe_copy(pszDest, cbDest, pszSrc, cbToCopy, 1);
}
NTSTATUS RtlStringCbCopyNW(NTSTRSAFE_PWSTR pszDest, size_t cbDest, NTSTRSAFE_PCWSTR pszSrc,
                           size_t cbToCopy)
{
    return safe_copy(pszDest, cbDest / sizeof(WCHAR), pszSrc, cbToCopy / sizeof(WCHAR), 2);
}
NTSTATUS RtlStringCchCatA(NTSTRSAFE_PSTR pszDest, size_t cchDest, NTSTRSAFE_PCSTR pszSrc)
{
    return safe_cat(pszDest, cchDest, pszSrc, 1);
}
NTSTATUS RtlStringCchCatW(NTSTRSAFE_PWSTR pszDest, size_t cchDest, NTSTRSAFE_PCWSTR pszSrc)
{
    return safe_cat(pszDest, cchDest, pszSrc, 2);
}
NTSTATUS RtlStringCbCatA(NTSTRSAFE_PSTR pszDest, size_t cbDest, NTSTRSAFE_PCSTR pszSrc)
{
    return safe_cat(pszDest, cbDest, pszSrc, 1);
}
NTSTATUS RtlStringCbCatW(NTSTRSAFE_PWSTR pszDest, size_t cbDest, NTSTRSAFE_PCWSTR pszSrc)
{
    return safe_cat(pszDest, cbDest / sizeof(WCHAR), pszSrc, 2);
}
NTSTATUS RtlStringCchVPrintfA(NTSTRSAFE_PSTR pszDest, size_t cchDest, NTSTRSAFE_PCSTR pszFormat,
                              va_list argList)
{
    return safe_vprintf(pszDest, cchDest, pszFormat, argList, 1);
}
NTSTATUS RtlStringCchVPrintfW(NTSTRSAFE_PWSTR pszDest, size_t cchDest,
                              NTSTRSAFE_PCWSTR pszFormat, va_list argList)
{
    return safe_vprintf(pszDest, cchDest, pszFormat, argList, 2);
}
NTSTATUS RtlStringCbVPrintfA(NTSTRSAFE_PSTR pszDest, size_t cbDest, NTSTRSAFE_PCSTR pszFormat,
                             va_list argList)
{
    return safe_vprintf(pszDest, cbDest, pszFormat, argList, 1);
}
NTSTATUS RtlStringCbVPrintfW(NTSTRSAFE_PWSTR pszDest, size_t cbDest, NTSTRSAFE_PCWSTR pszFormat,
                             va_list argList)
{
    return safe_vprintf(pszDest, cbDest / sizeof(WCHAR), pszFormat, argList, 2);
}
#define PRINTF_VARIADIC(name, vname, dst_t, fmt_t)                                         \
    NTSTATUS name(dst_t pszDest, size_t size, fmt_t pszFormat, ...)                         \
    {                                                                                      \
        va_list ap;                                                                        \
        va_start(ap, pszFormat);                                                           \
        NTSTATUS st = vname(pszDest, size, pszFormat, ap);                                 \
        va_end(ap);                                                                        \
        return st;                                                                         \
    }
PRINTF_VARIADIC(RtlStringCchPrintfA, RtlStringCchVPrintfA, NTSTRSAFE_PSTR, NTSTRSAFE_PCSTR)
PRINTF_VARIADIC(RtlStringCchPrintfW, RtlStringCchVPrintfW, NTSTRSAFE_PWSTR, NTSTRSAFE_PCWSTR)
PRINTF_VARIADIC(RtlStringCbPrintfA, RtlStringCbVPrintfA, NTSTRSAFE_PSTR, NTSTRSAFE_PCSTR)
PRINTF_VARIADIC(RtlStringCbPrintfW, RtlStringCbVPrintfW, NTSTRSAFE_PWSTR, NTSTRSAFE_PCWSTR)

NTSTATUS RtlStringCchLengthA(NTSTRSAFE_PCSTR psz, size_t cchMax, size_t *pcchLength)
{
    return safe_length(psz, cchMax, pcchLength, 1);
}
NTSTATUS RtlStringCchLengthW(NTSTRSAFE_PCWSTR psz, size_t cchMax, size_t *pcchLength)
{
    return safe_length(psz, cchMax, pcchLength, 2);
}
NTSTATUS RtlStringCbLengthA(NTSTRSAFE_PCSTR psz, size_t cbMax, size_t *pcbLength)
{
    return safe_length(psz, cbMax, pcbLength, 1);
}
NTSTATUS RtlStringCbLengthW(NTSTRSAFE_PCWSTR psz, size_t cbMax, size_t *pcbLength)
{
    size_t cch = 0;
    NTSTATUS st = safe_length(psz, cbMax / sizeof(WCHAR), &cch, 2);
    if (pcbLength)
        *pcbLength = cch * sizeof(WCHAR);
    return st;
}

/* printf with the Windows kernel's conventions, for DbgPrint and the
 * RtlStringXxxPrintf family: l is 32 bits (LONG), ll / I64 64 bits, I and z
 * pointer-sized; %s/%S/%hs/%ls/%ws choose narrow or wide strings as
 * Windows does (%s follows the format's width); %Z is a PANSI_STRING and
 * %wZ a PUNICODE_STRING. Wide text is written as ASCII ('?' for other
 * characters). */
#include <stdarg.h>
#include <string.h>

#include "kit.h"

struct sink {
    char *out;
    size_t cap, len;
};

static void put(struct sink *s, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++, s->len++)
        if (s->cap && s->len < s->cap - 1)
            s->out[s->len] = p[i];
}

size_t kit_wcslen(const WCHAR *s)
{
    size_t n = 0;
    while (s[n])
        n++;
    return n;
}

static unsigned fchar(const void *fmt, bool wide, size_t i)
{
    return wide ? ((const WCHAR *)fmt)[i] : (unsigned char)((const char *)fmt)[i];
}

/* A counted or NUL-terminated string, narrow or wide, with width and
 * precision applied. */
static void put_string(struct sink *s, const char *spec_flags, int width, int prec,
                       const void *str, size_t count, bool counted, bool wide_str)
{
    char tmp[1024];
    size_t n;
    if (!str) {
        snprintf(tmp, sizeof tmp, "(null)");
        n = 6;
    } else {
        n = 0;
        for (size_t i = 0; n < sizeof tmp - 1 && (!counted || i < count); i++) {
            unsigned c = wide_str ? ((const WCHAR *)str)[i] : (unsigned char)((const char *)str)[i];
            if (!counted && c == 0)
                break;
            tmp[n++] = wide_str && c > 0x7e ? '?' : (char)c;
        }
        tmp[n] = 0;
    }
    if (prec >= 0 && (size_t)prec < n)
        n = (size_t)prec;
    size_t pad = width > 0 && (size_t)width > n ? (size_t)width - n : 0;
    bool left = strchr(spec_flags, '-') != NULL;
    for (size_t i = 0; !left && i < pad; i++)
        put(s, " ", 1);
    put(s, tmp, n);
    for (size_t i = 0; left && i < pad; i++)
        put(s, " ", 1);
}

size_t kit_vformat(char *out, size_t cap, bool wide, const void *fmt, va_list ap)
{
    struct sink s = {out, cap, 0};
    va_list args;
    va_copy(args, ap);
    for (size_t i = 0; fchar(fmt, wide, i);) {
        unsigned c = fchar(fmt, wide, i);
        if (c != '%') {
            char ch = c > 0x7e ? '?' : (char)c;
            put(&s, &ch, 1);
            i++;
            continue;
        }
        i++;
        char flags[8] = "";
        size_t nf = 0;
        while (strchr("-+ #0", (int)fchar(fmt, wide, i)) && fchar(fmt, wide, i) && nf < 6)
            flags[nf++] = (char)fchar(fmt, wide, i++);
        flags[nf] = 0;
        int width = -1, prec = -1;
        if (fchar(fmt, wide, i) == '*') {
            width = va_arg(args, int);
            i++;
        } else if (fchar(fmt, wide, i) >= '0' && fchar(fmt, wide, i) <= '9') {
            width = 0;
            while (fchar(fmt, wide, i) >= '0' && fchar(fmt, wide, i) <= '9')
                width = width * 10 + (int)(fchar(fmt, wide, i++) - '0');
        }
        if (fchar(fmt, wide, i) == '.') {
            i++;
            prec = 0;
            if (fchar(fmt, wide, i) == '*') {
                prec = va_arg(args, int);
                i++;
            } else
                while (fchar(fmt, wide, i) >= '0' && fchar(fmt, wide, i) <= '9')
                    prec = prec * 10 + (int)(fchar(fmt, wide, i++) - '0');
        }
        /* Length: 0 int, 1 64-bit, 2 pointer-sized, 3 short, 4 char. */
        int size = 0;
        bool hwide = false, hnarrow = false;
        for (;;) {
            unsigned m = fchar(fmt, wide, i);
            if (m == 'I' && fchar(fmt, wide, i + 1) == '6' && fchar(fmt, wide, i + 2) == '4') {
                size = 1;
                i += 3;
            } else if (m == 'I' && fchar(fmt, wide, i + 1) == '3' &&
                       fchar(fmt, wide, i + 2) == '2') {
                size = 0;
                i += 3;
            } else if (m == 'I' || m == 'z' || m == 't' || m == 'j') {
                size = m == 'j' ? 1 : 2;
                i++;
            } else if (m == 'l') {
                if (fchar(fmt, wide, i + 1) == 'l') {
                    size = 1;
                    i += 2;
                } else {
                    hwide = true; /* %ls, %lc; %ld is a 32-bit LONG */
                    i++;
                }
            } else if (m == 'w') {
                hwide = true;
                i++;
            } else if (m == 'h') {
                hnarrow = true;
                if (fchar(fmt, wide, i + 1) == 'h') {
                    size = 4;
                    i++;
                } else
                    size = 3;
                i++;
            } else
                break;
        }
        unsigned conv = fchar(fmt, wide, i);
        if (!conv)
            break;
        i++;
        char buf[128];
        switch (conv) {
        case 'd':
        case 'i':
        case 'u':
        case 'x':
        case 'X':
        case 'o': {
            const char *len = size == 1 || size == 2 ? "ll" : size == 3 ? "h" : size == 4 ? "hh" : "";
            char full[32];
            /* Width 0 pads nothing; a negative precision counts as none. */
            snprintf(full, sizeof full, "%%%s*.*%s%c", flags, len, (char)conv);
            long long v = size == 1 || size == 2 ? va_arg(args, long long) : va_arg(args, int);
            int w = width < 0 ? 0 : width;
            int n = size == 1 || size == 2 ? snprintf(buf, sizeof buf, full, w, prec, v)
                                           : snprintf(buf, sizeof buf, full, w, prec, (int)v);
            put(&s, buf, n < 0 ? 0 : (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
            break;
        }
        case 'p': {
            void *p = va_arg(args, void *);
            int n = snprintf(buf, sizeof buf, "%016llX", (unsigned long long)(uintptr_t)p);
            put(&s, buf, (size_t)n);
            break;
        }
        case 'c':
        case 'C': {
            unsigned ch = (unsigned)va_arg(args, int);
            char one = ch > 0x7e && (hwide || conv == 'C' || wide) ? '?' : (char)ch;
            put_string(&s, flags, width, -1, &one, 1, true, false);
            break;
        }
        case 's':
        case 'S': {
            /* %s follows the format's width, %S the other one; h and l/w force. */
            bool wide_str = hwide ? true : hnarrow ? false : (conv == 's') == wide;
            const void *str = va_arg(args, const void *);
            put_string(&s, flags, width, prec, str, 0, false, wide_str);
            break;
        }
        case 'Z': {
            if (hwide) {
                const UNICODE_STRING *u = va_arg(args, const UNICODE_STRING *);
                put_string(&s, flags, width, prec, u ? u->Buffer : NULL,
                           u ? u->Length / sizeof(WCHAR) : 0, true, true);
            } else {
                const ANSI_STRING *a = va_arg(args, const ANSI_STRING *);
                put_string(&s, flags, width, prec, a ? a->Buffer : NULL, a ? a->Length : 0, true,
                           false);
            }
            break;
        }
        case 'e':
        case 'E':
        case 'f':
        case 'g':
        case 'G': {
            double d = va_arg(args, double);
            char full[32];
            snprintf(full, sizeof full, "%%%s*.*%c", flags, (char)conv);
            int n = snprintf(buf, sizeof buf, full, width < 0 ? 0 : width, prec < 0 ? 6 : prec, d);
            put(&s, buf, n < 0 ? 0 : (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
            break;
        }
        case '%':
            put(&s, "%", 1);
            break;
        case 'n':
            (void)va_arg(args, void *); /* refused, as Windows does by default */
            break;
        default: {
            char ch = (char)conv;
            put(&s, "%", 1);
            put(&s, &ch, 1);
        }
        }
    }
    va_end(args);
    if (s.cap)
        s.out[s.len < s.cap ? s.len : s.cap - 1] = 0;
    return s.len;
}

/* ---- DbgPrint ---- */
ULONG vDbgPrintEx(ULONG ComponentId, ULONG Level, PCCH Format, va_list arglist)
{
    (void)ComponentId, (void)Level;
    char buf[2048];
    kit_vformat(buf, sizeof buf, false, Format, arglist);
    fputs(buf, stderr);
    return STATUS_SUCCESS;
}

ULONG DbgPrint(PCSTR Format, ...)
{
    kit_touch();
    va_list ap;
    va_start(ap, Format);
    ULONG r = vDbgPrintEx(DPFLTR_DEFAULT_ID, DPFLTR_ERROR_LEVEL, Format, ap);
    va_end(ap);
    return r;
}

ULONG DbgPrintEx(ULONG ComponentId, ULONG Level, PCSTR Format, ...)
{
    kit_touch();
    va_list ap;
    va_start(ap, Format);
    ULONG r = vDbgPrintEx(ComponentId, Level, Format, ap);
    va_end(ap);
    return r;
}

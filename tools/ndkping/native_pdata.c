/*
 * native_pdata.c - what ndkping's own protocol carries (see native.h): the
 * private data with its buffer advertisement, and the Send/Receive
 * messages.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/bytes.h"
#include "lib/log.h"
#include "lib/pattern.h"
#include "ndkping/native.h"

void adv_encode(uint8_t out[ADV_LEN], const struct adv *a)
{
    tc_put_be64(out, a->addr);
    tc_put_be32(out + 8, a->token);
    tc_put_be32(out + 12, a->size);
}

void adv_decode(const uint8_t in[ADV_LEN], struct adv *a)
{
    a->addr = tc_get_be64(in);
    a->token = tc_get_be32(in + 8);
    a->size = tc_get_be32(in + 12);
}

uint8_t *pdata_build(const char *text, size_t text_len, const struct adv *a, ULONG *len)
{
    size_t n = text_len + (a ? 1 + ADV_LEN : 0);
    uint8_t *p = malloc(n ? n : 1);
    if (!p)
        return NULL;
    memcpy(p, text, text_len);
    if (a) {
        p[text_len] = 0;
        adv_encode(p + text_len + 1, a);
    }
    *len = (ULONG)n;
    return p;
}

bool pdata_split(const uint8_t *p, ULONG len, ULONG *text_len, const uint8_t **adv_bytes)
{
    const uint8_t *nul = len ? memchr(p, 0, len) : NULL;
    *adv_bytes = NULL;
    if (!nul) {
        *text_len = len;
        return true;
    }
    *text_len = (ULONG)(nul - p);
    if (len - *text_len - 1 != ADV_LEN)
        return false;
    *adv_bytes = nul + 1;
    return true;
}

const char *fmt_pdata(const uint8_t *p, size_t n, char *buf, size_t size)
{
    if (n == 0) {
        snprintf(buf, size, "none (0 bytes)");
        return buf;
    }
    size_t o = 0, shown = n > PDATA_SHOWN ? PDATA_SHOWN : n;
    buf[o++] = '"';
    for (size_t i = 0; i < shown && o + 48 < size; i++) {
        uint8_t ch = p[i];
        if (ch == '"' || ch == '\\')
            o += (size_t)snprintf(buf + o, size - o, "\\%c", ch);
        else if (ch >= 0x20 && ch < 0x7f)
            buf[o++] = (char)ch;
        else
            o += (size_t)snprintf(buf + o, size - o, "\\x%02x", ch);
    }
    snprintf(buf + o, size - o, "\"%s (%zu byte%s)", shown < n ? "..." : "", n, n == 1 ? "" : "s");
    return buf;
}

const char *fmt_pdata_adv(const uint8_t *text, size_t text_len, const uint8_t *adv_bytes, char *buf, size_t size)
{
    fmt_pdata(text, text_len, buf, size);
    if (adv_bytes) {
        struct adv a;
        adv_decode(adv_bytes, &a);
        size_t used = strlen(buf);
        snprintf(buf + used, size - used, " + buffer 0x%" PRIx64 " token 0x%08" PRIx32 " %" PRIu32 " bytes", a.addr,
                 a.token, a.size);
    }
    return buf;
}

bool pdata_matches(const char *role, const char *whose, const uint8_t *got, ULONG got_len, const char *sent,
                   size_t sent_len)
{
    if (got_len == sent_len && (sent_len == 0 || memcmp(got, sent, sent_len) == 0))
        return true;
    char a[PDATA_BUF], b[PDATA_BUF];
    tc_complain(role, "%s private data differs from what was sent: got %s, sent %s", whose,
                fmt_pdata(got, got_len, a, sizeof a), fmt_pdata((const uint8_t *)sent, sent_len, b, sizeof b));
    return false;
}

const char *verdict_name(uint32_t v)
{
    switch (v) {
    case VERDICT_OK:
        return "ok";
    case VERDICT_BAD_MSG:
        return "the client's message was not what was sent";
    case VERDICT_BAD_BUFFER:
        return "its buffer did not hold the written pattern";
    case VERDICT_UNCHECKED:
        return "not checked (the server runs without --verify)";
    default:
        return "an unknown verdict";
    }
}

static uint32_t msg_stream(uint32_t kind)
{
    return kind == MSG_CLIENT ? STREAM_CLIENT_MSG : STREAM_SERVER_MSG;
}

void msg_build(uint8_t *m, const struct msg *h)
{
    memcpy(m, "NDKP", 4);
    tc_put_be32(m + 4, h->kind);
    tc_put_be32(m + 8, h->seed);
    tc_put_be32(m + 12, h->len);
    tc_put_be32(m + 16, h->verdict);
    tc_put_be32(m + 20, h->held_us);
    tc_pattern_fill(m + MSG_HEADER, MSG_SIZE - MSG_HEADER, h->seed, msg_stream(h->kind));
}

const char *msg_check(const uint8_t *m, ULONG got, uint32_t kind, uint32_t len, struct msg *h, char *why,
                      size_t size)
{
    if (got != MSG_SIZE) {
        snprintf(why, size, "%" PRIu32 " bytes instead of %u", got, MSG_SIZE);
        return why;
    }
    if (memcmp(m, "NDKP", 4) != 0 || tc_get_be32(m + 4) != kind) {
        snprintf(why, size, "not an ndkping %s message", kind == MSG_CLIENT ? "client" : "reply");
        return why;
    }
    *h = (struct msg){.kind = kind,
                      .seed = tc_get_be32(m + 8),
                      .len = tc_get_be32(m + 12),
                      .verdict = tc_get_be32(m + 16),
                      .held_us = tc_get_be32(m + 20)};
    if (h->len != len) {
        snprintf(why, size, "announces %" PRIu32 " bytes written, expected %" PRIu32, h->len, len);
        return why;
    }
    size_t first = 0, bad;
    uint8_t g = 0, w = 0;
    if (opt.verify &&
        (bad = tc_pattern_check(m + MSG_HEADER, MSG_SIZE - MSG_HEADER, h->seed, msg_stream(kind), &first, &g, &w))) {
        snprintf(why, size, "%zu byte%s differ, the first at offset %zu: 0x%02x, expected 0x%02x", bad,
                 bad == 1 ? "" : "s", MSG_HEADER + first, g, w);
        return why;
    }
    return NULL;
}

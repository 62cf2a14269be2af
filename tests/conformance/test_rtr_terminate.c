/*
 * A peer-to-peer initiator that answers our MPA Reply with a Terminate
 * instead of its RTR (say it found no RTR type it can use, RFC 6581 code
 * (2,0,0x07), or not enough IRD, (2,0,0x06)). A received Terminate is never
 * answered with one (RFC 5040 section 7; docs/behaviour.md "Terminates"):
 * libndk's NdkAccept fails with STATUS_CONNECTION_ABORTED (the initiator
 * abandoned the establishment, as NdkAccept allows) and the connection closes
 * without a single octet more from libndk.
 *
 * Variants: the Terminate with its control word only (28-octet FPDU), with
 * a copied DDP and RDMA header (the longest, 76 octets), with MPA CRC, and a
 * malformed one whose ULPDU_Length is longer than any Terminate (it is still
 * a Terminate, so still not answered). The raw initiator is rawpeer.h's.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rawpeer.h"
#include "testlib.h"

/* A Terminate FPDU (RFC 5040 section 4.8): untagged, L=1, RDMAP opcode 7,
 * QN 2, MSN 1, MO 0, the control word for (layer, etype, code), then `extra`
 * octets of copied headers (zeros here; only the length matters to the
 * receiver of an unanswerable Terminate). */
static size_t terminate_fpdu(uint8_t *out, uint8_t layer, uint8_t etype, uint8_t code, size_t extra,
                             bool crc)
{
    uint8_t u[22 + 48];
    memset(u, 0, sizeof u);
    u[0] = 0x41; /* T=0, L=1, DV=1 */
    u[1] = 0x47; /* RV=1, Terminate */
    rp_put32(u + 6, 2);  /* QN 2 */
    rp_put32(u + 10, 1); /* MSN 1 */
    rp_put32(u + 18, (uint32_t)layer << 28 | (uint32_t)etype << 24 | (uint32_t)code << 16);
    return rp_fpdu(out, u, 22 + extra, crc);
}

enum variant { V_CTRL_ONLY, V_WITH_HEADERS, V_CRC, V_OVERLONG };

static void run(enum variant v)
{
    bool crc = v == V_CRC;
    NDK_OPEN_OPTIONS o = nk_options();
    nk_passive p;
    if (!nk_passive_open(&p, nk_open(&o)))
        goto out;
    /* A=1 offering only the Write RTR, IRD 4 / ORD 4. */
    uint8_t req[64];
    size_t rl = rp_frame_v2(req, RP_KEY_REQ, crc ? RP_F_C : 0, RP_W0_A | 4, RP_W1_C | 4, NULL, 0);
    if (!nk_passive_deliver(&p, req, rl))
        goto out;
    nk_op a = nk_accept(p.c, p.qp, 4, 4, NULL, 0);
    uint8_t rep[64];
    int end;
    CHECK_EQ(rp_read(p.fd, rep, 24, NK_WAIT_MS, &end), 24);

    uint8_t term[128];
    size_t tn;
    if (v == V_OVERLONG) {
        /* ULPDU_Length 100: a Terminate is at most 70. The octets that
         * follow are zeros, then our FIN. */
        tn = terminate_fpdu(term, 2, 0, 0x07, 0, false);
        rp_put16(term, 100);
        memset(term + tn, 0, 100 - 22);
        tn += 100 - 22;
    } else {
        tn = terminate_fpdu(term, 2, 0, v == V_WITH_HEADERS ? 0x06 : 0x07,
                            v == V_WITH_HEADERS ? 48 : 0, crc);
    }
    CHECK(rp_send(p.fd, term, tn));

    NTSTATUS st = nk_op_wait(&a, NK_WAIT_MS);
    CHECK_ST(st, STATUS_CONNECTION_ABORTED);
    /* libndk closes, and sends nothing before it: no Terminate of its own. */
    uint8_t got[128];
    size_t nb = 0;
    end = rp_wait_end(p.fd, NK_WAIT_MS, got, sizeof got, &nb);
    CHECK(end == RP_EOF || end == RP_RESET);
    CHECK_EQ(nb, 0);
    if (nb)
        rp_hexdump("libndk answered the Terminate with", got, nb);
    /* The listener goes on serving. */
    CHECK(nk_roundtrip(p.w, p.l, "after a Terminate instead of the RTR"));
out:
    nk_passive_close(&p);
}

static void terminate_ctrl_only(void)
{
    run(V_CTRL_ONLY);
}

static void terminate_with_headers(void)
{
    run(V_WITH_HEADERS);
}

static void terminate_with_crc(void)
{
    run(V_CRC);
}

static void terminate_overlong(void)
{
    run(V_OVERLONG);
}

int main(void)
{
    RUN(terminate_ctrl_only);
    RUN(terminate_with_headers);
    RUN(terminate_with_crc);
    RUN(terminate_overlong);
    return tl_finish();
}

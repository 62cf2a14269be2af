#!/usr/bin/env bash
#
# check.sh WIRE_OPS - captures libndk's own loopback traffic for every
# operation type and lets Wireshark judge it.
#
# For MPA CRC off, then on: starts tshark on lo with a capture filter on two
# free ports (P for wire_ops, Q for this script's probes), runs
# `WIRE_OPS [--crc] P`, stops tshark, and decodes the capture with tshark's
# iwarp_mpa and iwarp_ddp_rdmap dissectors. Checks, on port P:
#   (a) every TCP segment with payload is dissected as MPA (or is a piece of
#       an MPA PDU that Wireshark reassembled in a later frame), and the MPA
#       PDUs Wireshark found cover every payload byte of every direction;
#   (b) no frame is malformed and no expert item has severity error;
#   (c) every RDMAP opcode 0..7 appears, and the MPA Requests, Replies and
#       rejecting Replies that wire_ops makes are there;
#   (d) CRC on: Wireshark verified the CRC of every FPDU and found it good;
#       CRC off: no CRC was negotiated and every CRC field is zero.
# Prints a summary per run. Exit status: 0 pass, 1 fail, 77 skip (no tshark,
# no iWARP dissectors, or no permission to capture on lo).
#
# Installs nothing: CI installs Debian's tshark package. Needs root or a
# dumpcap allowed to capture (wireshark-common's setuid/capabilities option).
# NDK_WIRESHARK_KEEP=1 keeps the work folder (captures, logs) even on
# success; it is always kept on failure.

set -u

WIRE_OPS=${1:-}
SKIP=77
PI_ERROR=0x00800000 # Wireshark's expert severity "Error" (epan/proto.h PI_ERROR)

say() { printf 'wireshark: %s\n' "$*"; }
skip() {
    say "SKIP: $*"
    exit $SKIP
}
die() {
    say "FAIL: $*"
    FAILED=1 # keeps the work folder
    exit 1
}

[ -n "$WIRE_OPS" ] || die "usage: check.sh WIRE_OPS | check.sh --decode FILE PORT off|on"
[ "$WIRE_OPS" = --decode ] || [ -x "$WIRE_OPS" ] || die "wire_ops not found or not executable: $WIRE_OPS"
command -v tshark >/dev/null 2>&1 ||
    skip "tshark is not installed (Debian package: tshark); this test needs it to decode the capture"
# The protocol list is the dissectors this tshark build has.
if ! tshark -G protocols 2>/dev/null | awk -F'\t' '$3 == "iwarp_mpa" { m = 1 } $3 == "iwarp_ddp_rdmap" { d = 1 } END { exit !(m && d) }'; then
    skip "this tshark has no iwarp_mpa / iwarp_ddp_rdmap dissectors"
fi

FAILED=0
WORK=$(mktemp -d /tmp/ndk-wireshark.XXXXXX) || die "cannot make a work folder"
TSHARK_PID=

cleanup() {
    if [ -n "$TSHARK_PID" ] && kill -0 "$TSHARK_PID" 2>/dev/null; then
        kill -INT "$TSHARK_PID" 2>/dev/null
        sleep 1
        kill -KILL "$TSHARK_PID" 2>/dev/null
    fi
    [ -n "$WORK" ] || return 0
    if [ "$FAILED" = 0 ] && [ "${NDK_WIRESHARK_KEEP:-0}" != 1 ]; then
        rm -rf "$WORK"
    else
        say "captures and logs kept in $WORK"
    fi
}
trap cleanup EXIT

# ------------------------------------------------------------------------
# Ports and the capture
# ------------------------------------------------------------------------

# A port no socket on this machine uses, below the kernel's ephemeral range,
# so that no client socket (ours or anyone's) can have it as its local port
# while the capture runs. /proc is read rather than ss, which may be absent.
in_use() {
    local hex
    hex=$(printf ':%04X ' "$1")
    cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -qi -- "$hex"
}
pick_port() {
    local low hi p tries=0
    low=$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
    hi=$(( ${low:-32768} - 1 ))
    [ "$hi" -gt 20000 ] || hi=32767
    while [ $tries -lt 200 ]; do
        p=$(( 20000 + RANDOM % (hi - 20000 + 1) ))
        if ! in_use "$p" && [ "$p" != "${1:-}" ]; then
            echo "$p"
            return 0
        fi
        tries=$((tries + 1))
    done
    return 1
}

# One TCP connection attempt to 127.0.0.1:Q, where nothing listens: a SYN
# and a RST that only this script causes. Used as a marker in the capture.
probe() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
    return 0
}

# How many captured packets so far involve port Q (tshark -P prints one
# line per packet; the probe's lines name Q after an arrow or before one).
probe_lines() {
    grep -c -E "(→|->) $1 |^.* $1 (→|->) " "$2" 2>/dev/null || true
}

# Waits until the probe to Q shows in tshark's live output, probing every
# 0.2 s, at most $3 seconds: then every packet sent before the probe has
# been captured and processed (packets on lo arrive in order).
barrier() {
    local q=$1 out=$2 limit=$3 before i
    before=$(probe_lines "$q" "$out")
    for ((i = 0; i < limit * 5; i++)); do
        probe "$q"
        sleep 0.2
        [ "$(probe_lines "$q" "$out")" -gt "$before" ] && return 0
        kill -0 "$TSHARK_PID" 2>/dev/null || return 1
    done
    return 1
}

# start_capture FILE P Q: tshark writes the capture (-w) and prints each
# packet as it goes (-P -l) so that barrier() can see the probes.
start_capture() {
    local file=$1 p=$2 q=$3 i
    tshark -i lo -f "tcp port $p or tcp port $q" -w "$file" -P -l \
        >"$file.live" 2>"$file.tshark-err" </dev/null &
    TSHARK_PID=$!
    # tshark prints "Capturing on 'Loopback: lo'" before dumpcap has even
    # tried to open lo (without permission the error follows it), so that
    # line only says tshark got that far (bounded wait); what proves the
    # capture live is the first probe seen in tshark's output.
    for ((i = 0; i < 150; i++)); do
        grep -q "Capturing on" "$file.tshark-err" 2>/dev/null && break
        kill -0 "$TSHARK_PID" 2>/dev/null || break
        sleep 0.1
    done
    grep -q "Capturing on" "$file.tshark-err" 2>/dev/null && barrier "$q" "$file.live" 15 && return 0
    stop_capture
    sed 's/^/    tshark: /' "$file.tshark-err" >&2
    if grep -qi "permission\|not permitted\|privilege" "$file.tshark-err"; then
        skip "tshark may not capture on lo here (run as root, or let dumpcap capture: dpkg-reconfigure wireshark-common)"
    fi
    die "tshark did not start capturing on lo within 30 s (its messages are above)"
}

stop_capture() {
    local i
    [ -n "$TSHARK_PID" ] || return 0
    kill -INT "$TSHARK_PID" 2>/dev/null
    for ((i = 0; i < 100; i++)); do
        kill -0 "$TSHARK_PID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$TSHARK_PID" 2>/dev/null; then
        say "tshark did not stop within 10 s of SIGINT; killing it"
        kill -KILL "$TSHARK_PID" 2>/dev/null
    fi
    wait "$TSHARK_PID" 2>/dev/null
    TSHARK_PID=
}

# ------------------------------------------------------------------------
# Decoding
# ------------------------------------------------------------------------

# Options for every decode (DECODE; the field and tree reads add -2, two
# passes, so that a segment knows the frame its PDU was reassembled in,
# tcp.reassembled_in):
#  desegmentation on: an FPDU may span segments and a segment may hold
#      several FPDUs; iwarp_mpa reassembles through tcp_dissect_pdus;
#  iwarp_mpa is a TCP heuristic only (there is no "Decode As" for it:
#      -d tcp.port==P,iwarp_mpa is refused), so it is enabled explicitly and
#      heuristics go first, before any dissector registered for the port
#      numbers; it learns CRC and markers from the Request and Reply, which
#      the capture holds because it starts before the connections.
#  The payload heuristics that Wireshark tries on Send payloads (RPC over
#      RDMA, SMB Direct) are off: wire_ops' payloads are test patterns, and
#      the RPC-over-RDMA heuristic throws on any Send payload shorter than
#      16 bytes (it reads its header before checking the length), which
#      would mark our zero-length Send malformed. That is a Wireshark bug
#      outside the iWARP dissectors; the summary still reports what the
#      default heuristics do, for information.
DECODE=(-o tcp.desegment_tcp_streams:TRUE -o tcp.try_heuristic_first:TRUE)
DECODE_READY=

heuristic_known() {
    tshark -r "$1" -c 1 "--$2-heuristic" "$3" >/dev/null 2>&1
}

# setup_decode FILE: completes DECODE with the heuristic switches this
# tshark knows (the short names are those of Wireshark 3.x and 4.x).
setup_decode() {
    heuristic_known "$1" enable iwarp_mpa_tcp && DECODE+=(--enable-heuristic iwarp_mpa_tcp)
    local h
    for h in rpcrdma_iwarp smb_direct_iwarp; do
        heuristic_known "$1" disable "$h" && DECODE+=(--disable-heuristic "$h")
    done
}

# bad_frames FILE P OPTIONS...: "FRAME<tab>INFO" of every frame on port P
# that is malformed or carries an expert error, decoding with OPTIONS in
# one pass and in two.
bad_frames() {
    local file=$1 p=$2
    shift 2
    {
        tshark -r "$file" "$@" -Y "tcp.port == $p && (_ws.malformed || _ws.expert.severity >= $PI_ERROR)" \
            -T fields -e frame.number -e _ws.col.Info 2>/dev/null
        tshark -r "$file" -2 "$@" -Y "tcp.port == $p && (_ws.malformed || _ws.expert.severity >= $PI_ERROR)" \
            -T fields -e frame.number -e _ws.col.Info 2>/dev/null
    } | sort -n -u
}

# ------------------------------------------------------------------------
# One run
# ------------------------------------------------------------------------

# check_run MODE: MODE is "off" or "on" (MPA CRC).
check_run() {
    local mode=$1 p q file log rc
    p=$(pick_port) || die "no free port"
    q=$(pick_port "$p") || die "no free port"
    file="$WORK/crc-$mode.pcapng"
    log="$WORK/crc-$mode.wire_ops.log"
    say "--- MPA CRC $mode: wire_ops on port $p, probes on port $q"

    start_capture "$file" "$p" "$q"
    local crcflag=()
    [ "$mode" = on ] && crcflag=(--crc)
    timeout 120 "$WIRE_OPS" "${crcflag[@]}" "$p" >"$log" 2>&1
    rc=$?
    sed 's/^/    /' "$log"
    # Everything wire_ops sent is in the capture once a later probe is.
    barrier "$q" "$file.live" 10 || say "warning: the final probe was not seen; the capture may miss the last packets"
    stop_capture
    grep -E "captured|dropped" "$file.tshark-err" | sed 's/^/    tshark: /'
    local ok=1
    if [ $rc -ne 0 ]; then
        say "FAIL: wire_ops exited with status $rc (124: timed out)"
        ok=0
    fi
    if grep -E "[1-9][0-9]* packets? dropped" "$file.tshark-err" >/dev/null; then
        say "FAIL: the capture dropped packets; the decode would be incomplete"
        ok=0
    fi
    [ -s "$file" ] || die "tshark wrote no capture file ($file)"
    analyze "$file" "$p" "$mode" "$ok" "$(sed -n 's/.*ok: Send, multi-FPDU: \([0-9]*\) bytes.*/\1/p' "$log")"
}

# analyze FILE P MODE OK [SEND]: the checks on a capture of wire_ops on
# port P with MPA CRC MODE ("off" or "on"); OK=0 fails the run whatever the
# capture shows (wire_ops or the capture failed). SEND, when given, is the
# size of wire_ops' multi-FPDU Send, which Wireshark's DDP reassembly (by
# MSN and MO) must rebuild at exactly that size. Sets FAILED=1 on failure.
analyze() {
    local file=$1 p=$2 mode=$3 ok=$4 send=${5:-} fields bad errors
    [ -n "$DECODE_READY" ] || { setup_decode "$file"; DECODE_READY=1; }

    # One line per frame of port P: the fields the checks need, every
    # occurrence (a frame may hold several FPDUs), comma-separated.
    fields="$file.fields"
    tshark -r "$file" -2 "${DECODE[@]}" -Y "tcp.port == $p" -T fields \
        -E separator='|' -E occurrence=a -E aggregator=, \
        -e frame.number -e tcp.stream -e tcp.srcport -e tcp.len -e tcp.reassembled_in \
        -e tcp.analysis.retransmission -e iwarp_mpa.req -e iwarp_mpa.rep -e iwarp_mpa.crc_flag \
        -e iwarp_mpa.rej_flag -e iwarp_mpa.rev -e iwarp_mpa.pdlength -e iwarp_mpa.ulpdulength \
        -e iwarp_rdma.opcode -e iwarp_mpa.crc -e iwarp_mpa.crc_check \
        -e iwarp_rdma.send.reassembled.length \
        >"$fields" 2>"$fields.err" || {
        cat "$fields.err" >&2
        die "tshark could not decode $file"
    }

    # (b) malformed frames and expert errors, in one pass and in two (a
    # dissector may report only while the first pass builds its state, as
    # iwarp_mpa does for Requests, or only on the second): the items in the
    # tree (display filter), and through the expert tap, which also sees
    # the items a dissector reports without a tree item.
    bad=$(bad_frames "$file" "$p" "${DECODE[@]}")
    tshark -r "$file" "${DECODE[@]}" -q -z "expert,tcp.port==$p" >"$file.expert1" 2>/dev/null
    tshark -r "$file" -2 "${DECODE[@]}" -q -z "expert,tcp.port==$p" >"$file.expert2" 2>/dev/null
    errors=$(awk '/^Errors \(/ { gsub(/[^0-9]/, "", $2); n += $2 } END { print n + 0 }' "$file.expert1" "$file.expert2")

    # (d) Wireshark's own CRC verdict per FPDU, from the decoded tree.
    tshark -r "$file" -2 "${DECODE[@]}" -Y "tcp.port == $p" -V 2>/dev/null |
        grep -E "CRC check: " >"$file.crc" || true
    local good_crc bad_crc
    good_crc=$(grep -c "(Good CRC32)" "$file.crc")
    bad_crc=$(grep -c "(Bad CRC32" "$file.crc")

    # For information: what Wireshark's default payload heuristics do.
    local default_bad
    default_bad=$(bad_frames "$file" "$p" -o tcp.try_heuristic_first:TRUE)

    awk -F'|' -v mode="$mode" -v badframes="$(printf '%s\n' "$bad" | cut -f1 | tr '\n' ' ' | sed 's/ *$//')" -v errors="$errors" \
        -v good_crc="$good_crc" -v bad_crc="$bad_crc" -v ok="$ok" -v send="$send" '
    # split() of "" empties the array and gives 0: no stale values.
    function n(list, arr) { return split(list, arr, ",") }
    # tshark prints opcodes and CRCs in hex ("0x03"); awk has no portable
    # hex conversion (mawk takes "0x03" as 0).
    function hex(s,    v, i, d) {
        s = tolower(s); sub(/^0x/, "", s); v = 0
        for (i = 1; i <= length(s); i++) {
            d = index("0123456789abcdef", substr(s, i, 1))
            if (!d) return -1
            v = v * 16 + d - 1
        }
        return v
    }
    # Booleans are "1"/"0" in tshark 4.0 and "True"/"False" in later ones.
    function yes(s) { s = tolower(s); return s == "1" || s == "true" }
    BEGIN {
        name[0] = "RDMA Write"; name[1] = "RDMA Read Request"; name[2] = "RDMA Read Response"
        name[3] = "Send"; name[4] = "Send with Invalidate"; name[5] = "Send with SE"
        name[6] = "Send with SE and Invalidate"; name[7] = "Terminate"
    }
    {
        frames++
        # Fields: 1 frame, 2 stream, 3 srcport, 4 tcp.len, 5 reassembled_in,
        # 6 retransmission, 7 req, 8 rep, 9 crc_flag, 10 rej_flag, 11 rev,
        # 12 pdlength, 13 ulpdulength, 14 opcode, 15 crc, 16 crc_check,
        # 17 the length of a Send that Wireshark reassembled in this frame
        len = $4 + 0
        if (len == 0) next
        if ($6 != "") { retrans++; next }
        payload++
        dir = $2 "/" $3
        bytes[dir] += len
        dirs[dir] = 1
        nreq = ($7 != ""); nrep = ($8 != "")
        nfpdu = n($13, u)
        if (nreq || nrep || nfpdu) mpa++
        else if ($5 != "") cont++
        else { undissected++; undissected_list = undissected_list " " $1 }
        # MPA Request / Reply: 20 octets + private data (RFC 5044 / 6581).
        npd = n($12, pd)
        for (i = 1; i <= npd; i++) covered[dir] += 20 + pd[i]
        reqs += nreq; reps += nrep
        if (nrep && yes($10)) rejects++
        if (nreq && pd[1] == 4) req_no_ulp_pd++   # only the RFC 6581 IRD/ORD word
        if (nreq && pd[1] > 4) req_ulp_pd++
        if (nrep && pd[1] == 4) rep_no_ulp_pd++
        if (nrep && pd[1] > 4) rep_ulp_pd++
        if ((nreq || nrep) && yes($9) != (mode == "on")) crc_flag_wrong++
        if ((nreq || nrep) && $11 != "2") rev_wrong++
        # FPDUs: 2 + ULPDU_Length + pad to 4 + 4 CRC octets (RFC 5044).
        for (i = 1; i <= nfpdu; i++) {
            fpdus++
            covered[dir] += 2 + u[i] + (4 - (2 + u[i]) % 4) % 4 + 4
        }
        nop = n($14, op)
        ops += nop
        for (i = 1; i <= nop; i++) count[hex(op[i])]++
        ncrc = n($15, c)
        for (i = 1; i <= ncrc; i++) { plain_crc++; if (hex(c[i]) != 0) nonzero_crc++ }
        checked_crc += n($16, cc)
        nrs = n($17, rs)
        for (i = 1; i <= nrs; i++) {
            reassembled = reassembled " " rs[i]
            if (rs[i] == send) send_found = 1
        }
    }
    END {
        printf "wireshark: summary, MPA CRC %s:\n", mode
        printf "  frames on the port %d; with TCP payload %d: %d dissected as MPA, %d pieces of FPDUs reassembled in a later frame, %d not dissected%s%s\n",
            frames, payload, mpa, cont, undissected, undissected ? ":" : "", undissected_list
        if (retrans) printf "  %d retransmitted segments left out\n", retrans
        printf "  MPA Requests %d (%d with ULP private data, %d without), Replies %d (%d rejecting; %d with ULP private data, %d without)\n",
            reqs, req_ulp_pd, req_no_ulp_pd, reps, rejects, rep_ulp_pd, rep_no_ulp_pd
        printf "  FPDUs %d, each handed to DDP/RDMAP: %s\n", fpdus, ops == fpdus ? "yes" : "NO"
        for (k = 0; k <= 7; k++) printf "    opcode %d %-28s %d\n", k, name[k], count[k] + 0
        for (d in dirs) {
            if (covered[d] != bytes[d]) {
                printf "  FAIL: stream/port %s: MPA PDUs cover %d of %d payload bytes\n", d, covered[d], bytes[d]
                fail = 1
            } else {
                allbytes += bytes[d]
            }
        }
        printf "  Sends reassembled by Wireshark from several FPDUs (bytes):%s\n", reassembled == "" ? " none" : reassembled
        printf "  payload bytes covered by MPA PDUs: %d%s\n", allbytes, fail ? " (not all)" : " (all)"
        printf "  malformed frames and expert errors: %s; expert errors (tap) %d\n",
            badframes == "" ? "none" : "frames " badframes, errors
        if (mode == "on")
            printf "  CRC: Wireshark checked %d FPDU CRCs: %d good, %d bad\n", checked_crc, good_crc, bad_crc
        else
            printf "  CRC: not negotiated; %d CRC fields, %d of them non-zero\n", plain_crc, nonzero_crc

        # The verdicts.
        if (undissected) { print "  FAIL: (a) segments with payload that Wireshark did not dissect as MPA"; fail = 1 }
        if (ops != fpdus) { print "  FAIL: (a) FPDUs whose DDP/RDMAP header was not dissected"; fail = 1 }
        if (badframes != "" || errors) { print "  FAIL: (b) malformed frames or expert errors"; fail = 1 }
        for (k = 0; k <= 7; k++)
            if (!count[k]) { printf "  FAIL: (c) no %s (opcode %d) in the capture\n", name[k], k; fail = 1 }
        if (reqs != 3 || reps != 3 || rejects != 2 || req_ulp_pd != 2 || req_no_ulp_pd != 1 || rep_ulp_pd != 2 || rep_no_ulp_pd != 1) {
            print "  FAIL: (c) expected 3 Requests (2 with ULP private data) and 3 Replies (2 rejecting, 2 with ULP private data)"
            fail = 1
        }
        if (send != "" && !send_found) {
            printf "  FAIL: (c) Wireshark did not reassemble the %d-byte multi-FPDU Send\n", send
            fail = 1
        }
        if (crc_flag_wrong) { printf "  FAIL: (d) %d Requests/Replies with C not %s\n", crc_flag_wrong, mode == "on" ? "1" : "0"; fail = 1 }
        if (rev_wrong) { printf "  FAIL: %d Requests/Replies without MPA revision 2\n", rev_wrong; fail = 1 }
        if (mode == "on" && (checked_crc != fpdus || good_crc != fpdus || bad_crc)) {
            print "  FAIL: (d) Wireshark did not find a good CRC in every FPDU"
            fail = 1
        }
        if (mode == "off" && (checked_crc || nonzero_crc)) {
            print "  FAIL: (d) CRC off, yet Wireshark checked CRCs or an FPDU carries a non-zero CRC (RFC 5044: SHOULD be zero)"
            fail = 1
        }
        exit (fail || !ok)
    }' "$fields"
    local verdict=$?
    # The warnings Wireshark raises (e.g. its MPA dissector predates RFC 6581
    # and flags Rev 2 and the S bit), for the log.
    awk '/^Warns/ { on = 1; next } /^(Notes|Chats|Errors)/ { on = 0 } on && /IWARP|DDP|RDMA/ { $1 = ""; $2 = ""; sub(/^ +/, ""); print "  expert warning: " $0 }' "$file.expert1"
    [ -n "$default_bad" ] &&
        echo "  for information, with Wireshark's default payload heuristics on (not counted):" &&
        printf '%s\n' "$default_bad" | sed 's/^/    frame /'
    if [ "$verdict" = 0 ]; then
        say "MPA CRC $mode: passed"
    else
        say "MPA CRC $mode: FAILED"
        FAILED=1
    fi
}

# --decode FILE PORT MODE: only the checks, on an existing capture (to look
# again at a kept capture, or to try the checks on a doctored one).
if [ "$WIRE_OPS" = --decode ]; then
    [ $# -eq 4 ] || die "usage: check.sh --decode FILE PORT off|on"
    rmdir "$WORK"
    WORK=
    analyze "$2" "$3" "$4" 1
    [ "$FAILED" = 0 ] || exit 1
    exit 0
fi

check_run off
check_run on
if [ "$FAILED" != 0 ]; then
    say "FAILED (captures and logs: $WORK)"
    exit 1
fi
say "passed: CRC off and on, every frame decoded, malformed 0, expert errors 0"
exit 0

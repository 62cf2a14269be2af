#!/usr/bin/env python3
"""ndkstat against a live libndk process (docs/tools.md, "ndkstat").

Usage: ndkstat.py main|other_uid NDKSTAT NDKSTAT_TARGET

main: the target (ndkstat_target.c) holds two adapters, a listener and a
connected QP pair after a known exchange; ndkstat -p PID -j must show the
exact counters, the text and the list modes must show the process, a pid
that does not exist fails with a clear message, a stopped process is skipped
within the timeout, and a process with NDK_STAT=0 has no channel.

other_uid: ndkstat run as another user is refused (needs root to switch
users; exits 77, CTest's skip, otherwise).
"""
import json
import os
import pwd
import signal
import subprocess
import sys
import time

FAILS = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        FAILS.append(what)


def start_target(target, env_extra=None):
    env = dict(os.environ)
    for k in ("NDK_LOG", "NDK_DEBUG", "NDK_STAT"):
        env.pop(k, None)
    env.update(env_extra or {})
    p = subprocess.Popen([target], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    line = p.stdout.readline().decode()  # the target's own alarm bounds this
    if not line.startswith("ready "):
        p.kill()
        p.wait()
        sys.exit("the target did not get ready: %r" % line)
    return p


def stop_target(p):
    p.stdin.close()
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def run(ndkstat, *args, user=None, timeout=20):
    kw = {}
    if user is not None:
        kw["preexec_fn"] = lambda: (os.setgid(user.pw_gid), os.setuid(user.pw_uid))
    t0 = time.monotonic()
    r = subprocess.run([ndkstat, *args], capture_output=True, text=True, timeout=timeout, **kw)
    return r, time.monotonic() - t0


def by_role(proc):
    """The active and passive adapters with their one connection and QP."""
    out = {}
    for ad in proc["adapters"]:
        for c in ad["connections"]:
            out[c["role"]] = (ad, c, next(q for q in ad["qps"] if q["id"] == c["qp"]))
    return out


def main_case(ndkstat, target):
    p = start_target(target)
    pid = p.pid
    try:
        r, _ = run(ndkstat, "-p", str(pid), "-j")
        check(r.returncode == 0, "ndkstat -p PID -j exits 0 (%d: %s)" % (r.returncode, r.stderr.strip()))
        doc = json.loads(r.stdout)
        check(doc["skipped"] == [], "nothing skipped")
        check(len(doc["processes"]) == 1, "one process")
        proc = doc["processes"][0]
        check(proc["pid"] == pid and proc["uid"] == os.geteuid(), "pid and uid")
        check(proc["command"] == os.path.basename(target)[:15], "command name")
        check(proc["adapters"] and len(proc["adapters"]) == 2, "two adapters")
        roles = by_role(proc)
        check(set(roles) == {"active", "passive"}, "an active and a passive connection")
        (aa, ac, aq), (pa, pc, pq) = roles["active"], roles["passive"]

        for c, other in ((ac, pc), (pc, ac)):
            check(c["state"] == "connected" and c["transport"] == "tcp", "%s: connected over tcp" % c["role"])
            check(c["local"] == other["peer"] and c["peer"] == other["local"], "%s: addresses" % c["role"])
            check((c["ird"], c["ord"], c["mpa_rev"], c["crc"]) == (16, 16, 2, 0),
                  "%s: IRD/ORD 16/16, MPA rev 2, no CRC" % c["role"])
            check(c["terminate_sent"] == "none" and c["terminate_received"] == "none",
                  "%s: no Terminate" % c["role"])
        want_active = {"fpdus_out_send": 2, "bytes_out_send": 2000, "fpdus_out_write": 1,
                       "bytes_out_write": 4096, "fpdus_out_read_req": 1, "fpdus_in_read_resp": 1,
                       "bytes_in_read_resp": 512, "fpdus_in_send": 0, "fpdus_out_terminate": 0}
        # The active side's zero-length nudges (ndk_qp_nudge) arrive as Writes:
        # how many depends on timing, the sum does not.
        want_passive = {"fpdus_in_send": 2, "bytes_in_send": 2000, "fpdus_in_write": 1 + ac["nudges_out"],
                        "bytes_in_write": 4096, "fpdus_in_read_req": 1, "fpdus_out_read_resp": 1,
                        "bytes_out_read_resp": 512, "fpdus_out_send": 0, "fpdus_in_terminate": 0}
        for c, want in ((ac, want_active), (pc, want_passive)):
            got = {k: c[k] for k in want}
            check(got == want, "%s connection counters %s" % (c["role"], got))
        check(pc["nudges_out"] == 0, "the passive side sent no nudges")
        check((aq["completions_success"], aq["completions_error"], aq["rq_posted"]) == (4, 0, 0),
              "active QP: 4 successful completions, no receive posted")
        check((pq["completions_success"], pq["completions_error"], pq["rq_posted"]) == (2, 0, 1),
              "passive QP: 2 successful completions, 1 receive posted")
        check((aq["rq_depth"], aq["iq_depth"], aq["out_send"], aq["reads_awaiting_response"]) == (64, 64, 0, 0),
              "active QP: depths and nothing outstanding")
        check(aa["connect_ok"] == 1 and aa["connect_failed"] == 0 and aa["accept_ok"] == 0,
              "active adapter: one connect")
        check(pa["requests"] == 1 and pa["accept_ok"] == 1 and pa["rejected"] == 0,
              "passive adapter: one request, accepted")
        check((aa["registered_mrs"], aa["registered_bytes"]) == (1, 8192), "active adapter: 1 MR, 8192 octets")
        check((pa["registered_mrs"], pa["registered_bytes"]) == (3, 4096 + 4096 + 512),
              "passive adapter: 3 MRs, 8704 octets")
        check(aa["fpdus_out_send"] == 2 and pa["bytes_in_write"] == 4096, "adapter totals")
        check(len(pa["listeners"]) == 1 and pa["listeners"][0]["local"] == pc["local"],
              "the listener and its address")
        check(all(len(a["cqs"]) == 1 and a["cqs"][0]["waiting"] == 0 and a["cqs"][0]["armed"] == "no"
                  for a in proc["adapters"]), "CQs: drained, not armed")
        check(all(a["engines"] >= 1 and len(a["progress_engines"]) == a["engines"] and
                  a["progress_tid"] == a["progress_engines"][0]["tid"] > 0 and
                  all(e["tid"] > 0 for e in a["progress_engines"]) for a in proc["adapters"]), "engines")
        check(all(e["spin_us"] == 50 for a in proc["adapters"] for e in a["progress_engines"]),
              "engines spin the default 50 us (EngineSpinMicroseconds)")
        check(all(q["engine"] < a["engines"] for a in proc["adapters"] for q in a["qps"] + a["cqs"]),
              "QPs and CQs name their engine")

        r, _ = run(ndkstat)
        check(r.returncode == 0 and ("pid %d (" % pid) in r.stdout, "ndkstat lists the process")
        check(("conn#%d engine=%d state=connected" % (ac["id"], ac["engine"])) in r.stdout,
              "the text shows the connection")
        r, _ = run(ndkstat, "-j")
        check(r.returncode == 0 and pid in [x["pid"] for x in json.loads(r.stdout)["processes"]],
              "ndkstat -j lists the process")

        # A pid that does not exist: a clear failure.
        gone = subprocess.Popen(["true"])
        gone.wait()
        r, _ = run(ndkstat, "-p", str(gone.pid))
        check(r.returncode == 1 and "no such process" in r.stderr, "-p of a pid that does not exist: %r" %
              r.stderr.strip())

        # A stopped process: skipped within the timeout, the others still shown.
        os.kill(pid, signal.SIGSTOP)
        os.waitpid(pid, os.WUNTRACED)  # returns once it is stopped
        try:
            r, took = run(ndkstat, "-p", str(pid), "-t", "500")
            check(r.returncode == 1 and "stopped" in r.stderr and took < 5,
                  "a stopped process is skipped in %.1f s: %r" % (took, r.stderr.strip()))
            r, took = run(ndkstat, "-j", "-t", "500")
            doc = json.loads(r.stdout)
            check(r.returncode == 0 and any(s["pid"] == pid and "stopped" in s["reason"] for s in doc["skipped"])
                  and took < 5, "ndkstat -j lists it as skipped")
        finally:
            os.kill(pid, signal.SIGCONT)
        r, _ = run(ndkstat, "-p", str(pid), "-j")
        check(r.returncode == 0 and json.loads(r.stdout)["processes"][0]["pid"] == pid,
              "answers again once continued")
    finally:
        stop_target(p)

    # NDK_STAT=0: no channel.
    p = start_target(target, {"NDK_STAT": "0"})
    try:
        r, _ = run(ndkstat, "-p", str(p.pid))
        check(r.returncode == 1 and "no libndk stat channel" in r.stderr, "NDK_STAT=0 turns the channel off")
    finally:
        stop_target(p)


def other_uid_case(ndkstat, target):
    if os.geteuid() != 0:
        print("SKIP: running ndkstat as another user needs root")
        sys.exit(77)
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        print("SKIP: no user 'nobody' to run ndkstat as")
        sys.exit(77)
    p = start_target(target)
    try:
        r, _ = run(ndkstat, "-p", str(p.pid), user=nobody)
        check(r.returncode == 1 and "refused" in r.stderr, "another user is refused: %r" % r.stderr.strip())
        r, _ = run(ndkstat, "-j", user=nobody)
        check(r.returncode == 0 and p.pid not in [x["pid"] for x in json.loads(r.stdout)["processes"]],
              "another user's list leaves the process out")
    finally:
        stop_target(p)


def main():
    mode, ndkstat, target = sys.argv[1:4]
    (main_case if mode == "main" else other_uid_case)(ndkstat, target)
    if FAILS:
        print("%d check(s) failed" % len(FAILS))
        sys.exit(1)


main()

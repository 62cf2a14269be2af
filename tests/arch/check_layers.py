#!/usr/bin/env python3
"""The layer check (docs/architecture.md, "The layers").

Builds the file-level dependency graph of each program the project links
and fails on what the architecture forbids:

  (a) a circle of files: file A uses a symbol file B defines and B, directly
      or through others, uses one A defines; or headers that include each
      other;
  (b) src/net/ or src/wire/ depending on a file above them, by a call or
      data reference or by an #include;
  (c) an operating-system call (sockets, epoll, eventfd, timerfd, threads,
      clocks, randomness, reads and writes on descriptors) from a file of
      libndk outside src/net/.

The call graph comes from the compiled objects: `nm` lists what each object
defines and what it leaves undefined, and an undefined symbol another
object of the same program defines is an edge. Static functions and inline
helpers stay inside their file, so only real cross-file uses count. The
include graph comes from the sources' #include "..." lines.

Usage: check_layers.py SOURCE_DIR BUILD_DIR [NM]
"""
import collections
import os
import re
import subprocess
import sys

# Each program's objects, as CMake lays them out: BUILD/DIR/CMakeFiles/
# TARGET.dir/RELPATH.c.o for the source DIR/RELPATH.c. A symbol is resolved
# within one program (the tools' programs each define main, for example).
PROGRAMS = {
    "libndk": ["src/CMakeFiles/ndk_core.dir", "src/CMakeFiles/ndk_wire.dir"],
    "ndkinfo": ["tools/CMakeFiles/ndktools.dir", "tools/CMakeFiles/ndkinfo.dir"],
    "ndkping": ["tools/CMakeFiles/ndktools.dir", "tools/CMakeFiles/ndkping.dir"],
    "ndkstat": ["tools/CMakeFiles/ndktools.dir", "tools/CMakeFiles/ndkstat.dir"],
    "ndkperf": ["tools/CMakeFiles/ndktools.dir", "tools/ndkperf/CMakeFiles/ndkperf.dir"],
    "libndk-wdk": ["wdk/CMakeFiles/ndk-wdk.dir", "wdk/CMakeFiles/ndkhost.dir"],
}

# Known circles, as the edges that close them: "user -> definer". Each is
# reported while it exists and must go when its circle goes (an entry whose
# edge no longer exists fails the check, so the list only shrinks). Empty
# since the connector split and the engines' registered chores: a new
# circle is a failure, not an entry here.
KNOWN_EDGES: set = set()

# The operating system, as libc names it. Mutexes and condition variables
# are not on the list: every layer locks its own state.
OS_CALLS = {
    "socket", "socketpair", "bind", "listen", "accept", "accept4", "connect", "shutdown",
    "setsockopt", "getsockopt", "getsockname", "getpeername", "send", "sendto", "sendmsg",
    "recv", "recvfrom", "recvmsg", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait",
    "epoll_pwait", "eventfd", "timerfd_create", "timerfd_settime", "timerfd_gettime", "poll",
    "ppoll", "select", "pthread_create", "pthread_join", "pthread_detach", "clock_gettime",
    "gettimeofday", "time", "nanosleep", "usleep", "sleep", "getrandom", "rand", "random",
    "read", "write", "readv", "writev", "pread", "pwrite", "close", "open", "pipe", "pipe2",
    "fcntl", "ioctl", "getifaddrs", "if_nametoindex", "if_indextoname", "getaddrinfo",
    "syscall", "mmap", "munmap", "mincore", "process_vm_readv", "dup", "dup2", "dup3",
    # What glibc turns some of them into (_FORTIFY_SOURCE, 64-bit offsets).
    "__read_chk", "__pread_chk", "__recv_chk", "__recvfrom_chk", "__poll_chk", "open64", "pread64",
    "pwrite64", "mmap64", "fcntl64",
}

# The files below the object layer and what each may reach. Logging
# (log.h, log.c) is the one service every layer may use: log.c itself
# reaches nothing but net/log_sink.c, so no circle can pass through it.
LOWER = {
    "src/wire/": ("src/wire/",),
    "src/net/": ("src/net/", "src/log.", "include/ndk/"),
}


def objects(build, tdir):
    root = os.path.join(build, tdir)
    for dirpath, _, files in os.walk(root):
        for f in files:
            if f.endswith(".c.o"):
                obj = os.path.join(dirpath, f)
                parts = os.path.relpath(obj, build).split(os.sep)
                i = parts.index("CMakeFiles")
                yield obj, "/".join(parts[:i] + parts[i + 2:])[:-2]


def symbols(nm, objs):
    """{object: (defined, undefined)} from one run of nm over all objs."""
    out = subprocess.run([nm, "-A", "-P"] + objs, capture_output=True, text=True, check=True).stdout
    syms = {o: (set(), set()) for o in objs}
    for line in out.splitlines():
        obj, _, rest = line.partition(": ")
        f = rest.split()
        if obj not in syms or len(f) < 2:
            continue
        if f[1] == "U":
            syms[obj][1].add(f[0])
        elif f[1] in "TDBRCGSVW":
            syms[obj][0].add(f[0])
    return syms


def call_graph(nm, build, dirs):
    """{file: {file it uses: [symbols]}}, and {file: undefined symbols}."""
    srcs = dict(o for tdir in dirs for o in objects(build, tdir))
    defs, uses = {}, {}
    for obj, (d, u) in symbols(nm, sorted(srcs)).items():
        uses[srcs[obj]] = u
        for s in d:
            defs[s] = srcs[obj]
    edges = collections.defaultdict(lambda: collections.defaultdict(list))
    for src, u in uses.items():
        for s in sorted(u):
            if s in defs and defs[s] != src:
                edges[src][defs[s]].append(s)
    return edges, uses


def components(nodes, edges):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def shortest_circle(edges, a, b):
    """The shortest path b -> ... -> a, closing the edge a -> b into a circle."""
    prev, todo = {b: None}, [b]
    while todo:
        nxt = []
        for v in todo:
            for w in sorted(edges.get(v, ())):
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        todo = nxt
        if a in prev:
            break
    path, v = [], a
    while v is not None:
        path.append(v)
        v = prev[v]
    return [a] + path[::-1]


def check_circles(name, edges, uses, failures):
    known = {e for e in KNOWN_EDGES if e[0] in uses and e[1] in uses}
    live = {(a, b) for a in edges for b in edges[a]}
    for e in sorted(known - live):
        failures.append("%s: known circle edge %s -> %s no longer exists: take it off the list" % (name, *e))
    graph = {a: {b: s for b, s in bs.items() if (a, b) not in known} for a, bs in edges.items()}
    seen = set()
    for comp in components(uses, graph):
        members = set(comp)
        for a in comp:
            for b in sorted(graph.get(a, ())):
                if b not in members:
                    continue
                circle = shortest_circle(graph, a, b)
                key = frozenset(zip(circle, circle[1:]))
                if key in seen:
                    continue
                seen.add(key)
                steps = ["%s -(%s)-> %s" % (x, edges[x][y][0], y) for x, y in zip(circle, circle[1:])]
                failures.append("%s: circle of files:\n      %s" % (name, "\n      ".join(steps)))
    for a, b in sorted(known & live):
        print("%s: known circle edge %s -> %s (%s)" % (name, a, b, ", ".join(edges[a][b])))


def layer_of(path):
    for lower in LOWER:
        if path.startswith(lower):
            return lower
    return None


def check_lower_calls(edges, failures):
    for a in sorted(edges):
        lower = layer_of(a)
        if not lower:
            continue
        for b, syms in sorted(edges[a].items()):
            if not b.startswith(LOWER[lower]):
                failures.append("libndk: %s calls up into %s (%s)" % (a, b, ", ".join(syms)))


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def check_lower_includes(source, failures):
    for lower, allowed in LOWER.items():
        base = os.path.join(source, lower)
        for f in sorted(os.listdir(base)):
            if not f.endswith((".c", ".h")):
                continue
            with open(os.path.join(base, f), encoding="utf-8") as fh:
                text = fh.read()
            for inc in INCLUDE.findall(text):
                cands = [os.path.normpath(os.path.join(lower, inc)), "src/" + inc, "include/" + inc,
                         "include/ndk/" + inc]
                target = next((c for c in cands if os.path.exists(os.path.join(source, c))), None)
                if target is None:
                    failures.append("%s%s includes \"%s\", which is not in the tree" % (lower, f, inc))
                elif not target.startswith(allowed):
                    failures.append("%s%s includes \"%s\" (%s), a layer above it" % (lower, f, inc, target))


def check_header_circles(source, failures):
    """Headers that include each other, directly or through others."""
    graph = {}
    for top in ("include", "src", "tools", "wdk"):
        for dirpath, _, files in os.walk(os.path.join(source, top)):
            for f in files:
                if not f.endswith(".h"):
                    continue
                path = os.path.relpath(os.path.join(dirpath, f), source)
                with open(os.path.join(source, path), encoding="utf-8") as fh:
                    incs = INCLUDE.findall(fh.read())
                graph[path] = set()
                for inc in incs:
                    cands = [os.path.normpath(os.path.join(os.path.dirname(path), inc)),
                             "src/" + inc, "include/" + inc, "include/ndk/" + inc, "tools/" + inc,
                             "wdk/include/" + inc]
                    found = next((c for c in cands if os.path.exists(os.path.join(source, c))), None)
                    if found:
                        graph[path].add(found)
    for comp in components(graph, graph):
        failures.append("headers that include each other: %s" % ", ".join(comp))


def check_os_calls(uses, failures):
    for src, u in sorted(uses.items()):
        bad = sorted(u & OS_CALLS)
        if bad and not src.startswith("src/net/"):
            failures.append("libndk: %s calls the operating system (%s): only src/net/ may"
                            % (src, ", ".join(bad)))


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    source, build = sys.argv[1], sys.argv[2]
    nm = sys.argv[3] if len(sys.argv) == 4 else "nm"
    failures = []
    for name, dirs in PROGRAMS.items():
        if not all(os.path.isdir(os.path.join(build, d)) for d in dirs):
            failures.append("%s: no objects under %s: build it first" % (name, build))
            continue
        edges, uses = call_graph(nm, build, dirs)
        if not uses:
            failures.append("%s: no objects found" % name)
            continue
        check_circles(name, edges, uses, failures)
        if name == "libndk":
            check_lower_calls(edges, failures)
            check_os_calls(uses, failures)
    check_lower_includes(source, failures)
    check_header_circles(source, failures)
    for f in failures:
        print("FAIL " + f)
    if failures:
        sys.exit(1)
    print("layers: no circle of files but the known ones above, no call or include upwards, "
          "no OS call outside src/net/")


if __name__ == "__main__":
    main()

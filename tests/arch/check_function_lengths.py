#!/usr/bin/env python3
"""The function length check (docs/architecture.md, "The layers").

Lists every function of libndk (src/) longer than LIMIT lines, counted from
the line that names it to its closing brace, and fails on each one that is
not in EXEMPT. A function over the limit is split into steps with names;
only a flat table or a switch that reads better whole is exempt, with its
reason.

It reads the sources as text: comments, strings and character constants
are blanked, preprocessor lines skipped, and a brace at file level opens a
function when the text before it (since the last declaration) ends with
the parameter list's ")". Headers count too (their static inline helpers).

Usage: check_function_lengths.py SOURCE_DIR
"""
import os
import re
import sys

LIMIT = 80

# "path:function" -> why it may be longer. An entry whose function is no
# longer over the limit is reported so that it can go.
EXEMPT = {}

TOKEN = re.compile(r"""
    (?P<comment>/\*.*?\*/|//[^\n]*)
  | (?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
""", re.S | re.X)


def blank(text):
    """The text with comments, strings and character constants turned into
    spaces (newlines kept, so line numbers stay), and preprocessor lines,
    with their continuations, emptied."""
    text = TOKEN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    out, in_directive = [], False
    for line in text.split("\n"):
        directive = in_directive or line.lstrip().startswith("#")
        in_directive = directive and line.rstrip().endswith("\\")
        out.append("" if directive else line)
    return "\n".join(out)


def functions(path):
    """(name, first line, last line) of each function defined in path."""
    text = blank(open(path, encoding="utf-8", errors="replace").read())
    found, depth, head_start, start = [], 0, 0, None
    line = 1
    for i, ch in enumerate(text):
        if ch == "\n":
            line += 1
        elif ch == "{":
            if depth == 0:
                head = text[head_start:i]
                m = re.search(r"([A-Za-z_]\w*)\s*\((?:[^()]|\([^()]*\))*\)\s*$", head)
                if m and not head.rstrip().endswith("="):
                    name_line = line - text[head_start + m.start(1):i].count("\n")
                    start = (m.group(1), name_line)
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                if start:
                    found.append((start[0], start[1], line))
                    start = None
                head_start = i + 1
        elif ch == ";" and depth == 0:
            head_start = i + 1
    return found


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    root = argv[1]
    failures, seen = 0, set()
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, "src")):
        dirnames.sort()
        for fn in sorted(filenames):
            if not fn.endswith((".c", ".h")):
                continue
            path = os.path.join(dirpath, fn)
            rel = os.path.relpath(path, root)
            for name, first, last in functions(path):
                length = last - first + 1
                if length <= LIMIT:
                    continue
                key = f"{rel}:{name}"
                seen.add(key)
                if key in EXEMPT:
                    print(f"exempt: {rel}:{first} {name}: {length} lines ({EXEMPT[key]})")
                else:
                    print(f"FAIL: {rel}:{first} {name}: {length} lines (limit {LIMIT}): split it into named steps")
                    failures += 1
    for key in sorted(set(EXEMPT) - seen):
        print(f"note: {key} is no longer over {LIMIT} lines; its EXEMPT entry can go")
    print(f"{failures} function(s) over {LIMIT} lines" if failures else f"ok: no function over {LIMIT} lines outside EXEMPT")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/python3
"""The shape check: no source file of src/ over 800 lines, no function over 120 lines.

A file that size is several concerns (split it by concern, each ending with its own
tables); a function that long is several steps (name them). The few that are still over
sit in ALLOWED with their size today; an entry may only shrink: a file or function that
grows past its entry fails, and so does an entry nothing needs any more, so the list
only gets shorter.

Functions are found the way the code is written (clang-format, .clang-format): a
definition starts at column 0 with a name and '(' and its body ends at the first '}' in
column 0.

Exit 0 clean, 1 on a violation or a stale entry, 2 on a usage error.
"""
import os
import re
import sys

MAX_FILE = 800
MAX_FUNC = 120

# "path" (file lines) or "path:function" (function lines): the size allowed for now.
ALLOWED = {
    "core/util.c": 1020,
    "doors/mcp.c": 1192,
}

DEF = re.compile(r"^(?!typedef|struct |enum |union |#|static const |const )[A-Za-z_][^;=]*?([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def functions(lines):
    """(name, length, first line) of each function definition."""
    i, n = 0, len(lines)
    while i < n:
        m = DEF.match(lines[i])
        if m:
            j = i
            while j < n and j < i + 8 and not lines[j].rstrip().endswith(("{", ";")):
                j += 1
            if j < n and lines[j].rstrip().endswith("{"):
                k = j + 1
                while k < n and not lines[k].startswith("}"):
                    k += 1
                yield m.group(1), k - i + 1, i + 1
                i = k + 1
                continue
        i += 1


def measure(src):
    """{key: size} of everything over the limits."""
    over = {}
    for root, _dirs, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith(".c"):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src).replace(os.sep, "/")
            with open(path, errors="replace") as f:
                lines = f.read().split("\n")
            if len(lines) - 1 > MAX_FILE:
                over[rel] = len(lines) - 1
            for fn, length, _at in functions(lines):
                if length > MAX_FUNC:
                    over["%s:%s" % (rel, fn)] = length
    return over


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print("usage: shape.py SRC_DIR", file=sys.stderr)
        return 2
    over = measure(argv[1])
    bad = 0
    for key, size in sorted(over.items()):
        limit = MAX_FUNC if ":" in key else MAX_FILE
        allowed = ALLOWED.get(key)
        if allowed is None:
            print("shape: %s is %d lines (limit %d): split it" % (key, size, limit))
            bad = 1
        elif size > allowed:
            print("shape: %s grew to %d lines (allowed %d while it is split)" % (key, size, allowed))
            bad = 1
    for key, allowed in sorted(ALLOWED.items()):
        if key not in over:
            print("shape: %s is within the limits now: remove its ALLOWED entry" % key)
            bad = 1
        elif over[key] < allowed:
            print("shape: %s shrank to %d lines: lower its ALLOWED entry from %d" % (key, over[key], allowed))
            bad = 1
    if not bad:
        print("shape: %d allowed, none over" % len(ALLOWED))
    return bad


if __name__ == "__main__":
    sys.exit(main(sys.argv))

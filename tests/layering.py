#!/usr/bin/python3
"""The layering check: every edge between folders of src/ must point down.

Folders, bottom to top, in one total order (docs/architecture.md draws the same table):

    core < sandbox < ledger < http < config < policy < discovery
         < pipeline < builtin < ext < doors < server < cli

A file may use its own folder and any folder below it, never one above. The issue's
brace group {sandbox, ledger, http, config, policy, discovery} is ordered so that its
one real sibling edge points down: policy -> sandbox (the snapshot holds the jail's root
dirfds, sandbox/jail.h), discovery -> policy (documents are cut per policy view). The
other siblings use none of each other today and, the order being total, a new sibling
edge must point down it or fail. `include/abx/` is the public API: anyone may use it.

Two kinds of edge are read:
  include  every `#include "x/..."` in src/ (and `#include "y.h"`, meaning the
           including file's own folder), always;
  call     with --objects DIR: every undefined symbol of an object under DIR that exactly
           one other object defines (nm), so a call through a declaration in a lower
           header (how core/registry.c reached builtin) is an edge too.

Known violations sit in ALLOWED below, one commented entry per file pair, with the cut
the review proposes (../shared/design/REVIEW-2026-12.md section 3). The list is the
to-do list: a new back edge fails, and so does an entry no edge needs any more (when
both kinds are read), so the list can only shrink.

Exit 0 clean, 1 on a violation or a stale entry, 2 on a usage error.
"""
import os
import re
import subprocess
import sys

ORDER = ["core", "sandbox", "ledger", "http", "config", "policy", "discovery",
         "pipeline", "builtin", "ext", "doors", "server", "cli"]

# Files that belong to another layer than their folder's (none today: the listener and
# the composition root moved from http/server.c to src/server/).
FOLDER_OF = {}

# (from, to): why it is allowed for now, and the cut that removes it.
ALLOWED = {
    # Cycle A, ties 1 and 2 are cut: the in-process calls live in pipeline/call.c, and
    # abx_ctx_header (pipeline/request.c) asks the lookup the listener puts on the request.
    # Cycle A, tie 3 is cut: abx_procs_new receives the confine mode, the run ids and the
    # runtime dir, and makes private TMPDIRs (abx_procs_make_tmpdir). Tie 4 is cut:
    # system.reload calls abx_ctx_reload, which runs the reload the server installed.
    # Cycle A, tie 5 is cut (it pointed down, so it was never listed): a namespace is a
    # descriptor {name, ops, state_new, state_free} whose state the server drives
    # (pipeline/namespace.c). Tie 8 is cut: pipeline.h only forward-declares abx_ext, and
    # GET /commands lists through the command registry the server installs (s->commands).
    # Cycle A, tie 6 (dispatch.c calling batch/toolcall/mcp/legacy) is invisible here:
    # the doors still live in pipeline/. It shows when they move to src/doors/.
    # Cycle A, tie 7 is cut: POST /commands/{name} resolves the name to custom.<id>
    # through the command registry the server installs from ext (s->commands).
    # Issue 12's approval binding is cut: the binder asks the op's namespace descriptor
    # (bind_cwd, bind_argv), which commands.c and custom.c fill; the server starts ext's.
}


# The handler rule (docs/architecture.md, "What a handler may ask of its context"): a
# file of a handler layer may include from src/pipeline/ only pipeline/ctx.h, the
# handler's whole view; the request and server layouts (pipeline.h) stay in the
# pipeline. Known exceptions, each with the cut that removes it, would sit here:
HANDLER_LAYERS = ("builtin", "ext")
HANDLER_VIEW = "pipeline/ctx.h"
HANDLER_ALLOWED = {
    # none: files/ asks its context too (it read the request through builtin_req() when
    # this rule landed)
}


def handler_violations(edges):
    """(from, to, why) for each include by a handler file of a pipeline header other
    than ctx.h, and the HANDLER_ALLOWED entries it did not need."""
    bad, used = [], set()
    for a, b in sorted(edges):
        if folder_of(a) not in HANDLER_LAYERS or folder_of(b) != "pipeline" or b == HANDLER_VIEW:
            continue
        if (a, b) in HANDLER_ALLOWED:
            used.add((a, b))
            continue
        bad.append((a, b, "a handler sees only its context: include %s, not %s" % (HANDLER_VIEW, b)))
    return bad, set(HANDLER_ALLOWED) - used


def folder_of(rel):
    """rel is a path under src/ ("pipeline/mcp.c"); its layer name."""
    if rel in FOLDER_OF:
        return FOLDER_OF[rel]
    return rel.split("/", 1)[0]


def rank(folder):
    return ORDER.index(folder) if folder in ORDER else None


def source_files(src):
    for root, _dirs, files in os.walk(src):
        for name in sorted(files):
            if name.endswith((".c", ".h")):
                path = os.path.join(root, name)
                yield os.path.relpath(path, src).replace(os.sep, "/")


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def include_edges(src):
    """(from, to) for each quoted include that names a file under src/."""
    edges = set()
    for rel in source_files(src):
        with open(os.path.join(src, rel), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for target in INCLUDE.findall(text):
            if "/" not in target:  # the including file's own folder
                target = rel.rsplit("/", 1)[0] + "/" + target
            if os.path.isfile(os.path.join(src, target)):
                edges.add((rel, target))
            # anything else is the public API (abx/...) or a generated header
    return edges


def object_files(objdir):
    for root, _dirs, files in os.walk(objdir):
        for name in files:
            if name.endswith(".o"):
                yield os.path.join(root, name)


def source_of_object(path):
    """.../CMakeFiles/abx_pipeline.dir/src/pipeline/call.c.o -> pipeline/call.c"""
    parts = path.replace(os.sep, "/").split("/src/")
    if len(parts) < 2 or not parts[-1].endswith(".o"):
        return None
    return parts[-1][:-2]


def call_edges(objdir, src):
    """(from, to) for each call into another file; None when no object of src/ is there."""
    defined, used = {}, {}
    read = 0
    for obj in object_files(objdir):
        rel = source_of_object(obj)
        if rel is None or not os.path.isfile(os.path.join(src, rel)):
            continue  # tests, fuzzers, generated code, objects of deleted sources
        read += 1
        out = subprocess.run(["nm", "-P", obj], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            f = line.split()
            if len(f) < 2:
                continue
            name, kind = f[0], f[1]
            if kind == "U":
                used.setdefault(rel, set()).add(name)
            elif kind.isupper() or kind in "vw":
                defined.setdefault(name, set()).add(rel)
    edges = set()
    for rel, names in used.items():
        for name in names:
            where = defined.get(name, ())
            if len(where) == 1:
                (to,) = where
                if to != rel:
                    edges.add((rel, to))
    return edges if read else None


def violations(edges):
    bad = []
    for a, b in sorted(edges):
        fa, fb = folder_of(a), folder_of(b)
        ra, rb = rank(fa), rank(fb)
        if ra is None or rb is None:
            bad.append((a, b, "folder %r is not in the layer order" % (fa if ra is None else fb)))
        elif rb > ra:
            bad.append((a, b, "%s may not use %s (it lies above)" % (fa, fb)))
    return bad


def unlisted(src):
    """With src/sources.cmake beside the sources: every .c under src/ is listed there and
    every listed file exists, so an explicit list cannot drop a file without a word."""
    listing = os.path.join(src, "sources.cmake")
    if not os.path.isfile(listing):
        return []
    with open(listing) as f:
        listed = set(re.findall(r"^\s*src/(\S+\.c)\s*$", f.read(), re.M))
    present = {rel for rel in source_files(src) if rel.endswith(".c")}
    return (["%s is not listed in src/sources.cmake" % rel for rel in sorted(present - listed)] +
            ["src/sources.cmake lists %s, which does not exist" % rel for rel in sorted(listed - present)])


def main(argv):
    args = argv[1:]
    src, objdir = None, None
    while args:
        a = args.pop(0)
        if a == "--objects" and args:
            objdir = args.pop(0)
        elif src is None and not a.startswith("-"):
            src = a
        else:
            print("usage: layering.py SRC_DIR [--objects BUILD_DIR]", file=sys.stderr)
            return 2
    if src is None or not os.path.isdir(src):
        print("layering: no source folder %r" % src, file=sys.stderr)
        return 2
    edges = {(a, b, "include") for a, b in include_edges(src)}
    if objdir is not None:
        calls = call_edges(objdir, src)
        if calls is None:
            print("layering: no objects under %s (build first)" % objdir, file=sys.stderr)
            return 2
        edges |= {(a, b, "call") for a, b in calls}
    kinds = {}
    for a, b, k in edges:
        kinds.setdefault((a, b), set()).add(k)
    failed = 0
    for msg in unlisted(src):
        print("layering: " + msg)
        failed = 1
    used_allow = set()
    for a, b, why in violations(kinds):
        if (a, b) in ALLOWED:
            used_allow.add((a, b))
            continue
        print("layering: back edge %s -> %s (%s): %s"
              % (a, b, "+".join(sorted(kinds[(a, b)])), why))
        failed = 1
    includes = {(a, b) for a, b, k in edges if k == "include"}
    hbad, hstale = handler_violations(includes)
    for a, b, why in hbad:
        print("layering: handler include %s -> %s: %s" % (a, b, why))
        failed = 1
    for a, b in sorted(hstale):
        print("layering: stale handler allowlist entry %s -> %s (%s): remove it"
              % (a, b, HANDLER_ALLOWED[(a, b)]))
        failed = 1
    if objdir is not None:
        for pair in sorted(set(ALLOWED) - used_allow):
            print("layering: stale allowlist entry %s -> %s (%s): remove it"
                  % (pair[0], pair[1], ALLOWED[pair]))
            failed = 1
    if not failed:
        print("layering: %d edges, %d allowed back edges (%s)"
              % (len(kinds), len(used_allow), "includes and calls" if objdir else "includes only"))
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv))

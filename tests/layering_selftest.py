#!/usr/bin/python3
"""The layering check must fail on a back edge, or it proves nothing.

Plants back edges in throwaway trees and asserts tests/layering.py exits 1 and names the
edge: an include from core up into pipeline (in a two-folder fixture and in a copy of the
real src/), a call through a local declaration (objects compiled here with cc, read with
nm), an allowlist entry no edge needs any more, a .c file missing from
src/sources.cmake, and a handler (src/builtin) including pipeline.h instead of ctx.h. The clean fixture must pass.
Usage: layering_selftest.py [SRC_DIR]  (default: src/ beside tests/)
"""
import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import layering  # noqa: E402

FIXTURE = {
    "core/a.h": "int a_fn(void);\n",
    "core/a.c": '#include "a.h"\nint a_fn(void) { return 1; }\n',
    "pipeline/p.h": '#include "core/a.h"\nint p_fn(void);\n',
    "pipeline/p.c": '#include "pipeline/p.h"\nint p_fn(void) { return a_fn() + 1; }\n',
}


def write_tree(root, files):
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


def run(*argv, allowed=None, handler_allowed=None):
    """The check on argv; with allowed, in place of the real allowlist (a fixture has
    none of the real tree's edges, so the real entries would all be stale there; the
    handler exceptions are emptied with it)."""
    out = io.StringIO()
    real, real_handler = layering.ALLOWED, layering.HANDLER_ALLOWED
    if allowed is not None:
        layering.ALLOWED, layering.HANDLER_ALLOWED = allowed, {}
    if handler_allowed is not None:
        layering.HANDLER_ALLOWED = handler_allowed
    try:
        with contextlib.redirect_stdout(out):
            rc = layering.main(["layering.py", *argv])
    finally:
        layering.ALLOWED, layering.HANDLER_ALLOWED = real, real_handler
    return rc, out.getvalue()


def compile_tree(src, objdir):
    for rel in FIXTURE:
        if rel.endswith(".c"):
            obj = os.path.join(objdir, "src", rel + ".o")
            os.makedirs(os.path.dirname(obj), exist_ok=True)
            subprocess.run(["cc", "-c", "-I", src, "-o", obj, os.path.join(src, rel)], check=True)


def expect(name, got, rc, needle):
    code, out = got
    if code != rc or needle not in out:
        print("FAIL %s: exit %d (want %d), output:\n%s" % (name, code, rc, out))
        return 1
    print("ok   %s" % name)
    return 0


def main():
    real_src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "src")
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "fixture", "src")
        write_tree(src, FIXTURE)
        failures += expect("clean fixture passes", run(src, allowed={}), 0, "layering:")

        # 1. an include from core up into pipeline
        with open(os.path.join(src, "core/a.c"), "a") as f:
            f.write('#include "pipeline/p.h"\n')
        failures += expect("include back edge fails", run(src, allowed={}), 1,
                           "back edge core/a.c -> pipeline/p.h (include)")
        write_tree(src, FIXTURE)

        # 2. a call with no include: core declares p_fn itself and calls it
        with open(os.path.join(src, "core/a.c"), "a") as f:
            f.write("int p_fn(void);\nint a_up(void);\nint a_up(void) { return p_fn(); }\n")
        obj = os.path.join(tmp, "build")
        compile_tree(src, obj)
        failures += expect("includes alone miss the call", run(src, allowed={}), 0, "layering:")
        failures += expect("call back edge fails", run(src, "--objects", obj, allowed={}), 1,
                           "back edge core/a.c -> pipeline/p.c (call)")
        write_tree(src, FIXTURE)
        shutil.rmtree(obj)
        compile_tree(src, obj)

        failures += expect("clean fixture passes with its objects", run(src, "--objects", obj, allowed={}),
                           0, "layering:")

        # 3. an allowlist entry that no edge needs any more
        failures += expect("stale allowlist entry fails",
                           run(src, "--objects", obj, allowed={("core/a.c", "pipeline/p.c"): "planted"}), 1,
                           "stale allowlist entry core/a.c -> pipeline/p.c")

        # 4. the real tree with one planted include: the order above is the one enforced
        copy = os.path.join(tmp, "real", "src")
        shutil.copytree(real_src, copy)
        failures += expect("real tree passes (includes)", run(copy), 0, "layering:")
        open(os.path.join(copy, "core/unlisted.c"), "w").close()
        failures += expect("a source missing from sources.cmake fails", run(copy), 1,
                           "core/unlisted.c is not listed in src/sources.cmake")
        os.unlink(os.path.join(copy, "core/unlisted.c"))
        with open(os.path.join(copy, "core/ids.c"), "a") as f:
            f.write('#include "pipeline/pipeline.h"\n')
        failures += expect("real tree with a planted include fails", run(copy), 1,
                           "back edge core/ids.c -> pipeline/pipeline.h")
        shutil.rmtree(copy)
        shutil.copytree(real_src, copy)

        # 5. a handler reaching past its context: builtin may use pipeline/ctx.h only
        with open(os.path.join(copy, "builtin/core.c"), "a") as f:
            f.write('#include "pipeline/pipeline.h"\n')
        failures += expect("a handler including pipeline.h fails", run(copy), 1,
                           "handler include builtin/core.c -> pipeline/pipeline.h")

        # 6. an exception no include needs any more (in the clean real tree)
        shutil.rmtree(copy)
        shutil.copytree(real_src, copy)
        failures += expect("a stale handler exception fails",
                           run(copy, handler_allowed={("builtin/x.c", "pipeline/pipeline.h"): "planted"}), 1,
                           "stale handler allowlist entry builtin/x.c -> pipeline/pipeline.h")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

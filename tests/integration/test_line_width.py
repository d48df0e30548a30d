#!/usr/bin/env python3
"""Every tracked C file keeps within the column limit of .clang-format.

The limit is read from .clang-format's ColumnLimit (110), so the test and
the formatter cannot drift apart. A line's width counts code points, with
tabs to the next multiple of IndentWidth, as clang-format counts columns
(a "→" is one column, not three bytes). `clang-format -i --lines=N:N FILE`
brings a reported line within the limit without touching the rest.

The checker first proves on made-up text that it flags a line one column
over the limit and passes one at the limit, so a broken reader cannot pass
vacuously.
"""
import os
import re
import subprocess
import sys

ROOT = os.environ.get("OP_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def style():
    """(ColumnLimit, IndentWidth) of .clang-format."""
    with open(os.path.join(ROOT, ".clang-format"), encoding="utf-8") as f:
        text = f.read()
    limit = re.search(r"^ColumnLimit:\s*(\d+)", text, re.M)
    indent = re.search(r"^IndentWidth:\s*(\d+)", text, re.M)
    assert limit, ".clang-format has no ColumnLimit"
    return int(limit.group(1)), int(indent.group(1)) if indent else 2


def c_files():
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "*.c", "*.h"], capture_output=True, text=True,
                             check=True).stdout.split()
        if out:
            return out
    except (OSError, subprocess.CalledProcessError):
        pass
    found = []
    for top, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and not d.startswith("build")]
        found += [os.path.relpath(os.path.join(top, n), ROOT) for n in names if n.endswith((".c", ".h"))]
    return found


def too_wide(text, limit, tab):
    """[(line number, width)] of the lines of text wider than limit."""
    return [(i, len(line.expandtabs(tab))) for i, line in enumerate(text.split("\n"), 1)
            if len(line.expandtabs(tab)) > limit]


def test_the_checker_flags_a_wide_line():
    limit, tab = style()
    at = "x" * limit
    over = "y" * (limit + 1)
    arrows = "→" * limit  # three bytes each, one column
    assert too_wide("\n".join([at, arrows, over, at]), limit, tab) == [(3, limit + 1)]
    assert too_wide("\t" + "z" * (limit - tab + 1), limit, tab) == [(1, limit + 1)]


def test_every_c_file_within_the_limit():
    limit, tab = style()
    files = c_files()
    assert len(files) > 100, "only %d C files found under %s" % (len(files), ROOT)
    bad = []
    for rel in files:
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            bad += ["%s:%d: %d columns" % (rel, n, w) for n, w in too_wide(f.read(), limit, tab)]
    assert not bad, "%d lines over %d columns (clang-format -i --lines=N:N FILE):\n%s" % (
        len(bad), limit, "\n".join(bad[:40]))


if __name__ == "__main__":
    failed = 0
    for name, fn in sorted(globals().items()):
        if name.startswith("test_") and callable(fn):
            try:
                fn()
                print("ok   %s" % name)
            except AssertionError as e:
                failed += 1
                print("FAIL %s: %s" % (name, e))
    sys.exit(1 if failed else 0)

#!/usr/bin/env python3
"""The README stays two screens and its commands stay true.

A new user reads README.md top to bottom and types its commands; when one
of them names a script, chart, value or release file that is gone, the
first thing they try fails. Checked, reading the files only (well under a
second; no build, no cluster):

- test_two_screens: README.md is at most MAX_LINES lines and holds what
  its first screens are for: what slurmop is, the quick start (bench/demo.sh,
  tests/run.sh), the install (deploy/release.sh, helm install), coming from
  Slinky (docs/migrate-from-slinky.md), where the numbers are
  (docs/benchmarks.md, bench/README.md) and the docs index.
- test_paths_exist: every repository path README.md and deploy/README.md
  name in backquotes or commands (docs/..., deploy/..., tests/..., ...)
  exists in the tree; a path with a placeholder (<key>, ARCHIVE, ...) is
  left out.
- test_install_commands: in README.md's code blocks, every `bash X` script
  exists, every `helm install` names a chart folder of the tree or a
  package deploy/release.sh writes (its file names, with the version as
  VERSION), and every `--set KEY=...` of the operator chart is one of its
  values.

Run directly (python3 test_readme.py [name-substring]) or through ctest.
"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from kubesim import run_tests  # noqa: E402

ROOT = os.environ.get("OP_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# Two screens of a laptop's terminal or browser window, about 55 lines each.
MAX_LINES = 115
TOP = ("docs", "deploy", "tests", "bench", "crds", "core", "watchers", "reconcilers", "slurmio", "kubesim",
       "cmd", "cmake")
PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w./-]*[\w/])" % "|".join(TOP))
PLACEHOLDER = re.compile(r"<|>|\bX\b|ARCHIVE|REGISTRY|VERSION|\*")


def text(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def code_lines(md):
    """The lines of md's fenced code blocks, with continuation lines joined."""
    out, inside, cur = [], False, ""
    for line in md.splitlines():
        if line.startswith("```"):
            inside = not inside
            continue
        if not inside:
            continue
        cur += line.rstrip()
        if cur.endswith("\\"):
            cur = cur[:-1] + " "
            continue
        out.append(cur)
        cur = ""
    return out


def test_two_screens():
    md = text("README.md")
    n = len(md.splitlines())
    assert n <= MAX_LINES, "README.md has %d lines, more than two screens (%d): move the detail to docs/" % (
        n, MAX_LINES)
    lower = md.lower()
    for what, needles in (("what it is", ["kubernetes operator", "slinky.slurm.net/v1beta1"]),
                          ("the demo and the tests", ["bash bench/demo.sh", "bash tests/run.sh"]),
                          ("the install", ["bash deploy/release.sh", "helm install"]),
                          ("coming from Slinky", ["docs/migrate-from-slinky.md"]),
                          ("where the numbers are", ["docs/benchmarks.md", "bench/readme.md"]),
                          ("the docs index", ["## documentation", "docs/troubleshooting.md", "docs/metrics.md"])):
        missing = [x for x in needles if x.lower() not in lower]
        assert not missing, "README.md lacks %s: %s" % (what, missing)
    print("  README.md: %d lines" % n)


def test_paths_exist():
    bad = []
    seen = 0
    for doc in ("README.md", "deploy/README.md"):
        for m in PATH.finditer(text(doc)):
            p = m.group(1).rstrip(".")
            if PLACEHOLDER.search(p):
                continue
            seen += 1
            if not os.path.exists(os.path.join(ROOT, p)):
                bad.append("%s: %s" % (doc, p))
    assert seen >= 40, seen  # the pattern still finds the paths
    assert not bad, "named but not in the tree:\n  " + "\n  ".join(sorted(set(bad)))
    print("  %d paths named, all in the tree" % seen)


def release_files():
    """The file names deploy/release.sh writes, with $VERSION as VERSION:
    the ones it spells out, and the packages of its chart loop."""
    sh = text("deploy/release.sh")
    out = {n.replace("$VERSION", "VERSION") for n in re.findall(r"(?<![\w$])([a-z][\w-]*-\$VERSION\.[\w.]+)", sh)}
    loop = re.search(r"for c in ([\w -]+); do", sh)
    assert loop and "$c-$VERSION.tgz" in sh, "release.sh: no chart loop writing $c-$VERSION.tgz"
    out |= {"%s-VERSION.tgz" % c for c in loop.group(1).split()}
    return out


def operator_values():
    keys = set()
    stack = []
    for line in text("deploy/helm/slurmop/values.yaml").splitlines():
        m = re.match(r"^( *)([A-Za-z][\w-]*):", line)
        if not m or line.lstrip().startswith("#"):
            continue
        depth = len(m.group(1)) // 2
        stack = stack[:depth] + [m.group(2)]
        keys.add(".".join(stack))
    return keys


def test_install_commands():
    lines = code_lines(text("README.md"))
    written = release_files()
    values = operator_values()
    checked = 0
    for ln in lines:
        cmd = ln.split("#", 1)[0]
        for script in re.findall(r"\bbash (\S+\.sh)\b", cmd):
            assert os.path.exists(os.path.join(ROOT, script)), \
                "README.md runs %s, which is not in the tree" % script
            checked += 1
        m = re.search(r"\bhelm install \S+ (\S+)", cmd)
        if m:
            chart = m.group(1)
            if chart.startswith("out/"):
                name = re.sub(r"\d+\.\d+\.\d+(-[\w.]+)?", "VERSION", os.path.basename(chart))
                assert name in written, "README.md installs %s, which deploy/release.sh does not write (%s)" % (
                    chart, sorted(written))
            else:
                assert os.path.exists(os.path.join(ROOT, chart, "Chart.yaml")), "no chart at %s" % chart
            checked += 1
            if "deploy/helm/slurmop" in chart or re.search(r"/slurmop-\d", chart):
                for key in re.findall(r"--set ([\w.]+)=", cmd):
                    assert key in values, "README.md sets %s, not a value of the operator chart" % key
                    checked += 1
    assert checked >= 6, checked
    print("  %d scripts, charts and values of the README's commands, all there" % checked)


if __name__ == "__main__":
    run_tests(globals())

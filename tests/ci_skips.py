#!/usr/bin/env python3
"""The CI rule on skipped tests: a green run must have run the tests that
matter. `python3 tests/ci_skips.py BUILD_DIR` reads the JUnit report that
tests/run.sh has ctest write (BUILD_DIR/ctest-junit.xml) and exits 1 when
a test was skipped (exit 77, or ctest's "not run") that is not allowed to
skip here.

Why: the Slurm, k8s and pods tests exit 77 when their prerequisites are
missing (no root, no Go, no Slurm binaries). That is right on a developer's
laptop, but in CI it would turn a machine that lost a prerequisite into a
green run with no drain-safety test run at all.

A skip is allowed only by a line of tests/ci-skips.txt:
    <test name regex>  <output regex>  <reason>
(tab-separated): the test may skip when its output matches the output
regex, i.e. for the one reason the line gives and no other. Disabled tests
(DISABLED in tests/CMakeLists.txt, each with its reason there) are listed
but do not fail the run.

Exit 2 when the report is missing or unreadable: the rule cannot be
checked, which must not pass for "nothing skipped"."""

import os
import re
import sys
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))


def allowed_rules(path):
    rules = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            parts = [p for p in line.split("\t") if p]
            if len(parts) != 3:
                raise SystemExit("%s:%d: want <test regex> TAB <output regex> TAB <reason>" % (path, n))
            rules.append((re.compile(parts[0]), re.compile(parts[1]), parts[2], n))
    return rules


def skipped(report):
    """(name, output, disabled) of every test the report marks not run."""
    root = ET.parse(report).getroot()
    suites = [root] if root.tag == "testsuite" else root.iter("testsuite")
    out = []
    for suite in suites:
        for case in suite.iter("testcase"):
            status = case.get("status", "")
            skip = case.find("skipped")
            if status not in ("notrun", "disabled") and skip is None:
                continue
            text = "".join(e.text or "" for e in case.iter() if e.tag in ("system-out", "skipped"))
            text += (skip.get("message", "") if skip is not None else "")
            disabled = status == "disabled"
            out.append((case.get("name", "?"), text, disabled))
    return out


def check(report, rules):
    """The lines to print and whether the rule holds."""
    lines, ok = [], True
    for name, text, disabled in skipped(report):
        if disabled:
            lines.append("disabled (tests/CMakeLists.txt says why): %s" % name)
            continue
        rule = next((r for r in rules if r[0].fullmatch(name) and r[1].search(text)), None)
        if rule:
            lines.append("skipped, allowed by tests/ci-skips.txt:%d (%s): %s" % (rule[3], rule[2], name))
            continue
        ok = False
        why = [l for l in text.splitlines() if l.strip()][-3:]
        lines.append("SKIPPED, not allowed in CI: %s\n    %s" % (name, "\n    ".join(why) or "(no output)"))
    return lines, ok


def main(argv):
    if len(argv) != 2:
        raise SystemExit("usage: ci_skips.py BUILD_DIR")
    report = os.path.join(argv[1], "ctest-junit.xml")
    try:
        lines, ok = check(report, allowed_rules(os.path.join(HERE, "ci-skips.txt")))
    except (OSError, ET.ParseError) as e:
        print("tests/ci_skips.py: cannot read %s: %s" % (report, e), file=sys.stderr)
        return 2
    for l in lines:
        print("tests/ci_skips.py: " + l, file=sys.stderr)
    if not ok:
        print("tests/ci_skips.py: tests skipped in CI that must run (install what they need, or allow the"
              " skip in tests/ci-skips.txt with its reason)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

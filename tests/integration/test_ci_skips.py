"""tests/ci_skips.py, the CI rule on skipped tests: a JUnit report of the
shape ctest 3.25 writes (checked by running ctest on a two-line project when
cmake is there) fails the rule for a skip that tests/ci-skips.txt does not
allow, passes it for an allowed skip with the matching output, and not for
the same test skipped for another reason; disabled tests do not count; a
missing report is an error, not a pass. Reads files only, in under a second."""

import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import ci_skips  # noqa: E402

CASE = """	<testcase name="%s" classname="%s" time="0.1" status="%s">
		%s<system-out>%s</system-out>
	</testcase>
"""


def report(d, cases):
    body = "".join(CASE % (n, n, st, '<skipped message="SKIP_RETURN_CODE=77"/>' if st == "notrun" else "", out)
                   for n, st, out in cases)
    with open(os.path.join(d, "ctest-junit.xml"), "w") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="t" tests="%d">\n%s</testsuite>\n'
                % (len(cases), body))


def rules(d, text):
    p = os.path.join(d, "skips.txt")
    with open(p, "w") as f:
        f.write(text)
    return ci_skips.allowed_rules(p)


def main():
    d = tempfile.mkdtemp(prefix="ci-skips.")
    try:
        r = rules(d, "# comment\n\nslinky_parity\tcannot be built here\tthe peer\n")
        report(d, [("unit.a", "run", "ok"), ("pods.slurm_24_11", "disabled", "Disabled")])
        lines, ok = ci_skips.check(os.path.join(d, "ctest-junit.xml"), r)
        assert ok, lines
        report(d, [("integration.slurm_safety", "notrun", "SKIP: not root")])
        lines, ok = ci_skips.check(os.path.join(d, "ctest-junit.xml"), r)
        assert not ok and "integration.slurm_safety" in lines[0] and "not root" in lines[0], lines
        report(d, [("slinky_parity", "notrun", "SKIP: Slinky v1.2.1 cannot be built here: no archive")])
        lines, ok = ci_skips.check(os.path.join(d, "ctest-junit.xml"), r)
        assert ok and "allowed" in lines[0], lines
        report(d, [("slinky_parity", "notrun", "SKIP: slurmop is not built")])
        lines, ok = ci_skips.check(os.path.join(d, "ctest-junit.xml"), r)
        assert not ok, lines
        assert ci_skips.main(["ci_skips.py", os.path.join(d, "absent")]) == 2
        try:
            rules(d, "only-one-field\n")
            raise AssertionError("a line without three fields was accepted")
        except SystemExit as e:
            assert "TAB" in str(e), e
        # The project's own list parses.
        ci_skips.allowed_rules(os.path.join(HERE, "..", "ci-skips.txt"))
        # The report's shape, from ctest itself.
        if shutil.which("cmake") and shutil.which("ctest"):
            p = os.path.join(d, "proj")
            os.makedirs(p)
            with open(os.path.join(p, "CMakeLists.txt"), "w") as f:
                f.write("cmake_minimum_required(VERSION 3.20)\nproject(p NONE)\nenable_testing()\n"
                        "add_test(NAME s COMMAND sh -c \"echo SKIP: no root; exit 77\")\n"
                        "set_tests_properties(s PROPERTIES SKIP_RETURN_CODE 77)\n"
                        "add_test(NAME ok COMMAND true)\n")
            b = os.path.join(p, "b")
            subprocess.run(["cmake", "-S", p, "-B", b], check=True, capture_output=True, timeout=60)
            subprocess.run(["ctest", "--output-junit", os.path.join(b, "ctest-junit.xml")], cwd=b,
                           check=True, capture_output=True, timeout=60)
            got = ci_skips.skipped(os.path.join(b, "ctest-junit.xml"))
            assert [(n, "no root" in t, dis) for n, t, dis in got] == [("s", True, False)], got
        print("ok")
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()

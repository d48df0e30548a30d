#!/usr/bin/env python3
"""The tree stands on its own: no file points at documents outside it.

Every tracked text file (git ls-files; a walk of the source tree when git is
not available) is searched for references to documents the repository does
not hold: the Slinky compatibility spec, the Kubernetes wire reference, the
Slurm lab notes, design and style documents kept elsewhere, and bare
section signs (which only ever meant sections of those). Section signs of
public standards ("RFC 4253 §6.6") are allowed. The behaviours such
references meant are described in docs/compat.md and
docs/internals/KUBE-API.md; cite those.

Also: every "<file>.md#<anchor>" reference and every in-page "(#anchor)"
link in the tree must name a heading that exists (GitHub's anchor rules), so
a renamed section cannot leave dangling citations.
"""
import os
import re
import subprocess
import sys

ROOT = os.environ.get("OP_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SELF = os.path.relpath(os.path.abspath(__file__), ROOT)

# Built from pieces so that this file does not match itself.
OUTSIDE = re.compile(
    "|".join(
        [
            r"slinky" + r"-compat",
            r"k8s" + r"-wire",
            r"slurm" + r"-lab\.md",
            r"\bDESIGN" + r"\.md",
            r"\bSTYLE" + r"\.md",
            r"spec/(?:slinky|k8s|slurm)",
            r"shared" + r"/spec",
            r"/work" + r"/shared",
        ]
    )
)
SECTION = "\u00a7"
RFC_SECTION = re.compile(r"RFC \d+ " + SECTION)
MD_REF = re.compile(r"((?:\.\./|[\w.-]+/)*[\w.-]+\.md)#([A-Za-z0-9_-]+)")
PAGE_LINK = re.compile(r"\]\(#([A-Za-z0-9_-]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def tracked_files():
    try:
        out = subprocess.run(
            ["git", "-C", ROOT, "ls-files", "-z"], check=True, capture_output=True
        ).stdout.decode()
        files = [f for f in out.split("\0") if f]
        if files:
            return files
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for d, dirs, names in os.walk(ROOT):
        dirs[:] = [x for x in dirs if not x.startswith((".", "build"))]
        files += [os.path.relpath(os.path.join(d, n), ROOT) for n in names]
    return files


def read_text(path):
    try:
        with open(os.path.join(ROOT, path), "rb") as f:
            data = f.read()
    except OSError:
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def slug(text):
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"`", "", text.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        found = set()
        text = read_text(path) or ""
        seen = {}
        fence = False
        for line in text.splitlines():
            if line.startswith("```"):
                fence = not fence
                continue
            m = None if fence else HEADING.match(line)
            if not m:
                continue
            s = slug(m.group(2))
            n = seen.get(s, 0)
            seen[s] = n + 1
            found.add(s if n == 0 else "%s-%d" % (s, n))
        _anchors[path] = found
    return _anchors[path]


def resolve(ref, where, files):
    """The tracked file a reference names: relative to the file, else to the root."""
    here = os.path.normpath(os.path.join(os.path.dirname(where), ref))
    if here in files:
        return here
    root = os.path.normpath(ref)
    return root if root in files else None


def main():
    files = tracked_files()
    fileset = set(files)
    outside, dangling = [], []
    for path in files:
        if path == SELF:
            continue
        text = read_text(path)
        if text is None:
            continue
        # Most files have nothing to look at: skip them without a line loop.
        if not (OUTSIDE.search(text) or SECTION in text or ".md#" in text or "](#" in text):
            continue
        for no, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line) or SECTION in RFC_SECTION.sub("", line):
                outside.append("%s:%d: %s" % (path, no, line.strip()[:160]))
            for m in MD_REF.finditer(line):
                target = resolve(m.group(1), path, fileset)
                if target is None:
                    continue  # not a file of the tree (caught above when it is an outside document)
                if m.group(2) not in anchors(target):
                    dangling.append("%s:%d: %s#%s: no such heading in %s" % (path, no, m.group(1), m.group(2), target))
            if path.endswith(".md"):
                for m in PAGE_LINK.finditer(line):
                    if m.group(1) not in anchors(path):
                        dangling.append("%s:%d: #%s: no such heading" % (path, no, m.group(1)))
    ok = True
    if outside:
        ok = False
        print("References to documents outside the tree (cite docs/compat.md, docs/internals/KUBE-API.md, "
              "tests/slurm/README.md or state the fact instead):")
        print("\n".join("  " + x for x in outside))
    if dangling:
        ok = False
        print("References to headings that do not exist:")
        print("\n".join("  " + x for x in dangling))
    if not ok:
        return 1
    print("tree_refs: %d files, no outside references, every .md#anchor resolves" % len(files))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The layers include only what stands below them.

Every tracked C file (git ls-files; a walk of the source tree when git is
not available) of a layer folder is read for its #include "..." lines, and
each include is resolved to the folder it names. A layer may include only
itself and the folders under it:

    core/                                   nothing above it
    slurmio/, watchers/, kubesim/           core/
    reconcilers/                            core/, slurmio/, watchers/
    cmd/                                    core/, slurmio/, watchers/, reconcilers/
    bench/                                  all of the above and kubesim/, never tests/

tests/ may include anything. An include without a folder ("ks_int.h") is
its own folder's.

Inside reconcilers/, the operator (operator.c) includes no reconciler: it
makes, runs and frees them through the registry (reconcilers.h). Of
reconcilers/ it may include only OPERATOR_MAY_INCLUDE (the modules it runs
itself, which are not in the registry), and never a header that declares a
registry module (`extern const op_reconciler`), whatever the list says.

The checker first proves on made-up files that it flags an include from a
higher layer and a reconciler included by the operator, so a broken parser
cannot pass vacuously.
"""
import os
import posixpath
import re
import subprocess
import sys

ROOT = os.environ.get("OP_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

BASE = {"core"}
ALLOWED = {
    "core": BASE,
    "slurmio": BASE | {"slurmio"},
    "watchers": BASE | {"watchers"},
    "kubesim": BASE | {"kubesim"},
    "reconcilers": BASE | {"slurmio", "watchers", "reconcilers"},
    "cmd": BASE | {"slurmio", "watchers", "reconcilers", "cmd"},
    "bench": BASE | {"slurmio", "watchers", "reconcilers", "kubesim", "bench"},
}
FOLDERS = set(ALLOWED) | {"tests", "crds", "deploy", "docs"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')

OPERATOR = "reconcilers/operator.c"
# What the operator may include of reconcilers/: its own header, the
# registry, and the modules it runs itself (none of them in the registry).
OPERATOR_MAY_INCLUDE = {
    "reconcilers/operator.h",
    "reconcilers/reconcilers.h",  # the registry: every module's state, setup, start, stop
    "reconcilers/objsync.h",  # owned objects' writes: a context the operator makes for all
    "reconcilers/msec.h",  # the --metrics-secure server
    "reconcilers/bindhook.h",  # the --topology-webhook server
    "reconcilers/nodehealth.h",  # pure: the Node condition types the caches keep
}
REGISTERED = re.compile(r"^\s*extern\s+const\s+op_reconciler\s+\w+", re.M)


def tracked_files():
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True, check=True).stdout
        files = out.splitlines()
    except (OSError, subprocess.CalledProcessError):
        files = []
        for dirpath, dirnames, filenames in os.walk(ROOT):
            dirnames[:] = [d for d in dirnames if not d.startswith((".", "build"))]
            files += [os.path.relpath(os.path.join(dirpath, f), ROOT) for f in filenames]
    return [f for f in files if f.endswith((".c", ".h")) and f.split("/")[0] in ALLOWED]


def target_folder(path, inc):
    """The top-level folder an include of file `path` names."""
    if "/" not in inc:
        return path.split("/")[0]
    if inc.startswith("."):
        inc = posixpath.normpath(posixpath.join(posixpath.dirname(path), inc))
    return inc.split("/")[0]


def violations(files):
    """files: {path: text}. Returns ["path:line: includes X (layer L may include ...)"]."""
    bad = []
    for path, text in sorted(files.items()):
        layer = path.split("/")[0]
        allowed = ALLOWED.get(layer)
        if allowed is None:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            folder = target_folder(path, m.group(1))
            if folder in FOLDERS and folder not in allowed:
                bad.append(
                    '%s:%d: includes "%s" (%s/ may include only %s)'
                    % (path, n, m.group(1), layer, ", ".join(sorted(f + "/" for f in allowed)))
                )
    return bad


def operator_violations(files):
    """The reconciler headers the operator includes: ["path:line: ..."]."""
    registered = {p for p, t in files.items() if p.startswith("reconcilers/") and p.endswith(".h")
                  and REGISTERED.search(t)}
    bad = []
    for n, line in enumerate(files.get(OPERATOR, "").splitlines(), 1):
        m = INCLUDE.match(line)
        if not m or target_folder(OPERATOR, m.group(1)) != "reconcilers":
            continue
        inc = m.group(1) if "/" in m.group(1) else "reconcilers/" + m.group(1)
        if inc in registered:
            bad.append('%s:%d: includes "%s", a reconciler of the registry (reach it through reconcilers.h)'
                       % (OPERATOR, n, m.group(1)))
        elif inc not in OPERATOR_MAY_INCLUDE:
            bad.append('%s:%d: includes "%s" (of reconcilers/ it may include only %s)'
                       % (OPERATOR, n, m.group(1), ", ".join(sorted(OPERATOR_MAY_INCLUDE))))
    return bad


def self_check():
    made_up = {
        "core/a.c": '#include "core/a.h"\n#include "reconcilers/operator.h"\n',
        "watchers/b.c": '#include "core/map.h"\n # include "slurmio/rest.h"\n',
        "kubesim/c.c": '#include "ks_int.h"\n#include "../reconcilers/x.h"\n',
        "bench/d.c": '#include "kubesim/ks.h"\n#include "tests/unit/x.h"\n',
        "slurmio/e.c": '#include "core/buf.h"\n#include "slurmio/model.h"\n#include <uv.h>\n',
    }
    got = violations(made_up)
    want = ["bench/d.c:2:", "core/a.c:2:", "kubesim/c.c:2:", "watchers/b.c:2:"]
    if [g.split(" ")[0] for g in got] != want:
        print("self-check failed: expected violations %s, got %s" % (want, got))
        return False
    made_up = {
        OPERATOR: '#include "reconcilers/operator.h"\n#include "reconcilers/reconcilers.h"\n'
        '#include "reconcilers/objsync.h"\n#include "core/log.h"\n#include "reconcilers/nodeset.h"\n'
        '#include "token.h"\n#include "reconcilers/nodeset_immut.h"\n',
        "reconcilers/nodeset.h": "extern const op_reconciler RC_NODESET;\n",
        "reconcilers/token.h": "#include <x.h>\n  extern const op_reconciler RC_TOKEN;\n",
        "reconcilers/nodeset_immut.h": "typedef struct nsim_table nsim_table;\n",
    }
    got = operator_violations(made_up)
    want = [OPERATOR + ":5:", OPERATOR + ":6:", OPERATOR + ":7:"]
    if [g.split(" ")[0] for g in got] != want or "registry" not in got[1] or "may include only" not in got[2]:
        print("self-check failed: expected the operator's violations %s, got %s" % (want, got))
        return False
    return True


def main():
    if not self_check():
        return 1
    files = {}
    for f in tracked_files():
        try:
            with open(os.path.join(ROOT, f), encoding="utf-8", errors="replace") as fh:
                files[f] = fh.read()
        except OSError:
            continue  # deleted in the working tree
    if len(files) < 50:
        print("only %d C files found under %s: not the source tree?" % (len(files), ROOT))
        return 1
    if OPERATOR not in files:
        print("%s not found: not the source tree?" % OPERATOR)
        return 1
    bad = violations(files) + operator_violations(files)
    for b in bad:
        print(b)
    n_inc = sum(1 for t in files.values() for line in t.splitlines() if INCLUDE.match(line))
    print("%d files, %d includes, %d across layers the wrong way" % (len(files), n_inc, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

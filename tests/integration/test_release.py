#!/usr/bin/env python3
"""deploy/release.sh and `slurmop --version`.

Any user, no network, well under a second each:
  - `slurmop --version` prints "slurmop <CMakeLists.txt project version>",
    then "commit <id>", where id is HEAD (optionally "-dirty") when the
    sources are a git work tree, else "unknown";
  - cmake/op_commit.cmake writes "unknown" for sources outside git and for
    sources unpacked inside another repository (whose commit is not theirs),
    HEAD for the top of a work tree, "-dirty" after a tracked file changes,
    takes OP_GIT_COMMIT when given and refuses one that is not a commit id;
  - release.sh refuses (exit 2, before building anything) a version with a
    leading v, with build metadata, with a leading zero, or whose X.Y.Z is
    not the project version.

As root with helm (CI): release.sh on a pre-release of the project version
into a temporary folder (the image comes from deploy/images/build.sh's
cache, warm after integration.images: under a minute) writes the three
charts with that chart version, appVersion (the slurm chart keeps the Slurm
release) and the operator's default image tag, an OCI archive named
docker.io/library/slurmop:<version> whose blobs match their digests, a
source tarball under slurmop-<version>/ without .git whose build says commit
unknown, a SHA256SUMS that covers every file and matches, and leaves deploy/helm as it
was; a second run into the same folder is refused. Exit 77 when not root or
when helm is not built (bash tests/k8s/build.sh).
"""

import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time

SRC = os.environ.get("OP_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("OP_BUILD_DIR") or os.path.join(SRC, "build")
RELEASE = os.path.join(SRC, "deploy", "release.sh")
COMMIT_SCRIPT = os.path.join(SRC, "cmake", "op_commit.cmake")

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg, flush=True)
    return cond


def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=kw.pop("timeout", 60), **kw)


def project_version():
    with open(os.path.join(SRC, "CMakeLists.txt")) as f:
        m = re.search(r"^project\(slurmop VERSION ([0-9]+\.[0-9]+\.[0-9]+)", f.read(), re.M)
    if not m:
        sys.exit("no project(slurmop VERSION X.Y.Z) in CMakeLists.txt")
    return m.group(1)


def git(args, cwd, **kw):
    return run(["git", "-C", cwd] + args, **kw)


def git_top_head(path):
    """(HEAD, dirty) when path is the top of a git work tree, else None."""
    r = git(["rev-parse", "--show-toplevel", "HEAD"], path)
    if r.returncode != 0:
        return None
    top, head = r.stdout.split()
    if os.path.realpath(top) != os.path.realpath(path):
        return None
    st = git(["status", "--porcelain", "--untracked-files=no"], path)
    return head, bool(st.stdout.strip())


def test_version_output(version):
    exe = os.path.join(BUILD, "slurmop")
    if not check(os.access(exe, os.X_OK), "no %s (build it first)" % exe):
        return
    r = run([exe, "--version"])
    lines = r.stdout.splitlines()
    check(r.returncode == 0, "slurmop --version: exit %d" % r.returncode)
    check(len(lines) == 2, "slurmop --version: want two lines, got %r" % r.stdout)
    if len(lines) != 2:
        return
    check(lines[0] == "slurmop " + version, "--version line 1: %r, want %r" % (lines[0], "slurmop " + version))
    m = re.fullmatch(r"commit ([0-9a-f]{40}(-dirty)?|unknown)", lines[1])
    if not check(m, "--version line 2: %r, want 'commit <40 hex>[-dirty]' or 'commit unknown'" % lines[1]):
        return
    th = git_top_head(SRC)
    # The build may lag the tree by commits made since (ctest does not
    # rebuild), so only "unknown" against a git tree, or a commit against a
    # non-git one, is wrong for sure; the exact commit is checked on a
    # fresh header below.
    if th is None:
        check(m.group(1) == "unknown", "--version: sources are not a git work tree, yet commit %s" % m.group(1))
    else:
        check(m.group(1) != "unknown", "--version: sources are a git work tree (HEAD %s), yet commit unknown" % th[0])
        r = git(["cat-file", "-t", m.group(1).split("-")[0]], SRC)
        check(r.stdout.strip() == "commit", "--version: commit %s is not a commit of this repository" % m.group(1))
    print("slurmop --version: %s | %s" % (lines[0], lines[1]))


def commit_header(src, out, commit=None):
    argv = ["cmake", "-DSRC=" + src, "-DOUT=" + out]
    if commit is not None:
        argv.append("-DCOMMIT=" + commit)
    r = run(argv + ["-P", COMMIT_SCRIPT])
    text = open(out).read() if r.returncode == 0 and os.path.exists(out) else ""
    m = re.search(r'#define OP_GIT_COMMIT "([^"]*)"', text)
    return r, (m.group(1) if m else None)


def test_commit_script(tmp):
    hdr = os.path.join(tmp, "op_commit.h")
    plain = os.path.join(tmp, "plain")
    os.makedirs(plain)
    _, c = commit_header(plain, hdr)
    check(c == "unknown", "op_commit.cmake outside git: %r, want unknown" % c)

    repo = os.path.join(tmp, "repo")
    os.makedirs(os.path.join(repo, "sub"))
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t", GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    with open(os.path.join(repo, "f"), "w") as f:
        f.write("1\n")
    for args in (["init", "-q"], ["add", "f"], ["commit", "-q", "-m", "one"]):
        r = git(args, repo, env=env)
        if not check(r.returncode == 0, "git %s: %s" % (" ".join(args), r.stderr)):
            return
    head = git(["rev-parse", "HEAD"], repo).stdout.strip()
    _, c = commit_header(repo, hdr)
    check(c == head, "op_commit.cmake at a work tree's top: %r, want HEAD %s" % (c, head))
    mtime0 = os.stat(hdr).st_mtime_ns
    time.sleep(0.02)
    commit_header(repo, hdr)
    check(os.stat(hdr).st_mtime_ns == mtime0, "op_commit.cmake rewrote an unchanged header (recompiles slurmop)")
    _, c = commit_header(os.path.join(repo, "sub"), hdr)
    check(c == "unknown", "op_commit.cmake in a folder inside another repository: %r, want unknown" % c)
    with open(os.path.join(repo, "f"), "w") as f:
        f.write("2\n")
    _, c = commit_header(repo, hdr)
    check(c == head + "-dirty", "op_commit.cmake with a changed tracked file: %r, want %s-dirty" % (c, head))
    _, c = commit_header(plain, hdr, "0123abc")
    check(c == "0123abc", "op_commit.cmake with OP_GIT_COMMIT=0123abc: %r" % c)
    r, _ = commit_header(plain, hdr, 'x"y')
    check(r.returncode != 0 and "OP_GIT_COMMIT" in r.stderr, "op_commit.cmake took OP_GIT_COMMIT='x\"y'")


def test_refusals(version):
    major, minor, patch = version.split(".")
    bumped = "%s.%s.%d" % (major, minor, int(patch) + 1)
    for v, why in (("v" + version, "leading v"), (version + "+build.1", "build metadata"),
                   ("%s.%s.0%s" % (major, minor, patch), "leading zero"), (bumped, "not the project version"),
                   (version + "-rc..1", "empty pre-release identifier"), ("1.2", "two parts")):
        with tempfile.TemporaryDirectory(prefix="release-refuse-") as d:
            r = run(["bash", RELEASE, "--out", os.path.join(d, "o"), v])
            check(r.returncode == 2 and "VERSION" in r.stderr,
                  "release.sh %s (%s): exit %d, want 2 with a message (%s)" % (v, why, r.returncode, r.stderr.strip()))
            check(not os.path.exists(os.path.join(d, "o")), "release.sh %s wrote its output folder" % v)


def find_helm():
    h = os.environ.get("HELM")
    if h and os.access(h, os.X_OK):
        return h
    r = run(["bash", os.path.join(SRC, "tests", "k8s", "build.sh"), "--check"], timeout=120)
    if r.returncode == 0 and r.stdout.strip():
        h = os.path.join(r.stdout.strip(), "helm")
        if os.access(h, os.X_OK):
            return h
    return None


def tree_digest(folder):
    h = hashlib.sha256()
    for d, dirs, files in sorted(os.walk(folder)):
        dirs.sort()
        for n in sorted(files):
            p = os.path.join(d, n)
            with open(p, "rb") as f:
                h.update(p.encode() + b"\0" + hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def chart_field(text, key):
    m = re.search(r'^%s:\s*"?([^"\n]*?)"?\s*$' % key, text, re.M)
    return m.group(1) if m else None


def image_tag(values):
    m = re.search(r'^image:\n((?:[ \t]+.*\n|[ \t]*\n)*)', values, re.M)
    t = re.search(r'^  tag:\s*"?([^"\n]*?)"?\s*$', m.group(1), re.M) if m else None
    return t.group(1) if t else None


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def test_release(version, helm, tmp):
    v = version + "-citest.1"
    out = os.path.join(tmp, "rel")
    helm_dir = os.path.join(SRC, "deploy", "helm")
    before = tree_digest(helm_dir)
    t0 = time.monotonic()
    r = subprocess.run(["bash", RELEASE, "--out", out, v], capture_output=True, text=True, timeout=2400,
                       env=dict(os.environ, HELM=helm))
    took = time.monotonic() - t0
    sys.stdout.write(r.stdout)
    if not check(r.returncode == 0, "release.sh %s: exit %d\n%s" % (v, r.returncode, r.stderr[-3000:])):
        return
    print("release.sh %s: %.1f s" % (v, took))
    check(tree_digest(helm_dir) == before, "release.sh changed deploy/helm in the tree")
    charts = {"slurmop-crds": "%s/slurmop-crds-%s.tgz", "slurmop": "%s/slurmop-%s.tgz", "slurm": "%s/slurm-%s.tgz"}
    want = sorted([os.path.basename(p % (out, v)) for p in charts.values()]
                  + ["slurmop-%s.oci.tar" % v, "slurmop-%s.src.tar.gz" % v, "RELEASE.txt", "SHA256SUMS"])
    check(sorted(os.listdir(out)) == want, "release folder holds %s, want %s" % (sorted(os.listdir(out)), want))
    check(out in r.stdout, "release.sh does not print the folder %s" % out)
    check("arm64" in r.stdout, "release.sh does not say what became of arm64")

    with open(os.path.join(helm_dir, "slurm", "Chart.yaml")) as f:
        slurm_app = chart_field(f.read(), "appVersion")
    for name, pat in charts.items():
        path = pat % (out, v)
        if not check(os.path.exists(path), "no %s" % path):
            continue
        with tarfile.open(path) as tf:
            chart = tf.extractfile("%s/Chart.yaml" % name).read().decode()
            check(chart_field(chart, "version") == v, "%s: Chart.yaml version %r, want %r"
                  % (name, chart_field(chart, "version"), v))
            app = slurm_app if name == "slurm" else v
            check(chart_field(chart, "appVersion") == app, "%s: Chart.yaml appVersion %r, want %r"
                  % (name, chart_field(chart, "appVersion"), app))
            if name == "slurmop":
                values = tf.extractfile("slurmop/values.yaml").read().decode()
                check(image_tag(values) == v, "slurmop chart: values image.tag %r, want %r" % (image_tag(values), v))

    ref = "docker.io/library/slurmop:" + v
    image = os.path.join(out, "slurmop-%s.oci.tar" % v)
    if check(os.path.exists(image), "no %s" % image):
        with tarfile.open(image) as tf:
            index = json.load(tf.extractfile("index.json"))
            ann = index["manifests"][0]["annotations"]
            check(ann.get("io.containerd.image.name") == ref and ann.get("org.opencontainers.image.ref.name") == ref,
                  "image archive names %r, want %s" % (ann, ref))
            dm = json.load(tf.extractfile("manifest.json"))
            check(dm[0]["RepoTags"] == [ref], "image archive's manifest.json tags %r" % dm[0]["RepoTags"])
            md = index["manifests"][0]["digest"].split(":")[1]
            man_bytes = tf.extractfile("blobs/sha256/" + md).read()
            check(hashlib.sha256(man_bytes).hexdigest() == md, "manifest blob does not match its digest")
            man = json.loads(man_bytes)
            for d in [man["config"]] + man["layers"]:
                h = hashlib.sha256()
                f = tf.extractfile("blobs/sha256/" + d["digest"].split(":")[1])
                for b in iter(lambda: f.read(1 << 20), b""):
                    h.update(b)
                check("sha256:" + h.hexdigest() == d["digest"], "blob %s does not match its digest" % d["digest"])
            cfg = json.loads(tf.extractfile("blobs/sha256/" + man["config"]["digest"].split(":")[1]).read())
            check(cfg["config"].get("User") == "65532:65532", "image user %r" % cfg["config"].get("User"))
        print("image %s: %.1f MB" % (ref, os.path.getsize(image) / 1e6))

    src = os.path.join(out, "slurmop-%s.src.tar.gz" % v)
    if check(os.path.exists(src), "no %s" % src):
        with tarfile.open(src) as tf:
            names = set(tf.getnames())
        top = "slurmop-%s/" % v
        check(all(n == top[:-1] or n.startswith(top) for n in names), "source tarball: entries outside %s" % top)
        for n in ("CMakeLists.txt", "LICENSE", "cmake/op_commit.cmake", "cmd/slurmop.c", "deploy/release.sh"):
            check(top + n in names, "source tarball: no %s" % n)
        check(not any("/.git/" in n or n.endswith("/.git") for n in names), "source tarball holds .git")
        # Configured from the tarball (about a second), the build's commit is unknown.
        unpacked = os.path.join(tmp, "src")
        with tarfile.open(src) as tf:
            tf.extractall(unpacked, filter="data")
        tree, b = os.path.join(unpacked, top), os.path.join(tmp, "src-build")
        r = run(["cmake", "-S", tree, "-B", b, "-DBUILD_TESTING=OFF"], timeout=120)
        if check(r.returncode == 0, "cmake configure of the source tarball: %s" % r.stderr[-2000:]):
            r = run(["cmake", "--build", b, "--target", "op_commit"], timeout=120)
            hdr = os.path.join(b, "gen", "op_commit.h")
            text = open(hdr).read() if os.path.exists(hdr) else ""
            check('OP_GIT_COMMIT "unknown"' in text, "a build of the source tarball: op_commit.h %r" % text)

    sums = {}
    with open(os.path.join(out, "SHA256SUMS")) as f:
        for line in f:
            m = re.fullmatch(r"([0-9a-f]{64})  (\S+)\n", line)
            if check(m, "SHA256SUMS line %r" % line):
                sums[m.group(2)] = m.group(1)
    check(sorted(sums) == sorted(n for n in want if n != "SHA256SUMS"),
          "SHA256SUMS covers %s" % sorted(sums))
    for n, h in sums.items():
        check(os.path.exists(os.path.join(out, n)) and sha256_file(os.path.join(out, n)) == h,
              "SHA256SUMS: %s does not match" % n)

    r = run(["bash", RELEASE, "--out", out, v], env=dict(os.environ, HELM=helm))
    check(r.returncode == 2 and "not empty" in r.stderr,
          "a second release.sh into the same folder: exit %d (%s)" % (r.returncode, r.stderr.strip()))


def main():
    version = project_version()
    with tempfile.TemporaryDirectory(prefix="release-test-") as tmp:
        test_version_output(version)
        test_commit_script(tmp)
        test_refusals(version)
        if os.geteuid() != 0:
            print("SKIP (release build): not root (deploy/images/build.sh runs buildah as root)")
            skipped = True
        else:
            helm = find_helm()
            skipped = helm is None
            if skipped:
                print("SKIP (release build): helm is not built (bash tests/k8s/build.sh)")
            else:
                test_release(version, helm, tmp)
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)
    if skipped:
        sys.exit(77)
    print("OK")


if __name__ == "__main__":
    main()

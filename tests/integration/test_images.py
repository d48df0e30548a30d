#!/usr/bin/env python3
"""The container images of deploy/images: their packer, their entrypoints'
contract, and the images themselves.

Without building anything (any user, no network):
  - ocipack.py packs a tree into an archive whose index names every image for
    `ctr images import` (io.containerd.image.name), whose blobs match their
    digests, whose layer keeps modes, owners, symlinks and hard links, and
    which is the same byte for byte when packed again;
  - the Slurm entrypoints, run on this host against stand-in daemons that
    print their arguments, keep the contract of Slinky's images: options are
    $<DAEMON>_OPTIONS then the container's args, evaluated by a shell once
    ($VARS expand, quotes group); slurmd gets CoreSpecCount, MemSpecLimit and
    Topology from POD_CPUS, POD_MEMORY, POD_TOPOLOGY joined to its --conf, and
    an empty "Topology=" is dropped; the two-daemon supervisor restarts a side
    daemon that exits, passes SIGTERM on and exits with the main daemon's
    status;
  - pause exits 0 on SIGTERM and reaps orphans as PID 1.

With root (CI), `deploy/images/build.sh` builds (cached: seconds when warm)
the operator, pause, Slurm 26.05 and 24.11, and MariaDB images; each archive's
config has the expected entrypoint, user and ports; the operator binary runs
`--version` as its numeric user in its root file system mounted read-only,
links mbedtls 3.6, and, run there against kubesim with --metrics-secure,
negotiates TLS 1.3 with a client that offers only 1.3 (and still 1.2); the
Slurm binaries are the expected version and the slurm user is uid 401; a warm
second run is a no-op. SLURMOP_IMAGES_TEST_TARGETS narrows the targets (e.g.
"pause operator"); exit 77 when not root.
"""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time

SRC = os.environ.get("OP_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
IMAGES = os.path.join(SRC, "deploy", "images")
FAILS = []


def check(cond, what):
    if cond:
        print("ok: " + what)
    else:
        print("FAIL: " + what)
        FAILS.append(what)
    return cond


def sha(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def read_archive(path):
    """{name: bytes} of the small members, and the open tar for the rest."""
    tf = tarfile.open(path)
    return tf, {m.name: m for m in tf.getmembers()}


def blob(tf, members, digest):
    return tf.extractfile(members["blobs/sha256/" + digest.split(":", 1)[1]]).read()


def oci_images(path):
    """ref -> (config dict, [layer digests]) from an OCI archive's index."""
    tf, members = read_archive(path)
    index = json.loads(tf.extractfile(members["index.json"]).read())
    out = {}
    for m in index["manifests"]:
        ref = m["annotations"]["io.containerd.image.name"]
        man_b = blob(tf, members, m["digest"])
        check(sha(man_b) == m["digest"], "%s: manifest digest" % ref)
        man = json.loads(man_b)
        cfg_b = blob(tf, members, man["config"]["digest"])
        check(sha(cfg_b) == man["config"]["digest"], "%s: config digest" % ref)
        out[ref] = (json.loads(cfg_b), [l["digest"] for l in man["layers"]])
    return tf, members, out


def docker_images(path):
    """ref -> (config dict, [layer member names]) from a docker archive."""
    tf, members = read_archive(path)
    mf = json.loads(tf.extractfile(members["manifest.json"]).read())
    out = {}
    for e in mf:
        cfg = json.loads(tf.extractfile(members[e["Config"]]).read())
        for ref in e["RepoTags"]:
            out[ref] = (cfg, e["Layers"])
    return tf, members, out


# ---- ocipack ------------------------------------------------------------------


def test_ocipack(tmp):
    tree = os.path.join(tmp, "tree")
    os.makedirs(os.path.join(tree, "usr", "bin"))
    os.makedirs(os.path.join(tree, "etc"))
    with open(os.path.join(tree, "usr", "bin", "tool"), "w") as f:
        f.write("#!/bin/sh\necho hi\n")
    os.chmod(os.path.join(tree, "usr", "bin", "tool"), 0o4755)
    os.link(os.path.join(tree, "usr", "bin", "tool"), os.path.join(tree, "usr", "bin", "tool2"))
    os.symlink("tool", os.path.join(tree, "usr", "bin", "link"))
    with open(os.path.join(tree, "etc", "secret"), "w") as f:
        f.write("x")
    os.chmod(os.path.join(tree, "etc", "secret"), 0o600)
    if os.geteuid() == 0:
        os.chown(os.path.join(tree, "etc", "secret"), 401, 401)
    os.mkfifo(os.path.join(tree, "fifo"))
    specs = [
        {"ref": "localhost/t/a:1", "entrypoint": ["/usr/bin/tool"], "cmd": ["x"], "user": "401:401",
         "ports": ["80/tcp"]},
        {"ref": "localhost/t/b:1", "entrypoint": ["/usr/bin/link"], "cmd": []},
    ]
    outs = []
    for n in ("a.tar", "b.tar"):
        out = os.path.join(tmp, n)
        args = [sys.executable, os.path.join(IMAGES, "ocipack.py"), "--rootfs", tree, "--out", out]
        for s in specs:
            args += ["--image", json.dumps(s)]
        subprocess.run(args, check=True)
        outs.append(out)
    with open(outs[0], "rb") as f1, open(outs[1], "rb") as f2:
        check(f1.read() == f2.read(), "ocipack: the same tree packs to the same bytes")
    tf, members, imgs = oci_images(outs[0])
    check(sorted(imgs) == ["localhost/t/a:1", "localhost/t/b:1"], "ocipack: index names both images")
    cfg, layers = imgs["localhost/t/a:1"]
    check(cfg["config"]["Entrypoint"] == ["/usr/bin/tool"] and cfg["config"]["Cmd"] == ["x"]
          and cfg["config"]["User"] == "401:401" and "80/tcp" in cfg["config"]["ExposedPorts"],
          "ocipack: entrypoint, cmd, user and ports in the config")
    check(imgs["localhost/t/b:1"][1] == layers, "ocipack: the images share their layer")
    lb = blob(tf, members, layers[0])
    check(sha(lb) == layers[0] and cfg["rootfs"]["diff_ids"] == layers,
          "ocipack: layer digest and diff_id (uncompressed)")
    docker = json.loads(tf.extractfile(members["manifest.json"]).read())
    check(sorted(t for e in docker for t in e["RepoTags"]) == ["localhost/t/a:1", "localhost/t/b:1"],
          "ocipack: docker manifest.json names both images")
    import io
    lt = tarfile.open(fileobj=io.BytesIO(lb))
    m = {x.name: x for x in lt.getmembers()}
    check(m["usr/bin/tool"].mode == 0o4755, "ocipack: setuid mode kept")
    check(m["usr/bin/tool2"].islnk() and m["usr/bin/tool2"].linkname == "usr/bin/tool",
          "ocipack: hard link kept as a link")
    check(m["usr/bin/link"].issym() and m["usr/bin/link"].linkname == "tool", "ocipack: symlink kept")
    if os.geteuid() == 0:
        check(m["etc/secret"].uid == 401 and m["etc/secret"].mode == 0o600, "ocipack: owner and mode kept")
    check("fifo" not in m, "ocipack: FIFOs left out")
    names = [x.name for x in lt.getmembers()]
    check(names.index("usr") < names.index("usr/bin") < names.index("usr/bin/tool"),
          "ocipack: parents before children")


# ---- entrypoints ----------------------------------------------------------------

FAKE_SLURMD = r"""#!/bin/bash
# stand-in: `slurmd -C` prints a machine; otherwise print the args as JSON
if [ "$1" = -h ]; then
  echo "usage: $(basename "$0") [OPTIONS]"
  [ -n "${FAKE_NO_D:-}" ] || echo "    -D                          Run daemon in foreground."
  echo "    --systemd                   Started from a systemd unit file."
  echo "    -v                          Verbose mode."
  exit 0
fi
if [ "$1" = -C ]; then
  echo "NodeName=x CPUs=8 Boards=1 SocketsPerBoard=2 CoresPerSocket=2 ThreadsPerCore=2 RealMemory=4000"
  echo "UpTime=1"
  exit 0
fi
python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$(basename "$0")" "$@"
# A daemon without -D forks away: a process of the same name stays a while.
# FAKE_RESTART: and then restarts itself as a new process, as a reconfigure
# does.
if [ -n "${FAKE_NO_D:-}" ] && [ -n "${FAKE_RESTART:-}" ]; then ( sleep 1; ( sleep 2; : ) & ) &
elif [ -n "${FAKE_NO_D:-}" ]; then ( sleep 2; : ) & fi
exit 0
"""


def install_entrypoints(tmp):
    """A copy of the image's /usr/local layout with stand-in daemons first in
    PATH."""
    root = os.path.join(tmp, "ep")
    os.makedirs(os.path.join(root, "bin"))
    os.makedirs(os.path.join(root, "lib", "slurmop"))
    os.makedirs(os.path.join(root, "fake"))
    for f in os.listdir(os.path.join(IMAGES, "slurm")):
        src = os.path.join(IMAGES, "slurm", f)
        dst = os.path.join(root, "lib", "slurmop", f) if f == "lib.sh" else os.path.join(root, "bin", f)
        shutil.copy(src, dst)
    for d in ("slurmd", "slurmctld", "sackd", "sshd"):
        p = os.path.join(root, "fake", d)
        with open(p, "w") as f:
            f.write(FAKE_SLURMD)
        os.chmod(p, 0o755)
    return root


def run_ep(root, name, args, env=None):
    e = {"PATH": os.path.join(root, "fake") + ":/usr/bin:/bin", "HOME": "/nonexistent", "SLURMD_SSHD": "0"}
    e.update(env or {})
    # In a PID namespace of its own, as in a container: the entrypoint looks
    # for its daemon by name (pgrep), which on this host would also find the
    # daemons of real pods that tests run beside this one.
    ns = ["unshare", "--pid", "--fork", "--mount-proc"] if os.geteuid() == 0 and shutil.which("unshare") else []
    p = subprocess.run(ns + ["bash", os.path.join(root, "bin", name)] + args, env=e, capture_output=True,
                       text=True, timeout=30)
    if p.returncode != 0:
        print(p.stdout, p.stderr)
    return p.returncode, p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "", p.stderr


def test_entrypoints(tmp):
    root = install_entrypoints(tmp)
    # mkdir of /run/slurm etc. needs root; a stub keeps the test runnable as
    # any user without touching the host's /run.
    # `id -u` answers 0 so that the daemons go through setpriv as in the
    # image, where the stub sees the argv[0] the daemon will get: it must be
    # a path (sackd re-executes itself with execve(argv[0]) on reconfigure).
    stubs = {"mkdir": "exit 0", "chown": "exit 0",
             "id": '[ "$1" = -u ] && echo 0 || exec /usr/bin/id "$@"',
             # setpriv [options] -- CMD...: run CMD as is
             "setpriv": 'while [ $# -gt 0 ] && [ "$1" != -- ]; do shift; done; shift\n'
                        'case "$1" in /*) ;; *) echo "setpriv: argv[0] $1 is not a path" >&2; exit 3 ;; esac\n'
                        'exec "$@"'}
    for name, body in stubs.items():
        stub = os.path.join(root, "fake", name)
        with open(stub, "w") as f:
            f.write("#!/bin/bash\n" + body + "\n")
        os.chmod(stub, 0o755)

    conf = "'Features=slinky Topology='\"$SLINKY_TOPOLOGY\"''"  # what slurmop's NodeSet pods pass
    rc, out, _ = run_ep(root, "slurmd-entrypoint.sh", ["-Z", "--conf-server", "c:6817", "--conf", conf],
                        {"SLINKY_TOPOLOGY": "topo1:s1"})
    check(rc == 0 and json.loads(out) == ["slurmd", "-D", "-Z", "--conf-server", "c:6817", "--conf",
                                          "Features=slinky Topology=topo1:s1"],
          "slurmd: --conf evaluated by the shell once ($SLINKY_TOPOLOGY expands): %s" % out)
    rc, out, _ = run_ep(root, "slurmd-entrypoint.sh", ["-Z", "--conf", conf], {"SLINKY_TOPOLOGY": ""})
    check(rc == 0 and json.loads(out) == ["slurmd", "-D", "-Z", "--conf", "Features=slinky"],
          "slurmd: an empty Topology= is dropped: %s" % out)
    # 2 sockets x 2 cores = 4 cores, 2 threads each: POD_CPUS=4 -> 2 cores
    # for the pod, CoreSpecCount=2; RealMemory 4000 - 1000 -> MemSpecLimit=3000.
    rc, out, _ = run_ep(root, "slurmd-entrypoint.sh", ["--conf", conf],
                        {"SLINKY_TOPOLOGY": "", "POD_CPUS": "4", "POD_MEMORY": "1000"})
    check(rc == 0 and json.loads(out) == ["slurmd", "-D", "--conf",
                                          "Features=slinky CoreSpecCount=2 MemSpecLimit=3000"],
          "slurmd: CoreSpecCount and MemSpecLimit join --conf: %s" % out)
    rc, out, _ = run_ep(root, "slurmd-entrypoint.sh", ["--conf=Features=a"], {"POD_TOPOLOGY": "t:b"})
    check(rc == 0 and json.loads(out) == ["slurmd", "-D", "--conf=Features=a Topology=t:b"],
          "slurmd: POD_TOPOLOGY joins a --conf=VALUE: %s" % out)
    rc, out, _ = run_ep(root, "slurmd-entrypoint.sh", ["-Z"], {"POD_TOPOLOGY": "t:b"})
    check(rc == 0 and json.loads(out) == ["slurmd", "-D", "-Z", "--conf", "Topology=t:b"],
          "slurmd: without --conf one is added: %s" % out)
    rc, out, _ = run_ep(root, "slurmd-entrypoint.sh", ["-N", "$HOSTX"],
                        {"SLURMD_OPTIONS": "-v '--conf-server' \"a b\"", "HOSTX": "n1"})
    check(rc == 0 and json.loads(out) == ["slurmd", "-D", "-v", "--conf-server", "a b", "-N", "n1"],
          "slurmd: $SLURMD_OPTIONS first, then the args, quotes and $VARS evaluated: %s" % out)
    rc, out, _ = run_ep(root, "slurmctld-entrypoint.sh", ["-i", "$X"],
                        {"SLURMCTLD_OPTIONS": "-vv", "X": "-c"})
    check(rc == 0 and json.loads(out) == ["slurmctld", "-D", "-vv", "-i", "-c"],
          "slurmctld: -D, $SLURMCTLD_OPTIONS, then the args: %s" % out)
    rc, out, _ = run_ep(root, "sackd-entrypoint.sh", ["--conf-server", "c:6817"], {"SACKD_OPTIONS": "-v"})
    check(rc == 0 and json.loads(out) == ["sackd", "-D", "-v", "--conf-server", "c:6817"],
          "sackd: -D, $SACKD_OPTIONS, then the args: %s" % out)
    # Slurm 24.11's sackd has no -D: it forks into the background (and its
    # --systemd would die without a notify socket: "Missing NOTIFY_SOCKET",
    # seen on real pods). The entrypoint starts it bare and waits for the
    # process it leaves: the stand-in leaves one for 2 s.
    t0 = time.monotonic()
    rc, out, err = run_ep(root, "sackd-entrypoint.sh", ["--conf-server", "c:6817"], {"FAKE_NO_D": "1"})
    took = time.monotonic() - t0
    check(json.loads(out) == ["sackd", "--conf-server", "c:6817"],
          "sackd: neither -D nor --systemd where sackd takes no -D (24.11): %s" % out)
    check(rc == 1 and took >= 1.5 and "ended" in err,
          "sackd: the entrypoint waits for the forked daemon and ends with it (rc %d after %.1f s): %s" % (rc, took, err))
    # ... and through its restarts as a new process (each reconfigure): a
    # second sackd started when the first PID ended would fail on its socket.
    t0 = time.monotonic()
    rc, out, err = run_ep(root, "sackd-entrypoint.sh", [], {"FAKE_NO_D": "1", "FAKE_RESTART": "1"})
    took = time.monotonic() - t0
    check(rc == 1 and took >= 2.5 and "restarted itself" in err and "ended" in err,
          "sackd: the entrypoint follows the daemon's restart as a new process (rc %d after %.1f s): %s" % (
              rc, took, err))
    # slurmop's operator joins the --conf items with a vertical tab: the value
    # stays one word, items are added after a space, nothing else changes.
    vt = "Features=slinky\x0bWeight=5"
    rc, out, _ = run_ep(root, "slurmd-entrypoint.sh", ["-Z", "--conf", vt], {"POD_CPUS": "4", "POD_TOPOLOGY": ""})
    check(rc == 0 and json.loads(out) == ["slurmd", "-D", "-Z", "--conf", vt + " CoreSpecCount=2"],
          "slurmd: a vertical-tab-joined --conf is kept, CoreSpecCount added, empty POD_TOPOLOGY adds nothing: %r" % out)
    rc, out, _ = run_ep(root, "slurmd-entrypoint.sh", ["--conf", "Features=a\x0bTopology=\x0bWeight=1"])
    check(rc == 0 and json.loads(out) == ["slurmd", "-D", "--conf", "Features=a Weight=1"],
          "slurmd: an empty Topology= between vertical tabs is dropped: %r" % out)
    rc, out, _ = run_ep(root, "slurmd-entrypoint.sh", ["--conf", "Gres=gpu:[0-1]*"])
    check(rc == 0 and json.loads(out) == ["slurmd", "-D", "--conf", "Gres=gpu:[0-1]*"],
          "slurmd: no pathname expansion of the options: %r" % out)

    # A dynamic node that slurmctld forgets (restarted without its state;
    # 24.11's slurmd never registers again): after 3 "not found" answers by
    # name, slurmd is stopped, so that the container starts again and
    # registers. The stand-in slurmd runs until stopped; the stand-in
    # scontrol knows the node for its first 2 calls, then not. Before any
    # answer that knows the node nothing counts; another error resets.
    fake = os.path.join(root, "fake")
    state = os.path.join(tmp, "scontrol-calls")
    with open(os.path.join(fake, "scontrol"), "w") as f:
        f.write("""#!/bin/bash
n=$(( $(cat %s 2>/dev/null || echo 0) + 1 )); echo $n > %s
[ "$2 $3" = "node n7" ] || { echo "bad args $*"; exit 2; }
case $n in
  1) echo "Node n7 not found"; exit 1 ;;
  2|3) echo "NodeName=n7 State=IDLE"; exit 0 ;;
  4) echo "slurm_load_node error: Unable to contact slurm controller"; exit 1 ;;
  *) echo "Node n7 not found"; exit 1 ;;
esac
""" % (state, state))
    os.chmod(os.path.join(fake, "scontrol"), 0o755)
    with open(os.path.join(fake, "slurmd-long"), "w") as f:
        # A script keeps its name ("slurmd") for pkill -x.
        f.write("#!/bin/bash\ntrap 'kill $!; exit 0' TERM\nsleep 60 >/dev/null 2>&1 </dev/null &\nwait\n")
    os.chmod(os.path.join(fake, "slurmd-long"), 0o755)
    os.rename(os.path.join(fake, "slurmd"), os.path.join(fake, "slurmd-args"))
    shutil.copy(os.path.join(fake, "slurmd-long"), os.path.join(fake, "slurmd"))
    t0 = time.monotonic()
    rc, out, err = run_ep(root, "slurmd-entrypoint.sh", ["-Z", "-N", "n7", "--conf", "Features=a"],
                          {"SLURMD_REGISTRATION_CHECK": "0.2"})
    took = time.monotonic() - t0
    calls = int(open(state).read())
    check(took < 20 and "no longer has node n7" in err and calls == 7,
          "slurmd: stopped after slurmctld forgot its dynamic node (3 answers after it had one; %d calls, "
          "%.1f s, rc %d): %s" % (calls, took, rc, err[-600:]))
    os.remove(state)
    # Without -Z (a node of slurm.conf) or with the check off, no watch.
    with open(os.path.join(fake, "slurmd"), "w") as f:
        f.write("#!/bin/bash\nsleep 2\n")
    rc, out, err = run_ep(root, "slurmd-entrypoint.sh", ["-Z", "-N", "n7"], {"SLURMD_REGISTRATION_CHECK": "0"})
    check(not os.path.exists(state) and "no longer has" not in err,
          "slurmd: SLURMD_REGISTRATION_CHECK=0 asks nothing: %s" % err[-300:])
    shutil.copy(os.path.join(fake, "slurmd-args"), os.path.join(fake, "slurmd"))

    # supervise: a side daemon that exits starts again; SIGTERM reaches both;
    # the exit status is the main daemon's.
    script = os.path.join(tmp, "sup.sh")
    marks = os.path.join(tmp, "marks")
    with open(script, "w") as f:
        f.write("""set -euo pipefail
. %s
main() { trap 'echo main-term >> %s; exit 7' TERM; echo main >> %s; while :; do sleep 0.05; done; }
side() { trap 'echo side-term >> %s; exit 0' TERM; echo side >> %s; sleep 0.3; exit 3; }
supervise main -- side
""" % (os.path.join(root, "lib", "slurmop", "lib.sh"), marks, marks, marks, marks))
    p = subprocess.Popen(["bash", script], stderr=subprocess.PIPE, text=True)
    time.sleep(2.0)
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = None
    err = p.stderr.read()
    lines = open(marks).read().split()
    check(lines.count("side") >= 2, "supervise: the side daemon was started again after it exited (%s)" % lines)
    check("main-term" in lines, "supervise: SIGTERM reached the main daemon")
    check(rc == 7, "supervise: exit status is the main daemon's (%s)" % rc)
    check("side exited (3); starting it again" in err, "supervise: the restart is logged")


# ---- pause ----------------------------------------------------------------------


def test_pause(tmp):
    exe = os.path.join(tmp, "pause")
    if shutil.which("gcc") is None:
        print("skip: pause (no gcc)")
        return
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", exe, os.path.join(IMAGES, "pause.c")],
                   check=True)
    p = subprocess.Popen([exe])
    time.sleep(0.2)
    check(p.poll() is None, "pause: keeps running")
    p.send_signal(signal.SIGHUP)  # blocked: ignored
    time.sleep(0.1)
    check(p.poll() is None, "pause: SIGHUP does not end it")
    p.send_signal(signal.SIGTERM)
    check(p.wait(timeout=5) == 0, "pause: SIGTERM ends it with status 0")
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("nsenter") is None:
        print("skip: pause reaping (needs root for a PID namespace)")
        return
    # PID 1 of a new PID namespace: an orphan made inside is reparented to it
    # and must not stay a zombie.
    p = subprocess.Popen(["unshare", "--pid", "--fork", exe])
    pid1 = None
    for _ in range(100):
        kids = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
        if kids:
            pid1 = kids[0]
            break
        time.sleep(0.05)
    check(pid1 is not None, "pause: runs as PID 1 of a PID namespace")
    if pid1:
        subprocess.run(["nsenter", "-t", pid1, "-p", "--", "sh", "-c", "sleep 0.2 & exit 0"], check=True)
        time.sleep(0.8)
        zombies = []
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    st = open("/proc/%s/stat" % d).read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if st[1] == pid1 and st[0] == "Z":
                    zombies.append(d)
        check(not zombies, "pause: the orphan was reaped (zombies: %s)" % zombies)
        os.kill(int(pid1), signal.SIGTERM)
    check(p.wait(timeout=5) == 0, "pause: PID 1 exits 0 on SIGTERM")


# ---- built images -----------------------------------------------------------------


def build(targets, slurm=None, want_err=False):
    args = ["bash", os.path.join(IMAGES, "build.sh")] + (["--slurm", slurm] if slurm else []) + targets
    t0 = time.monotonic()
    p = subprocess.run(args, capture_output=True, text=True, timeout=3000)
    dt = time.monotonic() - t0
    sys.stderr.write(p.stderr[-4000:])
    if not check(p.returncode == 0, "build.sh %s: exit 0 (%.1f s)" % (" ".join(args[2:]), dt)):
        return ({}, dt, p.stderr) if want_err else ({}, dt)
    out = {}
    for line in p.stdout.splitlines():
        ref, path = line.split(" ", 1)
        check(os.path.isabs(path) and os.path.isfile(path), "%s: archive %s exists" % (ref, path))
        out[ref] = path
    return (out, dt, p.stderr) if want_err else (out, dt)


def extract_layers(tf, members, layer_names, dest):
    """Unpack the layers (members of the archive tf) into dest, in order,
    with tar(1): Python's tarfile takes many times as long on a root file
    system."""
    for name in layer_names:
        out = subprocess.Popen(["tar", "-xOf", tf.name, name], stdout=subprocess.PIPE)
        p = subprocess.run(["tar", "-x", "--numeric-owner", "-C", dest], stdin=out.stdout)
        out.stdout.close()
        check(out.wait() == 0 and p.returncode == 0, "layer %s unpacked" % name[:24])


def chroot_ro(root, argv, user=None, env_extra=None):
    """argv in root mounted read-only (a private mount namespace), with a
    /proc, /dev and a tmpfs on /run and /tmp, as a runtime gives a container."""
    cmd = ("mount --bind \"$0\" \"$0\" && mount -o remount,bind,ro \"$0\" && "
           "mount -t tmpfs tmpfs \"$0/run\" && mount -t tmpfs tmpfs \"$0/tmp\" && "
           "mount -t proc proc \"$0/proc\" && mount --rbind /dev \"$0/dev\" && exec chroot %s \"$0\" \"$@\"") % (
        "--userspec=%s" % user if user else "")
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    env.update(env_extra or {})
    return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", cmd, root] + argv,
                          capture_output=True, text=True, timeout=60, env=env)


def chroot_popen(root, argv, user=None):
    """chroot_ro's environment, started in the background."""
    cmd = ("mount --bind \"$0\" \"$0\" && mount -o remount,bind,ro \"$0\" && "
           "mount -t tmpfs tmpfs \"$0/run\" && mount -t tmpfs tmpfs \"$0/tmp\" && "
           "mount -t proc proc \"$0/proc\" && mount --rbind /dev \"$0/dev\" && exec chroot %s \"$0\" \"$@\"") % (
        "--userspec=%s" % user if user else "")
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    return subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", cmd, root] + argv,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def tls_versions(root):
    """Run the image's operator (its root read-only, as 65532) against kubesim with a self-signed
    --metrics-secure listener; the protocol a client offering only TLS 1.3, then only 1.2, gets."""
    import socket
    import ssl
    sys.path.insert(0, os.path.join(SRC, "tests", "lib"))
    from kubesim import Kubesim
    out = {}
    with Kubesim(nodes=0) as ks:
        kc = os.path.join(root, "etc", "slurmop-test-kubeconfig")
        shutil.copy(ks.kubeconfig, kc)
        os.chmod(kc, 0o644)
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        p = chroot_popen(root, ["/usr/local/bin/slurmop", "--kubeconfig", "/etc/slurmop-test-kubeconfig",
                                "--metrics-secure", "--metrics-addr", "127.0.0.1:%d" % port, "--health-addr", "0"],
                         user="65532:65532")
        try:
            for want in (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2):
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE  # a self-signed certificate: only the protocol is checked
                ctx.minimum_version = ctx.maximum_version = want
                deadline = time.monotonic() + 30
                while True:
                    try:
                        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
                            with ctx.wrap_socket(raw) as t:
                                out[want.name] = t.version()
                        break
                    except ConnectionRefusedError:
                        if time.monotonic() > deadline or p.poll() is not None:
                            out[want.name] = "refused"
                            break
                        time.sleep(0.2)
                    except ssl.SSLError as e:
                        out[want.name] = "refused: %s" % e.reason
                        break
        finally:
            p.terminate()
            log = p.communicate(timeout=30)[0]
            os.unlink(kc)
    if not out.get("TLSv1_3", "").startswith("TLSv1.3"):
        print(log[-2000:])
    return out


def leftovers(cache):
    """Mounts below the cache and the files buildah writes outside it."""
    mounts = [l.split()[4] for l in open("/proc/self/mountinfo") if l.split()[4].startswith(cache)]
    files = [p for p in ("/etc/cni/net.d/cni.lock", "/var/lib/containers/cache/blob-info-cache-v1.boltdb")
             if os.path.exists(p)]
    return mounts, files


def test_built(tmp):
    targets = os.environ.get("SLURMOP_IMAGES_TEST_TARGETS", "pause operator slurm mariadb").split()
    cache = os.path.join(os.environ.get("SLURMOP_K8S_CACHE") or os.path.expanduser("~/.cache/slurmop"), "images-v1")
    before = leftovers(cache)[1]
    if "pause" in targets:
        imgs, _ = build(["pause"])
        for ref, path in imgs.items():
            tf, members, cfgs = oci_images(path)
            cfg = cfgs[ref][0]["config"]
            check(ref == "registry.k8s.io/pause:3.10" and cfg["Entrypoint"] == ["/pause"]
                  and cfg["User"] == "65535:65535", "pause: entrypoint /pause, user 65535")
    if "operator" in targets:
        imgs, _ = build(["operator"])
        for ref, path in imgs.items():
            check(ref.startswith("docker.io/library/slurmop:"), "operator: ref %s" % ref)
            tf, members, cfgs = docker_images(path)
            cfg, layers = cfgs[ref]
            c = cfg["config"]
            check(c.get("User") == "65532:65532", "operator: runs as 65532:65532 (%s)" % c.get("User"))
            check(c.get("Entrypoint") == ["/usr/local/bin/slurmop"], "operator: entrypoint slurmop")
            size = sum(members[n].size for n in layers)
            print("operator image: %d layers, %.1f MB uncompressed" % (len(layers), size / 1e6))
            r = os.path.join(tmp, "op-root")
            os.makedirs(r)
            extract_layers(tf, members, layers, r)
            p = chroot_ro(r, ["/usr/local/bin/slurmop", "--version"], user="65532:65532")
            check(p.returncode == 0 and "slurmop" in p.stdout,
                  "operator: `slurmop --version` as 65532 on a read-only root: %s%s" % (p.stdout.strip(), p.stderr))
            # The last commit that changed the build context (the "!" paths of
            # deploy/Dockerfile.dockerignore), so that a commit to tests or
            # docs keeps the cached image.
            paths = [l[1:].strip() for l in open(os.path.join(SRC, "deploy", "Dockerfile.dockerignore"))
                     if l.startswith("!")]
            last = subprocess.run(["git", "-C", SRC, "log", "-1", "--format=%H", "--"] + paths,
                                  capture_output=True, text=True).stdout.strip()
            if last:
                check(("commit " + last) in p.stdout,
                      "operator: `slurmop --version` names the build context's last commit %s: %s" % (last[:12], p.stdout))
            p = chroot_ro(r, ["/bin/sh", "-c", "ldd /usr/local/bin/slurmop"])
            check("libslurm" not in p.stdout, "operator: no libslurm linked (OP_WITH_LIBSLURM=OFF)")
            check("not found" not in p.stdout, "operator: every shared library present")
            check("libmbedtls.so.21" in p.stdout, "operator: linked against mbedtls 3.6 (libmbedtls.so.21)")
            got = tls_versions(r)
            check(got.get("TLSv1_3") == "TLSv1.3" and got.get("TLSv1_2") == "TLSv1.2",
                  "operator: its HTTPS listener negotiates TLS 1.3 (and 1.2 when only that is offered): %s" % got)
    if "slurm" in targets:
        for ver in ("26.05", "24.11"):
            imgs, _ = build(["slurm"], ver)
            names = sorted(r.split("/")[-1] for r in imgs)
            check(names == sorted(n + ":" + ver for n in
                                  ("slurmctld", "slurmd", "slurmrestd", "slurmdbd", "login", "sackd")),
                  "slurm %s: six images (%s)" % (ver, names))
            paths = set(imgs.values())
            check(len(paths) == 1, "slurm %s: one archive" % ver)
            if not paths:
                continue
            tf, members, cfgs = oci_images(paths.pop())
            want = {
                "slurmctld": ["tini", "--", "/usr/local/bin/slurmctld-entrypoint.sh"],
                "slurmd": ["tini", "--", "/usr/local/bin/slurmd-entrypoint.sh"],
                "slurmrestd": ["tini", "-g", "--", "slurmrestd"],
                "slurmdbd": ["tini", "-g", "--", "slurmdbd", "-D"],
                "login": ["tini", "--", "/usr/local/bin/login-entrypoint.sh"],
                "sackd": ["tini", "--", "/usr/local/bin/sackd-entrypoint.sh"],
            }
            for ref, (cfg, layers) in cfgs.items():
                n = ref.split("/")[-1].split(":")[0]
                check(cfg["config"].get("Entrypoint") == want.get(n), "slurm %s: %s entrypoint" % (ver, n))
            check(cfgs["localhost/slurmop/slurmrestd:" + ver][0]["config"].get("Cmd") == ["0.0.0.0:6820"],
                  "slurm %s: slurmrestd listens on 0.0.0.0:6820 by default" % ver)
            layers = cfgs["localhost/slurmop/slurmd:" + ver][1]
            r = os.path.join(tmp, "slurm-" + ver)
            os.makedirs(r)
            tf2, m2 = read_archive(tf.name)
            extract_layers(tf2, m2, ["blobs/sha256/" + d.split(":")[1] for d in layers], r)
            for b in ("slurmctld", "slurmd", "slurmrestd"):
                p = chroot_ro(r, [b, "-V"])
                check(p.returncode == 0 and p.stdout.strip().startswith("slurm") and (" " + ver + ".") in p.stdout,
                      "slurm %s: %s -V: %s" % (ver, b, (p.stdout + p.stderr).strip()))
            # slurmdbd, sackd and the clients want a configuration even for -V.
            pk = ("slurmctld", "slurmd", "slurmrestd", "slurmdbd", "sackd", "slurm-client",
                  "slurm-wlm-basic-plugins", "slurm-wlm-jwt-plugin")
            p = chroot_ro(r, ["dpkg-query", "-W", "-f", "${Package} ${Version}\\n"] + list(pk))
            got = dict(l.split(" ", 1) for l in p.stdout.splitlines() if " " in l)
            check(all(got.get(k, "").startswith(ver + ".") for k in pk),
                  "slurm %s: every Slurm package is %s.x: %s" % (ver, ver, got))
            p = chroot_ro(r, ["/usr/local/bin/slurmd-entrypoint.sh", "-V"], env_extra={"SLURMD_SSHD": "0"})
            check(p.returncode == 0 and (" " + ver + ".") in p.stdout,
                  "slurm %s: slurmd-entrypoint.sh -V runs slurmd in the image: %s" % (ver, (p.stdout + p.stderr).strip()))
            p = chroot_ro(r, ["id", "slurm"])
            check("uid=401(slurm) gid=401(slurm)" in p.stdout, "slurm %s: slurm is 401:401 (%s)" % (ver, p.stdout.strip()))
            for b in ("tini", "sshd", "ps", "setpriv", "bash"):
                p = chroot_ro(r, ["sh", "-c", "command -v " + b])
                check(p.returncode == 0, "slurm %s: %s present" % (ver, b))
            # slurmd (root) refuses a /run/slurm owned by someone else (seen on
            # real pods: "_prepare_run_dir: /run/slurm exists but is owned by 401").
            rs = os.path.join(r, "run", "slurm")
            check(not os.path.exists(rs) or os.stat(rs).st_uid == 0,
                  "slurm %s: no /run/slurm of another owner than root in the image" % ver)
            check(not any(n.startswith("ssh_host_") for n in os.listdir(os.path.join(r, "etc", "ssh"))),
                  "slurm %s: no SSH host keys baked in" % ver)
    if "mariadb" in targets:
        imgs, _ = build(["mariadb"])
        for ref, path in imgs.items():
            check(ref.startswith("localhost/slurmop/mariadb:"), "mariadb: ref %s" % ref)
            tf, members, cfgs = oci_images(path)
            cfg, layers = cfgs[ref]
            check(cfg["config"].get("Entrypoint") == ["tini", "--", "/usr/local/bin/mariadb-entrypoint.sh"]
                  and cfg["config"].get("Cmd") == ["mariadbd"], "mariadb: entrypoint and cmd")
            r = os.path.join(tmp, "mariadb")
            os.makedirs(r)
            extract_layers(tf, members, ["blobs/sha256/" + d.split(":")[1] for d in layers], r)
            p = chroot_ro(r, ["mariadbd", "--version"])
            check(p.returncode == 0 and ref.split(":")[-1] in p.stdout, "mariadb: %s" % p.stdout.strip())
            p = chroot_ro(r, ["id", "mysql"])
            check("uid=999(mysql)" in p.stdout, "mariadb: mysql is uid 999 (%s)" % p.stdout.strip())
            # slurmdbd refuses to run safely on snapshot isolation, MariaDB
            # 11.8's default (seen on real pods: "innodb_snapshot_isolation
            # is enabled, which is not supported by Slurm").
            p = chroot_ro(r, ["my_print_defaults", "mariadbd"])
            check("--innodb_snapshot_isolation=OFF" in p.stdout.split(),
                  "mariadb: innodb_snapshot_isolation=OFF in its configuration (%s)" % p.stdout.split())
    # Checked under the build lock, so that another build running meanwhile
    # (the real-pods suite's) cannot be mistaken for a leftover of ours.
    import fcntl
    with open(os.path.join(cache, ".lock"), "a") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        mounts, files = leftovers(cache)
        check(not mounts, "nothing left mounted below %s (%s)" % (cache, mounts))
        check(set(files) <= set(before), "buildah's files outside the cache removed (%s)" % files)
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout.splitlines()
        check(not [l for l in ps if l.startswith(("buildah ", "debootstrap "))], "no buildah or debootstrap left running")
    # Warm: everything above is cached, so a second run only prints.
    # Judged by what it did, not by its time: it may wait for the lock while
    # another checkout's build runs.
    warm = [t for t in targets if t in ("pause", "operator", "slurm", "mariadb")]
    if warm:
        _, dt, err = build(warm, want_err=True)
        built = [l for l in err.splitlines() if l.startswith(("ocipack:", "images: debootstrap", "images: operator image"))]
        check(not built, "build.sh %s warm (%.1f s): nothing built again (%s)" % (" ".join(warm), dt, built))


def main():
    with tempfile.TemporaryDirectory(prefix="test-images.") as tmp:
        os.chmod(tmp, 0o755)
        test_ocipack(tmp)
        test_entrypoints(tmp)
        test_pause(tmp)
        if os.geteuid() != 0:
            print("%d passed, %d failed" % (0, len(FAILS)))
            print("skip: the image builds need root")
            sys.exit(1 if FAILS else 77)
        test_built(tmp)
    print("%s" % ("FAILED: %d check(s): %s" % (len(FAILS), "; ".join(FAILS)) if FAILS else "all checks passed"))
    sys.exit(1 if FAILS else 0)


if __name__ == "__main__":
    main()

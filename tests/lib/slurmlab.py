"""The Slurm lab (tests/slurm/slurmlab.sh) seen from a Python test, for every
Slurm version the lab runs (SLURMLAB_VERSION: 22.05, the default, 24.11,
26.05): start and stop it, read nodes over REST with the lab's own data
parser (SLURMLAB_API) in one shape, run the lab's clients (SLURMLAB_BIN:
the host's for 22.05, chrooted wrappers for the newer ones), kill and
restart slurmrestd and slurmctld, and give slurmop the flags that fit the
version.

Python standard library only. Typical use:

    from slurmlab import Lab
    lab = Lab(tmp, ["slinky-0", "slinky-1"])
    lab.start()                     # exits 77 when the lab cannot run here
    with Slurmop(kubeconfig, **lab.slurmop_flags(lab.url)) as op:
        ...
    lab.stop()

Node objects from Lab.node() are slurmrestd's, with the state normalized to
v0.0.38's shape whatever the version: "state" the base state in lower case
("idle", "mixed", "allocated", "down", ...), "state_flags" the other state
words in upper case ("DRAIN", "NOT_RESPONDING", ...), and "features" and
"active_features" comma-separated strings.
"""

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

__all__ = ["Lab", "VERSION", "NEWER", "skip_unless_runnable", "normalize_node"]

SRC = os.environ.get("OP_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LAB_SH = os.path.join(SRC, "tests", "slurm", "slurmlab.sh")
VERSION = os.environ.get("SLURMLAB_VERSION") or "22.05"
# 24.11 and 26.05: node writes go over REST (slurmop runs without
# --slurm-conf: the host's 22.05 libslurm cannot speak with their slurmctld).
NEWER = VERSION != "22.05"
BASE_STATES = {"IDLE", "ALLOCATED", "MIXED", "DOWN", "ERROR", "FUTURE", "UNKNOWN"}


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def skip_unless_runnable(extra_bins=()):
    """Exit 77 when this version's lab cannot run here: 22.05 without the
    host's Slurm packages, any version when not root. (24.11 and 26.05 exit
    77 from Lab.start() when their root file system cannot be built.)"""
    if not NEWER:
        missing = [b for b in ("slurmctld", "slurmd", "slurmrestd", "munged", "scontrol") + tuple(extra_bins)
                   if not shutil.which(b)]
        if missing:
            skip("Slurm binaries missing: %s (tests/deps.sh installs them)" % " ".join(missing))
    if os.geteuid() != 0:
        skip("the Slurm %s lab needs root" % VERSION)


def normalize_node(n):
    """A node object of any data parser in v0.0.38's shape (see above)."""
    if not isinstance(n, dict):
        return n
    n = dict(n)
    st = n.get("state")
    if isinstance(st, list):  # v0.0.40+: one list of state words
        words = [str(w).upper() for w in st]
        base = [w for w in words if w in BASE_STATES]
        n["state"] = (base[0] if base else (words[0] if words else "unknown")).lower()
        n["state_flags"] = [w for w in words if w not in base[:1]]
    for k in ("features", "active_features"):
        if isinstance(n.get(k), list):
            n[k] = ",".join(n[k])
    return n


class Lab:
    """One lab of SLURMLAB_VERSION in tmp/lab with static nodes `nodes`."""

    def __init__(self, tmp, nodes, extra_env=None):
        self.dir = os.path.join(tmp, "lab")
        self.version = VERSION
        self.newer = NEWER
        self.env = dict(os.environ, SLURMLAB_DIR=self.dir, SLURMLAB_NODE_NAMES=" ".join(nodes),
                        SLURMLAB_VERSION=VERSION, **(extra_env or {}))
        if NEWER:
            # slurmop's tokens are for user slurm, Slinky's SlurmUser; only
            # root and SlurmUser may update nodes, and on 24.11 and 26.05
            # slurmop's node writes go over REST with those tokens.
            self.env.setdefault("SLURMLAB_SLURM_USER", "slurm")
        self.started = False
        self.vars = {}
        self.rest_cmd = None
        self.start_s = None

    # ---- lifecycle ----

    def start(self, timeout=600):
        """Start the lab (a root file system may be built first: up to a few
        minutes); exit 77 when slurmlab.sh says it cannot run here."""
        t = time.monotonic()
        p = subprocess.run(["bash", LAB_SH, "start"], env=self.env, capture_output=True, text=True, timeout=timeout)
        self.started = True  # stop() cleans up whatever a failed start left
        if p.returncode == 77:
            self.stop()
            skip("slurmlab.sh cannot start Slurm %s: %s" % (VERSION, p.stderr.strip()[-300:]))
        if p.returncode != 0:
            raise AssertionError("slurmlab start failed:\n%s\n%s" % (p.stdout, p.stderr))
        self.start_s = time.monotonic() - t
        for line in p.stdout.splitlines():
            if line.startswith("export "):
                k, v = line[len("export "):].split("=", 1)
                self.vars[k] = v.strip('"')
        assert self.vars.get("SLURMLAB_VERSION") == VERSION, self.vars
        self.url = self.vars["SLURMRESTD_URL"]
        self.conf = self.vars["SLURM_CONF"]
        self.api = self.vars["SLURMLAB_API"]
        self.bin = self.vars["SLURMLAB_BIN"]
        with open(self.vars["SLURMLAB_JWT_KEY"], "rb") as f:
            self.jwt_key = f.read()
        self.token = self.vars["SLURMRESTD_TOKEN"]
        self.cli_env = dict(os.environ, SLURM_CONF=self.conf)
        return self

    def stop(self):
        if os.environ.get("SLURMLAB_LOGS") and os.path.isdir(os.path.join(self.dir, "log")):
            shutil.copytree(os.path.join(self.dir, "log"), os.environ["SLURMLAB_LOGS"], dirs_exist_ok=True)
        if self.started:
            p = subprocess.run(["bash", LAB_SH, "stop"], env=self.env, capture_output=True, text=True, timeout=120)
            self.started = False
            if p.returncode != 0:
                print("slurmlab stop exited %d: %s" % (p.returncode, p.stderr.strip()[-500:]), flush=True)

    def restart_ctld(self, *args):
        p = subprocess.run(["bash", LAB_SH, "restart-ctld"] + list(args), env=self.env, capture_output=True,
                           text=True, timeout=90)
        if p.returncode != 0:
            raise AssertionError("slurmlab restart-ctld failed:\n%s\n%s" % (p.stdout, p.stderr))

    # ---- slurmop ----

    def slurmop_flags(self, url=None, **extra):
        """Keyword arguments of tests/lib/slurmop.Slurmop for this lab:
        --slurmrestd default/slurm=url (the lab's slurmrestd, or a proxy in
        front of it), and on 22.05 --slurm-conf (node writes through the
        libslurm backend); 24.11 and 26.05 write over REST, and slurmop gets
        no slurm.conf at all (not even $SLURM_CONF)."""
        flags = dict(slurmrestd="default/slurm=" + (url or self.url), **extra)
        if self.newer:
            flags["env"] = {"SLURM_CONF": ""}
        else:
            flags["slurm_conf"] = self.conf
            flags["env"] = {"SLURM_CONF": self.conf}
        return flags

    # ---- REST reads (the lab's data parser, the lab's root token) ----

    def rest(self, path, timeout=5):
        """GET /slurm/<api>/path: (status, parsed body or None)."""
        req = urllib.request.Request(self.url + "/slurm/" + self.api + "/" + path.lstrip("/"),
                                     headers={"X-SLURM-USER-NAME": "root", "X-SLURM-USER-TOKEN": self.token})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            try:
                return e.code, json.loads(e.read())
            except ValueError:
                return e.code, None
        except (urllib.error.URLError, OSError, ValueError):
            return None, None

    def node(self, name):
        """The node object (normalized, see above), or None when slurmrestd
        cannot be read or does not list the node."""
        status, doc = self.rest("node/" + name)
        try:
            if status != 200:
                return None
            return normalize_node([n for n in doc["nodes"] if n.get("name") == name][0])
        except (KeyError, IndexError, TypeError):
            return None

    # ---- the lab's clients ----

    def client(self, name):
        return os.path.join(self.bin, name)

    def run(self, name, *args, check=True, timeout=30):
        p = subprocess.run([self.client(name)] + list(args), env=self.cli_env, capture_output=True, text=True,
                           timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError("%s %s: %s %s" % (name, " ".join(args), p.stdout, p.stderr))
        return p

    def scontrol(self, *args, check=True):
        """scontrol's stdout, or None when it failed and check is False."""
        p = self.run("scontrol", *args, check=check)
        return p.stdout if p.returncode == 0 else None

    def sbatch(self, nodes, seconds, ntasks=None, name=None, wrap=None):
        """Submit `sleep seconds` (or wrap) on nodes (a list), one task per
        node; the job id."""
        args = ["--parsable", "-w", ",".join(nodes), "-N%d" % len(nodes), "-n%d" % (ntasks or len(nodes)),
                "-D", "/tmp", "-o", "/dev/null"]
        if name:
            args += ["-J", name]
        p = self.run("sbatch", *(args + ["--wrap", wrap or "sleep %d" % seconds]))
        return p.stdout.strip().split(";")[0]

    def job_report(self, job, log_lines=20):
        """What Slurm says of a job and its nodes, and the end of
        slurmctld's log: for the message of a wait on the job that timed out
        (the lab's folder is gone by the time a CI failure is read)."""
        out = ["scontrol show job %s: %s" % (job, (self.scontrol("show", "job", job, "-o", check=False) or "?").strip()),
               "sinfo: " + " | ".join((self.run("sinfo", "-N", "-h", "-o", "%N %T %E", check=False).stdout or "?")
                                      .strip().splitlines())]
        try:
            with open(os.path.join(self.dir, "log", "slurmctld.log"), errors="replace") as f:
                out.append("slurmctld.log (last %d lines):\n  " % log_lines + "\n  ".join(f.read().splitlines()[-log_lines:]))
        except OSError as e:
            out.append("slurmctld.log: %s" % e)
        # The nodes' side of a job's end: slurmd hands it to slurmctld
        # (REQUEST_COMPLETE_BATCH_SCRIPT, the epilog's end), so a lost end
        # shows here first.
        for path in sorted(glob.glob(os.path.join(self.dir, "log", "slurmd.*.log"))):
            try:
                with open(path, errors="replace") as f:
                    tail = f.read().splitlines()[-log_lines // 2:]
            except OSError:
                continue
            out.append("%s (last %d lines):\n  " % (os.path.basename(path), len(tail)) + "\n  ".join(tail))
        return "\n".join(out)

    def scancel(self, job):
        self.run("scancel", job, check=False)

    def job_state(self, job):
        """(JobState, ExitCode, NodeList), or (None, None, None) when Slurm
        does not know the job (or cannot be reached)."""
        out = self.scontrol("show", "job", job, "-o", check=False)
        if not out:
            return None, None, None
        fields = dict(kv.split("=", 1) for kv in out.split() if "=" in kv)
        return fields.get("JobState"), fields.get("ExitCode"), fields.get("NodeList")

    def reservation(self, name):
        """`scontrol show reservation NAME -o` as a dict, or None."""
        out = self.scontrol("show", "reservation", name, "-o", check=False)
        if not out or "ReservationName=" not in out:
            return None
        return dict(kv.split("=", 1) for kv in out.split() if "=" in kv)

    # ---- slurmrestd killed and started again ----

    def rest_pid(self):
        with open(os.path.join(self.dir, "run", "slurmrestd.pid")) as f:
            return int(f.read().strip())

    def kill_rest(self, probe_node):
        """SIGKILL slurmrestd; remember how to start it again."""
        pid = self.rest_pid()
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            self.rest_cmd = [a.decode() for a in f.read().split(b"\0") if a]
        with open("/proc/%d/environ" % pid, "rb") as f:
            self.rest_env = dict(kv.decode().split("=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while self.node(probe_node) is not None:
            assert time.monotonic() < deadline, "slurmrestd still answers after SIGKILL"
            time.sleep(0.05)

    def restart_rest(self, probe_node):
        """Start slurmrestd as slurmlab.sh did: as nobody, and for 24.11 and
        26.05 through the lab's runner (bin/.run: chrooted, in a mount
        namespace of its own), which its command line (seen from inside the
        root file system) needs."""
        cmd = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] + self.rest_cmd
        env = dict(self.rest_env)
        if self.newer:
            cmd = [os.path.join(self.bin, ".run")] + cmd
            env.pop("SLURMLAB_NS", None)
            env["PATH"] = os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        out = open(os.path.join(self.dir, "log", "slurmrestd.out"), "ab")
        p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
        out.close()
        with open(os.path.join(self.dir, "run", "slurmrestd.pid"), "w") as f:
            f.write("%d\n" % p.pid)  # so that `slurmlab.sh stop` stops it
        deadline = time.monotonic() + 20
        while self.node(probe_node) is None:
            assert p.poll() is None, "slurmrestd exited %s at restart" % p.returncode
            assert time.monotonic() < deadline, "slurmrestd did not come back"
            time.sleep(0.05)


def lab_cluster(c, lab, nodesets, **cluster):
    """The Kubernetes side every Slurm-lab scenario starts from, in kubesim
    or a real API server (client c, CRDs applied): the Controller's JWT key
    Secret holding the lab's key (slurmop mints its tokens with it), the
    Controller "slurm" with the given NodeSets (slurmop.make_cluster, which
    takes **cluster too), and the RestApi "slurm" that tells slurmop the
    Controller has a slurmrestd."""
    import base64
    from slurmop import NS_API, make_cluster
    r = c.post("/api/v1/namespaces/default/secrets",
               {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "slurm-auth-jwt"},
                "data": {"jwt.key": base64.b64encode(lab.jwt_key).decode()}})
    assert r.status == 201, r.text
    make_cluster(c, nodesets=nodesets, **cluster)
    r = c.post(NS_API + "/namespaces/default/restapis",
               {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "RestApi", "metadata": {"name": "slurm"},
                "spec": {"controllerRef": {"name": "slurm"}}})
    assert r.status == 201, r.text


def run_in_lab(name, nodes, scenario, api, lab_env=None, extra_bins=()):
    """The main of a Slurm test with one scenario: exit 77 when the lab
    cannot run here; a lab of `nodes` (static slurmd names; lab_env adds
    SLURMLAB_* settings) in a fresh folder; scenario(ks, lab) with the API
    server of api() (a context manager, e.g. backend.api_server(...) or
    kubesim.Kubesim(...)); then everything stopped and removed, and PASS."""
    skip_unless_runnable(extra_bins)
    tmp = tempfile.mkdtemp(prefix=name + ".")
    os.chmod(tmp, 0o755)  # munged needs every folder above its socket searchable
    lab = Lab(tmp, nodes, extra_env=lab_env)
    try:
        lab.start()
        with api() as ks:
            scenario(ks, lab)
    except Exception as e:
        # backend.Skip (kubesim_only on the k8s backend): ctest's "skipped"
        if type(e).__name__ != "Skip":
            raise
        print("SKIP: %s" % e)
        sys.exit(77)
    finally:
        lab.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS")

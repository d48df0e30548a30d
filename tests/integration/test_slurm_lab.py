#!/usr/bin/env python3
"""A real Slurm 22.05 on loopback, started by tests/slurm/slurmlab.sh, against
the slurmio modules (through tools/slurmio-cli):

- a token minted by slurmio (jwt.c) is accepted by slurmctld through slurmrestd
  (GET /slurm/v0.0.38/nodes: 200, no errors); an expired one is refused, and
  the model decodes that refusal as an error, not as "no nodes";
- a token minted by slurmctld (scontrol token) passes slurmio's verifier;
- the libslurm backend drains a node (DRAIN visible over REST, and "drained"
  in the model), undrains it, and reports an unknown node as ENOTFOUND;
- stopping the lab leaves no process and no listener behind.

Exit 77 (ctest: skipped) when the Slurm binaries are not installed.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

SRC = os.environ.get("OP_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("OP_BUILD_DIR", os.path.join(SRC, "build"))
LAB_SH = os.path.join(SRC, "tests", "slurm", "slurmlab.sh")
CLI = os.path.join(BUILD, "tools", "slurmio-cli")
NODES = ["slinky-0", "slinky-1", "slinky-2"]


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def fail(why):
    print("FAIL: " + why)
    sys.exit(1)


def check(cond, why):
    if not cond:
        fail(why)


def run(args, env=None, ok=True, timeout=60):
    p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout)
    if ok and p.returncode != 0:
        fail("%s exited %d\nstdout: %s\nstderr: %s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
    return p


def get(url, user, token):
    """GET url with slurmrestd's auth headers: (status, body bytes)."""
    req = urllib.request.Request(url, headers={"X-SLURM-USER-NAME": user, "X-SLURM-USER-TOKEN": token})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def model(version, kind, status, body, tmp):
    """Decode a response body with slurmio's model (slurmio-cli parse)."""
    path = os.path.join(tmp, "body.json")
    with open(path, "wb") as f:
        f.write(body)
    p = run([CLI, "parse", "--version", version, "--kind", kind, "--status", str(status), path], ok=False)
    return json.loads(p.stdout)


def lab_processes(lab):
    """Live (non-zombie) processes that belong to the lab: tagged by
    slurmlab.sh, or naming the lab directory on their command line."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = f.read().split(b"\0")
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().replace(b"\0", b" ")
        except (OSError, IndexError):
            continue
        if b"SLURMLAB_TAG=" + lab.encode() in env or lab.encode() in cmd:
            found.append((int(pid), cmd.decode(errors="replace")))
    return found


def port_open(port):
    s = socket.socket()
    s.settimeout(1)
    try:
        return s.connect_ex(("127.0.0.1", port)) == 0
    finally:
        s.close()


def main():
    missing = [b for b in ("slurmctld", "slurmd", "slurmrestd", "munged", "scontrol") if not shutil.which(b)]
    if missing:
        skip("Slurm binaries missing: %s (tests/deps.sh installs them)" % " ".join(missing))
    check(os.access(CLI, os.X_OK), "no %s (build the tests)" % CLI)
    check(os.geteuid() == 0, "the Slurm lab needs root")

    tmp = tempfile.mkdtemp(prefix="test_slurm_lab.")
    os.chmod(tmp, 0o755)  # munged needs every directory above its socket searchable by all
    lab = os.path.join(tmp, "lab")
    env = dict(os.environ, SLURMLAB_DIR=lab, SLURMLAB_NODE_NAMES=" ".join(NODES))
    started = False
    try:
        t0 = time.monotonic()
        p = run(["bash", LAB_SH, "start"], env=env, timeout=120)
        started = True
        print("lab started in %.2f s" % (time.monotonic() - t0))
        labenv = {}
        for line in p.stdout.splitlines():
            if line.startswith("export "):
                k, v = line[len("export "):].split("=", 1)
                labenv[k] = v.strip('"')
        url, key = labenv["SLURMRESTD_URL"], labenv["SLURMLAB_JWT_KEY"]
        conf = labenv["SLURM_CONF"]
        rest_port = int(url.rsplit(":", 1)[1])

        # 1. Our token is accepted.
        tok = run([CLI, "token", "--key", key, "--user", "root", "--lifetime", "600"]).stdout.strip()
        status, body = get(url + "/slurm/v0.0.38/nodes", "root", tok)
        doc = json.loads(body)
        check(status == 200, "GET nodes with our token: HTTP %d %s" % (status, body[:300]))
        check(doc.get("errors") == [], "GET nodes with our token: errors %s" % doc.get("errors"))
        check(sorted(n["name"] for n in doc["nodes"]) == NODES, "nodes %s" % [n["name"] for n in doc["nodes"]])
        m = model("v0.0.38", "nodes", status, body, tmp)
        check(m["ok"] and len(m["nodes"]) == 3, "model of GET nodes: %s" % m)
        check(all(n["base"] == "IDLE" and not n["drained"] for n in m["nodes"]), "nodes not idle: %s" % m)
        print("ok: token minted by slurmio accepted; 3 idle nodes")

        # 2. An expired token is refused, and the refusal is an error.
        old = run([CLI, "token", "--key", key, "--user", "root", "--lifetime", "-300"]).stdout.strip()
        status, body = get(url + "/slurm/v0.0.38/nodes", "root", old)
        check(status != 200 or json.loads(body).get("errors"), "expired token accepted: %d %s" % (status, body[:200]))
        m = model("v0.0.38", "nodes", status, body, tmp)
        check(not m["ok"], "model took the refusal for success: %s" % m)
        print("ok: expired token refused (HTTP %d, %s)" % (status, m["code"]))

        # 3. slurmctld's own token passes our verifier.
        p = run(["scontrol", "token", "username=root", "lifespan=600"], env=dict(env, SLURM_CONF=conf))
        stok = p.stdout.strip().split("=", 1)[1]
        claims = json.loads(run([CLI, "verify", "--key", key, stok]).stdout)
        check(claims["sun"] == "root", "claims of scontrol's token: %s" % claims)
        p = run([CLI, "verify", "--key", key, old], ok=False)
        check(p.returncode == 1, "expired token verified")
        print("ok: scontrol's token verified by slurmio")

        # 4. Drain through the libslurm backend, see it over REST, undrain.
        reason = "slurm-operator: Pod (slurm/slinky-1) is pending termination for scale-in"
        p = run([CLI, "--slurm-conf", conf, "drain", "--reason", reason, "slinky-1"])
        print(p.stdout.strip())
        status, body = get(url + "/slurm/v0.0.38/node/slinky-1", "root", tok)
        node = json.loads(body)["nodes"][0]
        check(status == 200 and "DRAIN" in node["state_flags"], "after drain: %d %s" % (status, node))
        check(node["reason"] == reason, "drain reason %r" % node["reason"])
        m = model("v0.0.38", "node", status, body, tmp)
        check(m["ok"] and m["nodes"][0]["drained"], "model of the drained node: %s" % m)
        status, body = get(url + "/slurm/v0.0.38/node/slinky-0", "root", tok)
        check("DRAIN" not in json.loads(body)["nodes"][0]["state_flags"], "slinky-0 drained too")
        print("ok: DRAIN visible over REST")

        run([CLI, "--slurm-conf", conf, "undrain", "slinky-1"])
        status, body = get(url + "/slurm/v0.0.38/node/slinky-1", "root", tok)
        node = json.loads(body)["nodes"][0]
        check(status == 200 and "DRAIN" not in node["state_flags"], "after undrain: %s" % node)
        m = model("v0.0.38", "node", status, body, tmp)
        check(m["ok"] and not m["nodes"][0]["drain"], "model after undrain: %s" % m)
        print("ok: undrained")

        p = run([CLI, "--slurm-conf", conf, "drain", "--reason", "x", "nosuch"], ok=False)
        check(p.returncode == 1 and "ENOTFOUND" in p.stderr, "drain of an unknown node: %s" % p.stderr)
        status, body = get(url + "/slurm/v0.0.38/node/nosuch", "root", tok)
        m = model("v0.0.38", "node", status, body, tmp)
        check(not m["ok"] and m["code"] == "ENOTFOUND", "GET unknown node: %s" % m)
        print("ok: unknown node is ENOTFOUND on both paths")

        # 5. Reservations through the backend, read back over REST.
        cli = [CLI, "--slurm-conf", conf]
        p = run(cli + ["resv-create", "--name", "SlurmOperatorMaint-slinky", "--nodes", "slinky-[0-1]",
                       "--users", "root", "--flags", "MAINT,IGNORE_JOBS", "--duration", "30"])
        check("reservation SlurmOperatorMaint-slinky" in p.stdout, "resv-create: %s" % p.stdout)
        run(cli + ["resv-update", "--name", "SlurmOperatorMaint-slinky", "--nodes", "slinky-[0-2]", "--duration", "45"])
        status, body = get(url + "/slurm/v0.0.38/reservations", "root", tok)
        m = model("v0.0.38", "reservations", status, body, tmp)
        check(m["ok"] and len(m["reservations"]) == 1, "reservations: %s" % m)
        r = m["reservations"][0]
        check(r["name"] == "SlurmOperatorMaint-slinky" and r["node_list"] == "slinky-[0-2]" and r["duration"] == 45
              and "MAINT" in r["flags"] and "IGNORE_JOBS" in r["flags"], "reservation read back: %s" % r)
        p = run(cli + ["resv-create", "--name", "SlurmOperatorMaint-slinky", "--nodes", "slinky-0",
                       "--users", "root"], ok=False)
        check(p.returncode == 1 and "EEXISTS" in p.stderr, "duplicate reservation: %s" % p.stderr)
        run(cli + ["resv-delete", "SlurmOperatorMaint-slinky"])
        p = run(cli + ["resv-delete", "SlurmOperatorMaint-slinky"], ok=False)
        check(p.returncode == 1 and "ENOTFOUND" in p.stderr, "deleting a deleted reservation: %s" % p.stderr)
        status, body = get(url + "/slurm/v0.0.38/reservations", "root", tok)
        check(model("v0.0.38", "reservations", status, body, tmp)["reservations"] == [], "reservation not deleted")
        print("ok: reservation created, updated, read back, deleted")

        # 6. Delete a node record; it is then unknown over REST.
        run(cli + ["delete", "slinky-2"])
        status, body = get(url + "/slurm/v0.0.38/node/slinky-2", "root", tok)
        m = model("v0.0.38", "node", status, body, tmp)
        check(not m["ok"] and m["code"] == "ENOTFOUND", "deleted node still there: %s" % m)
        print("ok: node record deleted")

        # 7. Stop: nothing left running, nothing listening.
        t0 = time.monotonic()
        run(["bash", LAB_SH, "stop"], env=env, timeout=120)
        started = False
        print("lab stopped in %.2f s" % (time.monotonic() - t0))
        left = lab_processes(lab)
        check(not left, "processes left behind: %s" % left)
        check(not port_open(rest_port), "slurmrestd port %d still open" % rest_port)
        run(["bash", LAB_SH, "stop"], env=env)  # idempotent
        print("ok: no process left behind")
    finally:
        if started:
            subprocess.run(["bash", LAB_SH, "stop"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS")


if __name__ == "__main__":
    main()

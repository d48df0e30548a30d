#!/usr/bin/env python3
"""crds/ and deploy/helm on a real Kubernetes API server (tests/k8s/cluster.sh,
through tests/lib/backend.py; k8s only, exit 77 when its binaries are not
built):

- every CEL rule (x-kubernetes-validations) of crds/*.yaml: an object that
  violates it is refused with 422 and the rule's message (a table of cases
  below; a rule without a case fails the test, so a new rule needs one);
- the defaults of the schemas come back as the CRDs say (every `default`
  whose parent object the test's minimal objects hold);
- every field of spec and status has its description in the server's
  OpenAPI v3 (what `kubectl explain` prints), and `kubectl explain` shows it;
- the server's printer columns (the Table `kubectl get` prints) are the
  CRDs' additionalPrinterColumns, with the values of their JSON paths;
- `kubectl scale nodeset` through the scale subresource; `kubectl describe
  nodeset` shows slurmop's Events (slurmop runs as a process with the
  ServiceAccount token of the slurmop chart);
- `helm lint` and `helm template` of every chart of deploy/helm; `helm
  install` of slurmop-crds, slurmop and slurm into the cluster. The
  operator Deployment's pod is bound and made Running by kwok, but no
  container runs under kwok: the operator under test is this process, run
  with a token of the chart's ServiceAccount, and must get no 403.
"""
import copy
import glob
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
os.environ["SLURMOP_TEST_BACKEND"] = "k8s"  # a real control plane only

from backend import api_server  # noqa: E402
from kubesim import run_tests  # noqa: E402
from slurmop import NS_API, SRC, Slurmop, pods_of, wait_for, yaml_to_json  # noqa: E402

CRDS = sorted(glob.glob(os.path.join(SRC, "crds", "*.yaml")))
CHARTS = os.path.join(SRC, "deploy", "helm")
NS = "crds"
KEY = {"name": "slurm-auth-slurm", "key": "slurm.key"}
JWT = {"name": "slurm-auth-jwt", "key": "jwt.key"}
IMG = {"image": "registry.invalid/x:1"}

# A minimal valid object per kind.
BASE = {
    "Controller": {"slurmKeyRef": KEY, "jwtKeyRef": JWT, "slurmctld": IMG, "logfile": IMG,
                   "persistence": {"enabled": False}},
    "Accounting": {"slurmKeyRef": KEY, "jwtKeyRef": JWT, "slurmdbd": IMG,
                   "storageConfig": {"host": "db", "passwordKeyRef": {"name": "db", "key": "password"}}},
    "RestApi": {"controllerRef": {"name": "slurm"}, "slurmrestd": IMG},
    "NodeSet": {"controllerRef": {"name": "slurm"}, "replicas": 1, "slurmd": IMG, "logfile": IMG,
                "template": {"spec": {"hostname": "ns-"}}},
    "LoginSet": {"controllerRef": {"name": "slurm"}, "sssdConfRef": {"name": "sssd", "key": "sssd.conf"},
                 "login": IMG, "initconf": IMG},
    "Token": {"username": "alice", "jwtKeyRef": JWT},
}
VCT = {"metadata": {"name": "scratch"},
       "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
PLURAL = {"Controller": "controllers", "Accounting": "accountings", "RestApi": "restapis", "NodeSet": "nodesets",
          "LoginSet": "loginsets", "Token": "tokens"}


def without(d, *keys):
    d = copy.deepcopy(d)
    for k in keys:
        d.pop(k, None)
    return d


def merged(d, extra):
    d = copy.deepcopy(d)
    d.update(extra)
    return d


# (kind, message) -> ("create", spec) or ("update", spec at creation, merge patch of spec)
CASES = {
    ("Controller", "slurmKeyRef must be set when external is false"): ("create", without(BASE["Controller"], "slurmKeyRef")),
    ("Controller", "jwtKeyRef or jwtHs256KeyRef must be set when external is false"):
        ("create", without(BASE["Controller"], "jwtKeyRef")),
    ("Accounting", "slurmKeyRef must be set when external is false"): ("create", without(BASE["Accounting"], "slurmKeyRef")),
    ("Accounting", "jwtKeyRef or jwtHs256KeyRef must be set when external is false"):
        ("create", without(BASE["Accounting"], "jwtKeyRef")),
    ("Accounting", "externalConfig must be set when external is true"):
        ("create", merged(BASE["Accounting"], {"external": True})),
    ("Accounting", "the JWT key reference cannot be changed after creation"):
        ("update", BASE["Accounting"], {"jwtKeyRef": {"name": "slurm-auth-jwt", "key": "other.key"}}),
    ("Controller", "externalConfig must be set when external is true"):
        ("create", merged(BASE["Controller"], {"external": True})),
    ("Controller", "ha.enabled requires persistence.enabled and persistence.existingClaim"):
        ("create", merged(BASE["Controller"], {"ha": {"enabled": True}})),
    ("Controller", "clusterName cannot be changed after creation"):
        ("update", merged(BASE["Controller"], {"clusterName": "a"}), {"clusterName": "b"}),
    ("Controller", "slurmKeyRef.name cannot be changed after creation"):
        ("update", BASE["Controller"], {"slurmKeyRef": {"name": "other", "key": "slurm.key"}}),
    ("Controller", "the JWT key reference cannot be changed after creation"):
        ("update", BASE["Controller"], {"jwtKeyRef": {"name": "slurm-auth-jwt", "key": "other.key"}}),
    ("Controller", "persistence.enabled cannot be changed after creation"):
        ("update", BASE["Controller"], {"persistence": {"enabled": True, "existingClaim": "x"}}),
    ("Controller", "persistence.existingClaim cannot be changed after creation"):
        ("update", merged(BASE["Controller"], {"persistence": {"enabled": True, "existingClaim": "a"}}),
         {"persistence": {"existingClaim": "b"}}),
    ("LoginSet", "controllerRef cannot be changed after creation"):
        ("update", BASE["LoginSet"], {"controllerRef": {"name": "other"}}),
    ("LoginSet", "sssdConfRef.name must not be empty"):
        ("create", merged(BASE["LoginSet"], {"sssdConfRef": {"name": "", "key": "sssd.conf"}})),
    ("NodeSet", "controllerRef cannot be changed after creation"):
        ("update", BASE["NodeSet"], {"controllerRef": {"name": "other"}}),
    ("NodeSet", "volumeClaimTemplates cannot be changed after creation"):
        ("update", merged(BASE["NodeSet"], {"volumeClaimTemplates": [VCT]}),
         {"volumeClaimTemplates": [merged(VCT, {"spec": merged(VCT["spec"], {"resources": {
             "requests": {"storage": "2Gi"}}})})]}),
    ("NodeSet", "ssh.sssdConfRef.name must not be empty when ssh is enabled"):
        ("create", merged(BASE["NodeSet"], {"ssh": {"enabled": True}})),
    ("NodeSet", "scheduledUpdate.startTime and scheduledUpdate.duration must be set when type is ScheduledUpdate"):
        ("create", merged(BASE["NodeSet"], {"updateStrategy": {"type": "ScheduledUpdate"}})),
    ("NodeSet", "maxUnavailable must be >= 1 or a percentage above 0%"):
        ("create", merged(BASE["NodeSet"], {"updateStrategy": {"type": "RollingUpdate",
                                                                "rollingUpdate": {"maxUnavailable": 0}}})),
    ("NodeSet", "scheduledUpdate.duration must be at least 1m"):
        ("create", merged(BASE["NodeSet"], {"updateStrategy": {
            "type": "ScheduledUpdate", "scheduledUpdate": {"startTime": "2026-01-01T02:00:00Z", "duration": "30s"}}})),
    ("Token", "jwtKeyRef or jwtHs256KeyRef must be set"): ("create", without(BASE["Token"], "jwtKeyRef")),
    ("Token", "the JWT key reference cannot be changed after creation"):
        ("update", BASE["Token"], {"jwtKeyRef": {"name": "slurm-auth-jwt", "key": "other.key"}}),
}


def crd_docs():
    return [d for d in yaml_to_json(CRDS) if d and d.get("kind") == "CustomResourceDefinition"]


def walk(schema, path, out_rules, out_defaults):
    for r in schema.get("x-kubernetes-validations") or []:
        out_rules.append((path, r["rule"], r.get("message", "")))
    if "default" in schema:
        out_defaults.append((path, schema["default"]))
    for k, sub in (schema.get("properties") or {}).items():
        walk(sub, path + (k,), out_rules, out_defaults)
    if isinstance(schema.get("items"), dict):
        walk(schema["items"], path + ("[]",), out_rules, out_defaults)


def schema_of(crd):
    v = [v for v in crd["spec"]["versions"] if v.get("storage")][0]
    return v


def obj(kind, name, spec):
    return {"apiVersion": "slinky.slurm.net/v1beta1", "kind": kind, "metadata": {"name": name, "namespace": NS},
            "spec": spec}


def path_of(kind, name=""):
    return NS_API + "/namespaces/%s/%s%s" % (NS, PLURAL[kind], "/" + name if name else "")


_ks = None


def ks():
    """One cluster for the file, the CRDs installed by the slurmop-crds chart."""
    global _ks
    if _ks is None:
        _ks = api_server(nodes=4, crds=False).start()  # the chart installs them
        _ks.helm("install", "slurmop-crds", os.path.join(CHARTS, "slurmop-crds"), "--wait")
        _ks.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "-l",
                    "app.kubernetes.io/instance=slurmop-crds", ok=False)
        c = _ks.client()
        for kind, plural in PLURAL.items():
            wait_for(lambda: c.get(NS_API + "/" + plural).status == 200, 30, what="%s served" % plural)
        _ks.kubectl("create", "namespace", NS)
    return _ks


def test_every_cel_rule_refuses_with_its_message():
    k = ks()
    c = k.client()
    seen = set()
    for crd in crd_docs():
        kind = crd["spec"]["names"]["kind"]
        rules, defaults = [], []
        walk(schema_of(crd)["schema"]["openAPIV3Schema"], (), rules, defaults)
        for path, rule, msg in rules:
            seen.add((kind, msg))
            assert (kind, msg) in CASES, "no violating case for %s rule at %s: %s (%s)" % (
                kind, ".".join(path), rule, msg)
    assert seen == set(CASES), "cases without a rule in crds/: %r" % (set(CASES) - seen)
    for i, ((kind, msg), case) in enumerate(sorted(CASES.items())):
        name = "cel-%d" % i
        if case[0] == "create":
            r = c.post(path_of(kind), obj(kind, name, case[1]))
        else:
            r = c.post(path_of(kind), obj(kind, name, case[1]))
            assert r.status == 201, (kind, msg, r.text)
            r = c.patch(path_of(kind, name), {"spec": case[2]})
        assert r.status == 422, "%s (%s): %d %s" % (kind, msg, r.status, r.text[:400])
        assert msg in r.json().get("message", ""), "%s: want %r in %s" % (kind, msg, r.text[:600])
        print("  %-10s refused: %s" % (kind, msg))


def lookup(o, path):
    for p in path:
        if not isinstance(o, dict) or p not in o:
            return KeyError
        o = o[p]
    return o


def test_volume_claim_templates_immutable():
    """Adding, removing or changing the claim templates is refused; absent,
    null and [] are the same (no claims); other edits of spec go through."""
    c = ks().client()
    with_vct = obj("NodeSet", "vct-a", merged(BASE["NodeSet"], {"volumeClaimTemplates": [VCT]}))
    without_vct = obj("NodeSet", "vct-b", BASE["NodeSet"])
    for o in (with_vct, without_vct):
        r = c.post(path_of("NodeSet"), o)
        assert r.status == 201, r.text
    msg = "volumeClaimTemplates cannot be changed after creation"
    for name, patch in (("vct-a", {"volumeClaimTemplates": None}),
                        ("vct-a", {"volumeClaimTemplates": []}),
                        ("vct-a", {"volumeClaimTemplates": [VCT, merged(VCT, {"metadata": {"name": "b"}})]}),
                        ("vct-b", {"volumeClaimTemplates": [VCT]})):
        r = c.patch(path_of("NodeSet", name), {"spec": patch})
        assert r.status == 422 and msg in r.json().get("message", ""), (name, patch, r.status, r.text[:400])
    for name, patch in (("vct-a", {"replicas": 3}),
                        ("vct-b", {"volumeClaimTemplates": []}),
                        ("vct-b", {"replicas": 2})):
        r = c.patch(path_of("NodeSet", name), {"spec": patch})
        assert r.status == 200, (name, patch, r.status, r.text[:400])
    r = c.put(path_of("NodeSet", "vct-b"), c.get(path_of("NodeSet", "vct-b")).json())
    assert r.status == 200, r.text[:400]
    assert c.get(path_of("NodeSet", "vct-a")).json()["spec"]["volumeClaimTemplates"] == [VCT]


def test_reference_namespaces_kept():
    """The namespace of Slinky's references survives the real API server
    (a field missing from the schema would be pruned without a word), and
    controllerRef stays fixed as a whole: moving it to another namespace is
    refused like renaming it."""
    c = ks().client()
    ref = {"name": "slurm", "namespace": "elsewhere"}
    for kind, name, spec, path in (
            ("NodeSet", "ref-ns", merged(BASE["NodeSet"], {"controllerRef": ref, "taintKubeNodes": True}),
             ("spec", "controllerRef")),
            ("LoginSet", "ref-ls", merged(BASE["LoginSet"], {"controllerRef": ref}), ("spec", "controllerRef")),
            ("RestApi", "ref-ra", merged(BASE["RestApi"], {"controllerRef": ref}), ("spec", "controllerRef")),
            ("Controller", "ref-ctl", merged(BASE["Controller"], {
                "accountingRef": {"name": "acct", "namespace": "db"},
                "configFileRefs": [{"name": "files", "namespace": "elsewhere"}]}), ("spec", "accountingRef")),
            ("Token", "ref-tok", merged(BASE["Token"], {"jwtKeyRef": {"name": "keys", "key": "jwt.key",
                                                                      "namespace": "keys"}}), ("spec", "jwtKeyRef"))):
        r = c.post(path_of(kind), obj(kind, name, spec))
        assert r.status == 201, (kind, r.text[:400])
        assert lookup(r.json(), path) == lookup({"spec": spec}, path), (kind, lookup(r.json(), path))
    got = c.get(path_of("NodeSet", "ref-ns")).json()["spec"]
    assert got["taintKubeNodes"] is True, got
    assert c.get(path_of("Controller", "ref-ctl")).json()["spec"]["configFileRefs"] == [
        {"name": "files", "namespace": "elsewhere"}]
    for kind, name in (("NodeSet", "ref-ns"), ("LoginSet", "ref-ls")):
        r = c.patch(path_of(kind, name), {"spec": {"controllerRef": {"name": "slurm", "namespace": "other"}}})
        assert r.status == 422 and "controllerRef cannot be changed" in r.json().get("message", ""), (
            kind, r.status, r.text[:400])


def test_defaults_come_back():
    k = ks()
    c = k.client()
    checked = 0
    for crd in crd_docs():
        kind = crd["spec"]["names"]["kind"]
        r = c.post(path_of(kind), obj(kind, "defaults", BASE[kind]))
        assert r.status == 201, (kind, r.text)
        got = r.json()
        rules, defaults = [], []
        walk(schema_of(crd)["schema"]["openAPIV3Schema"], (), rules, defaults)
        for path, want in defaults:
            if "[]" in path or path[:1] != ("spec",):
                continue
            sent = lookup({"spec": BASE[kind]}, path)
            parent = lookup(got, path[:-1])
            if sent is not KeyError or parent is KeyError:
                continue  # set by the test, or its parent object is absent (no default applies)
            assert lookup(got, path) == want, "%s %s: default %r, got %r" % (
                kind, ".".join(path), want, lookup(got, path))
            checked += 1
    assert checked >= 5, "only %d defaults checked" % checked
    print("  %d defaults checked" % checked)


def test_printer_columns_and_kubectl():
    k = ks()
    c = k.client()
    for crd in crd_docs():
        kind = crd["spec"]["names"]["kind"]
        cols = schema_of(crd).get("additionalPrinterColumns") or []
        r = c.request("GET", path_of(kind), headers={
            "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
        assert r.status == 200, r.text
        table = r.json()
        names = [d["name"] for d in table["columnDefinitions"]]
        assert names == ["Name"] + [col["name"] for col in cols], (kind, names)
        objs = {o["metadata"]["name"]: o for o in c.get(path_of(kind)).json()["items"]}
        assert table["rows"], kind
        for row in table["rows"]:
            name = row["cells"][0]
            for col, cell in zip(cols, row["cells"][1:]):
                jp = col["jsonPath"].lstrip(".").split(".")
                want = lookup(objs[name], jp)
                if want is KeyError or col["type"] == "date":
                    continue
                assert cell == want, "%s %s column %s: %r, object has %r" % (kind, name, col["name"], cell, want)
        print(k.kubectl("get", PLURAL[kind], "-n", NS, "-o", "wide").stdout.rstrip())


def described_paths(schema, path, out):
    """Every property path of a CRD schema below path, with its description."""
    for name, sub in (schema.get("properties") or {}).items():
        out[path + "." + name] = sub.get("description")
        described_paths(sub, path + "." + name, out)
    for inner in ("items", "additionalProperties"):
        if isinstance(schema.get(inner), dict):
            described_paths(schema[inner], path + "[]", out)
    return out


def test_kubectl_explain_describes_every_field():
    """What `kubectl explain` reads (the server's OpenAPI v3 of the group) carries a description for
    every field of spec and status of the six kinds, and kubectl prints the one of a nested field."""
    k = ks()
    c = k.client()
    r = c.get("/openapi/v3/apis/slinky.slurm.net/v1beta1")
    assert r.status == 200, r.text
    published = r.json()["components"]["schemas"]
    checked = 0
    for crd in crd_docs():
        kind = crd["spec"]["names"]["kind"]
        ours = schema_of(crd)["schema"]["openAPIV3Schema"]
        served = published["net.slurm.slinky.v1beta1." + kind]
        assert served.get("description") == ours["description"], kind
        for top in ("spec", "status"):
            want = described_paths(ours["properties"][top], top, {})
            got = described_paths(served["properties"][top], top, {})
            for path, d in want.items():
                assert d, "%s.%s has no description in crds/" % (kind, path)
                assert got.get(path) == d, "%s.%s served as %r" % (kind, path, got.get(path))
                checked += 1
    assert checked >= 250, checked
    print("  %d fields described by the server" % checked)
    out = k.kubectl("explain", "nodesets.spec.persistentVolumeClaimRetentionPolicy.whenScaled").stdout
    print(out.rstrip())
    want = described_paths(schema_of([d for d in crd_docs() if d["spec"]["names"]["kind"] == "NodeSet"][0])
                           ["schema"]["openAPIV3Schema"]["properties"]["spec"], "spec", {})
    assert " ".join(want["spec.persistentVolumeClaimRetentionPolicy.whenScaled"].split()) in " ".join(out.split()), out


def write_secrets(k, ns):
    for name, key in (("slurm-auth-slurm", "slurm.key"), ("slurm-auth-jwt", "jwt.key")):
        k.kubectl("create", "secret", "generic", name, "-n", ns, "--from-literal=%s=%s" % (key, "k" * 64), ok=False)


def test_helm_lint_and_template():
    k = ks()
    for chart in sorted(os.listdir(CHARTS)):
        path = os.path.join(CHARTS, chart)
        if not os.path.exists(os.path.join(path, "Chart.yaml")):
            continue
        lint = k.helm("lint", "--strict", path, ok=False)
        assert lint.returncode == 0, "helm lint %s:\n%s%s" % (chart, lint.stdout, lint.stderr)
        # without --kube-version helm template assumes v1.20, below the slurm chart's kubeVersion
        tpl = k.helm("template", "t", path, "--kube-version", "1.35.4")
        assert "kind:" in tpl.stdout, chart
        # what the chart renders passes the server's validation (dry run)
        dry = k.kubectl("apply", "--dry-run=server", "-n", "default", "-f", "-", stdin=tpl.stdout, ok=False)
        assert dry.returncode == 0 or chart == "slurm", "server dry run of %s:\n%s" % (chart, dry.stderr)
        print("  helm lint/template %s: ok" % chart)


def test_helm_install_operator_and_cluster_scale_describe():
    k = ks()
    c = k.client()
    # fullnameOverride: the ClusterRole "slurmop" of deploy/manifests (the
    # backend's) is already there
    k.helm("install", "slurmop", os.path.join(CHARTS, "slurmop"), "-n", "slurmop-chart", "--create-namespace",
           "--set", "fullnameOverride=slurmop-chart")
    sa = json.loads(k.kubectl("get", "deployment", "-n", "slurmop-chart", "-o", "json").stdout)["items"][0][
        "spec"]["template"]["spec"]["serviceAccountName"]
    # kwok binds the operator's pod and reports it Running; no container runs.
    wait_for(lambda: any(p.get("status", {}).get("phase") == "Running" for p in
                         c.get("/api/v1/namespaces/slurmop-chart/pods").json()["items"]), 60,
             what="the chart's operator pod Running under kwok")
    kubeconfig = k.cluster.token_kubeconfig("slurmop-chart", sa, "chart-operator.kubeconfig")
    k.helm("install", "slurm", os.path.join(CHARTS, "slurm"), "-n", "slurm", "--create-namespace",
           "--set", "nodesets.slinky.enabled=true", "--set", "nodesets.slinky.replicas=1")  # off by default
    nodesets = json.loads(k.kubectl("get", "nodesets", "-n", "slurm", "-o", "json").stdout)["items"]
    assert nodesets, "the slurm chart made no NodeSet"
    name = nodesets[0]["metadata"]["name"]
    with Slurmop(kubeconfig, leader_elect=True, leader_elect_namespace="slurmop-chart",
                 leader_elect_lease=_lease(k)) as op:
        op.wait_ready()
        k.kubectl("scale", "nodeset/" + name, "-n", "slurm", "--replicas=2")
        got = json.loads(k.kubectl("get", "nodeset", name, "-n", "slurm", "-o", "json").stdout)
        assert got["spec"]["replicas"] == 2, got["spec"]
        wait_for(lambda: len(pods_of(c, name, ns="slurm")) == 2, 60, what="2 pods of the chart's NodeSet")
        # Scale in without Slurm: the operator keeps the pod and says why in an Event.
        k.kubectl("scale", "nodeset/" + name, "-n", "slurm", "--replicas=1")
        desc = wait_for(lambda: (lambda out: out if "DrainBlocked" in out else None)(
            k.kubectl("describe", "nodeset", name, "-n", "slurm").stdout), 60,
            what="kubectl describe nodeset showing slurmop's Events")
        print(desc[desc.find("Events:"):].rstrip())
    for rel, ns in (("slurm", "slurm"), ("slurmop", "slurmop-chart")):
        k.helm("uninstall", rel, "-n", ns, ok=False)


def _lease(k):
    tpl = k.helm("get", "manifest", "slurmop", "-n", "slurmop-chart").stdout
    for line in tpl.splitlines():
        if "--leader-elect-lease=" in line:
            return line.split("=", 1)[1].strip().strip('"')
    return "slurmop"


if __name__ == "__main__":
    run_tests(globals())

#!/usr/bin/env python3
"""Slinky's values files through our chart.

Renders Slinky's own `slurm` chart (from its Go module, fetched by
tests/slinky/fetch.sh into the module cache; nothing of it is in the clone)
and deploy/helm/slurm with the same values: Slinky's values.yaml alone, then
with each variation in tests/data/helm-values/*.yaml on top (external
controller, accounting in and out of the cluster, login sets with sssd,
several NodeSets, the NVIDIA DCGM preset). The custom resources must be
equal once normalized (see normalise()); the Secrets, ConfigMaps and
PriorityClass the charts make must have the same names, keys and (except
the random auth keys) contents. Then values that slurmop cannot honour the
same way must make `helm template` of our chart fail with a message naming
the value, values Slinky's chart refuses must be refused by ours too, and
`helm lint --strict` must pass for every values file.

helm is the pinned one of tests/k8s/build.sh (K8S_BIN, or its cache);
YAML is read with tests/tools/yaml2json. Without Slinky's chart (Go missing,
or the source archives of v1.2.1 not on the machine) nothing is compared: a
PARTIAL banner says why, and our charts' own checks run (renders, CR schemas,
refusals, notes, lint) with our values.yaml in the place of Slinky's. Exit 77
(skipped) when helm is not built. Runs in a few seconds.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

SRC = os.environ.get("OP_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("OP_BUILD_DIR") or os.path.join(SRC, "build-test")
OUR_CHART = os.path.join(SRC, "deploy", "helm", "slurm")
DATA = os.path.join(SRC, "tests", "data", "helm-values")
KUBE_VERSION = "1.35.4"
# The release whose chart ours is compared with (tests/slinky/build.sh).
SLINKY_VERSION = os.environ.get("SLURMOP_SLINKY_VERSION") or "v1.2.1"
CR_KINDS = ("Controller", "NodeSet", "LoginSet", "RestApi", "Accounting", "Token")
# Labels whose value is the chart's own name and version: they differ
# between any two charts by design.
CHART_LABELS = ("helm.sh/chart", "app.kubernetes.io/version", "app.kubernetes.io/managed-by")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_deploy_manifests as manifests  # noqa: E402  (CRD schemas, the validator)

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg, flush=True)
    return cond


def skip(msg):
    print("SKIP: " + msg)
    sys.exit(77)


def find_helm():
    b = os.environ.get("K8S_BIN")
    if b and os.access(os.path.join(b, "helm"), os.X_OK):
        return os.path.join(b, "helm")
    r = subprocess.run(["bash", os.path.join(SRC, "tests", "k8s", "build.sh"), "--check"],
                       capture_output=True, text=True, timeout=120)
    if r.returncode == 0 and r.stdout.strip():
        h = os.path.join(r.stdout.strip(), "helm")
        if os.access(h, os.X_OK):
            return h
    return None


def fetch_slinky():
    r = subprocess.run(["bash", os.path.join(SRC, "tests", "slinky", "fetch.sh"), "--version", SLINKY_VERSION],
                       capture_output=True, text=True, timeout=600)
    if r.returncode == 77:
        # Go is missing, or the source archives of the version are not on
        # this machine: the chart follows Slinky 1.2's values, which no
        # release the module proxy serves has, so there is nothing to
        # compare with; our charts' own checks still run.
        print("=" * 78 + "\nPARTIAL: Slinky %s's charts are not available, so nothing is compared with them;\n"
              "only our charts' own checks run (renders, schemas, refusals, notes, lint):\n%s\n"
              % (SLINKY_VERSION, r.stderr.strip()[-600:]) + "=" * 78, flush=True)
        return None
    if r.returncode != 0:
        print(r.stderr)
        raise SystemExit("tests/slinky/fetch.sh failed (exit %d)" % r.returncode)
    prefix = "export SLINKY_SRC='"
    lines = [x for x in r.stdout.splitlines() if x.startswith(prefix) and x.endswith("'")]
    assert len(lines) == 1, r.stdout
    return lines[0][len(prefix):-1]


def slinky_chart(src, tmp):
    """A writable copy of Slinky's slurm chart with the vendor helpers the
    module zip lost (see tests/data/helm-values/README.md)."""
    d = os.path.join(tmp, "slinky-slurm")
    shutil.copytree(os.path.join(src, "helm", "slurm"), d)
    for root, dirs, files in os.walk(d):
        for n in dirs + files:
            os.chmod(os.path.join(root, n), 0o755 if n in dirs else 0o644)
    vendor = os.path.join(d, "templates", "vendor")
    if not os.path.isdir(vendor):
        os.makedirs(vendor)
        shutil.copy(os.path.join(DATA, "slinky-vendor-shim.tpl"), os.path.join(vendor, "_shim.tpl"))
    return d


class Helm:
    def __init__(self, path):
        self.path = path
        self.calls = 0

    def run(self, *args):
        self.calls += 1
        args = list(args)
        if args[0] == "template":
            args += ["--kube-version", KUBE_VERSION]
        return subprocess.run([self.path] + args, capture_output=True, text=True, timeout=120)

    def template(self, chart, release, ns, files, sets=(), set_json=()):
        args = ["template", release, chart, "--namespace", ns]
        for f in files:
            args += ["-f", f]
        for s in sets:
            args += ["--set", s]
        for s in set_json:
            args += ["--set-json", s]
        r = self.run(*args)
        if r.returncode != 0:
            return None, r.stderr
        return [o for o in manifests.load_yaml_text(r.stdout) if o], ""


def prune(v):
    """Drop null, {} and [] (bottom up): the API server and the operator
    treat them as absent."""
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            x = prune(x)
            if x is None or x == {} or x == []:
                continue
            out[k] = x
        return out
    if isinstance(v, list):
        return [prune(x) for x in v]
    return v


def normalise(o):
    """What may differ between the two renders without a different meaning:
    - the chart name/version labels (CHART_LABELS), on the object and on
      its pod template;
    - null, {} and [] versus absent;
    - a NodeSet's `taintKubeNodes: false` (the CRD's default: Slinky's chart
      always writes the field, ours when the entry sets it).
    Everything else, including "" strings, must be equal."""
    o = json.loads(json.dumps(o))
    meta = o.get("metadata", {})
    for m in (meta, (o.get("spec") or {}).get("template", {}).get("metadata") or {}):
        for k in CHART_LABELS:
            (m.get("labels") or {}).pop(k, None)
    spec = o.get("spec")
    if isinstance(spec, dict):
        if o.get("kind") == "NodeSet" and spec.get("taintKubeNodes") is False:
            spec.pop("taintKubeNodes")
    return prune(o)


def key(o):
    return (o["kind"], o["metadata"]["name"])


def diff(a, b):
    la = json.dumps(a, indent=1, sort_keys=True).splitlines()
    lb = json.dumps(b, indent=1, sort_keys=True).splitlines()
    import difflib
    return "\n".join(difflib.unified_diff(la, lb, "slinky", "slurmop", lineterm="", n=2))


def compare(case, theirs, ours, fullname):
    """Problems (strings) between Slinky's render and ours."""
    problems = []
    t = {key(o): o for o in theirs}
    u = {key(o): o for o in ours}
    # The DCGM ConfigMaps: the scripts are each chart's own text (ours are
    # written for slurmop, check_dcgm checks what they do), so they are
    # compared by name and keys. A chart from a Go module zip has no
    # templates for them (see the shim): then ours must exist on their own.
    dcgm = {("ConfigMap", "%s-prolog-dcgm" % fullname), ("ConfigMap", "%s-epilog-dcgm" % fullname)}
    for k in sorted(set(t) - set(u)):
        problems.append("%s: %s %s rendered by Slinky's chart only" % (case, k[0], k[1]))
    for k in sorted(set(u) - set(t) - dcgm):
        problems.append("%s: %s %s rendered by our chart only" % (case, k[0], k[1]))
    for k in sorted(set(t) & set(u)):
        a, b = normalise(t[k]), normalise(u[k])
        if (k[0] == "Secret" and "data" in a) or k in dcgm:
            # Random keys: the same key names, not the same bytes.
            a["data"] = sorted(a.get("data") or {})
            b["data"] = sorted(b.get("data") or {})
        if a != b:
            problems.append("%s: %s %s differs:\n%s" % (case, k[0], k[1], diff(a, b)))
    return problems


def crs(objs):
    return [o for o in objs if o["kind"] in CR_KINDS]


def main():
    t0 = time.monotonic()
    helm_path = find_helm()
    if not helm_path:
        skip("helm is not built (bash tests/k8s/build.sh)")
    helm = Helm(helm_path)
    src = fetch_slinky()
    print("Slinky's chart: %s" % (src or "not available"))
    tmp = tempfile.mkdtemp(prefix="helm-values-")
    schemas = manifests.crd_schemas()
    try:
        # Without Slinky's chart, our values.yaml (1.2's defaults) stands in
        # for Slinky's and nothing is compared.
        theirs_chart = slinky_chart(src, tmp) if src else None
        base = os.path.join(theirs_chart or OUR_CHART, "values.yaml")
        cases = [("default", "slurm", "slurm", [base], [], [])]
        for n in sorted(os.listdir(DATA)):
            if n.endswith(".yaml"):
                cases.append((n[:-5], "slurm", "slurm", [base, os.path.join(DATA, n)], [], []))
        # Another release name and namespace: names become "<release>-slurm".
        cases.append(("nodesets as release hpc-prod", "hpc-prod", "hpc", [base, os.path.join(DATA, "nodesets.yaml")],
                      [], []))
        cases.append(("login-sssd with fullnameOverride", "x", "hpc", [base, os.path.join(DATA, "login-sssd.yaml")],
                      ["fullnameOverride=lab"], []))
        # Slinky's documented commands and examples, read from its source.
        cases.append(("UPGRADE.md --set-json", "slurm", "slurm", [base], ["partitions.all.enabled=true"],
                      ['nodesets={"slinky":{}}']))
        cases.append(("--set-json login and nodeset", "slurm", "slurm", [base], [],
                      ['nodesets={"a":{},"b":{"replicas":3}}', 'loginsets={"slinky":{}}']))
        gpu_example = os.path.join(theirs_chart or tmp, "_vendor", "nvidia", "dcgm", "example-values.yaml")
        if os.path.exists(gpu_example):
            cases.append(("the DCGM (GPU) example", "slurm", "slurm", [base, gpu_example], [], []))
        total = 0
        for case, release, ns, files, sets, set_json in cases:
            if theirs_chart:
                theirs, err = helm.template(theirs_chart, release, ns, files, sets, set_json)
                if not check(theirs is not None, "%s: Slinky's chart does not render: %s" % (case, err)):
                    continue
            ours, err = helm.template(OUR_CHART, release, ns, files, sets, set_json)
            if not check(ours is not None, "%s: our chart does not render: %s" % (case, err)):
                continue
            if not theirs_chart:
                theirs = ours
            fullname = one_of(theirs, "Controller", "RestApi")["metadata"]["name"]
            problems = compare(case, theirs, ours, fullname) if theirs_chart else []
            for p in problems:
                check(False, p)
            n = len(crs(theirs))
            kinds = sorted({o["kind"] for o in crs(theirs)})
            # Nothing may be compared away: every CR keeps a spec.
            for o in crs(theirs):
                check(normalise(o).get("spec"), "%s: %s %s is empty once normalized" % (case, o["kind"],
                                                                                     o["metadata"]["name"]))
            # Our CRs must also be what our CRDs accept.
            for o in crs(ours):
                s = schemas.get((o["apiVersion"], o["kind"]))
                try:
                    manifests.validate_schema(o["spec"], s["properties"]["spec"])
                except manifests.SchemaError as e:
                    check(False, "%s: our %s %s: %s" % (case, o["kind"], o["metadata"]["name"], e))
            if "vendor-dcgm" in case:
                check_dcgm(case, ours, fullname)
            total += n
            print("%-34s %2d CRs (%s), %d objects: %s" % (case, n, ",".join(kinds), len(theirs),
                                                          "rendered (not compared)" if not theirs_chart else
                                                          "equal" if not problems else "%d differences" % len(problems)))
        check(total >= 30, "only %d CRs compared" % total)

        # The comparison can fail: one value changed on our side only.
        theirs, _ = helm.template(theirs_chart or OUR_CHART, "slurm", "slurm", [base])
        ours, _ = helm.template(OUR_CHART, "slurm", "slurm", [base], ["restapi.replicas=3"])
        check(any("RestApi slurm differs" in p for p in compare("self-check", theirs, ours, "slurm")),
              "self-check: a different restapi.replicas went unnoticed")

        refusals(helm, theirs_chart, base)
        if theirs_chart:
            slinky_chart_tests(helm, theirs_chart, src, tmp)
        unknown_names(helm, theirs_chart, base, tmp)
        operator_chart(helm, src, tmp)
        a3mega = os.path.join(theirs_chart or tmp, "_vendor", "google", "a3mega", "example-values.yaml")
        if os.path.exists(a3mega):
            theirs, err = helm.template(theirs_chart, "slurm", "slurm", [base, a3mega])
            check(theirs is not None, "Slinky's chart with its A3 Mega example: %s" % err)
            ours, err = helm.template(OUR_CHART, "slurm", "slurm", [base, a3mega])
            check(ours is None and "vendor.google.a3mega" in err,
                  "our chart with Slinky's A3 Mega example: want a refusal naming vendor.google.a3mega, got %s"
                  % ("success" if ours else err))
        lint(helm, base)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d helm runs in %.1f s" % (helm.calls, time.monotonic() - t0))
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("ok")
    return 0


def one_of(objs, *kinds):
    for o in objs:
        if o["kind"] in kinds:
            return o
    raise AssertionError("none of %s rendered" % (kinds,))


def check_dcgm(case, ours, fullname):
    cms = {o["metadata"]["name"]: o for o in ours if o["kind"] == "ConfigMap"}
    for what in ("prolog", "epilog"):
        cm = cms.get("%s-%s-dcgm" % (fullname, what))
        if not check(cm, "%s: our chart has no %s-%s-dcgm ConfigMap" % (case, fullname, what)):
            continue
        data = cm.get("data") or {}
        name = "%s-90-dcgm.sh" % what
        check(list(data) == [name], "%s: %s keys %s, want [%s]" % (case, what, list(data), name))
        body = data.get(name, "")
        check(body.startswith("#!/bin/bash") and "/var/lib/dcgm-exporter/job-mapping" in body
              and "@JOB_MAPPING_DIR@" not in body, "%s: %s script without the mapping folder" % (case, what))


# (values, words the error must contain, does Slinky's chart refuse it too;
# None: it does, for another reason)
REFUSALS = [
    (["configFiles.slurm\\.conf=x"], "configFiles.slurm.conf", False),
    (["configFiles.slurmdbd\\.conf=x"], "configFiles.slurmdbd.conf", False),
    (["clusterName=a-cluster-name-that-is-longer-than-forty-chars"], "clusterName", False),
    (["controller.ha.enabled=true"], "controller.ha.enabled", False),
    (["nodesets.Bad_Key.enabled=true"], "Bad_Key", None),
    (["loginsets.slinky.enabled=true", "sssd.secretRef.name=site-sssd"], "sssd.secretRef.key", False),
    # This chart's names before it took Slinky's: refused, naming the new one.
    (["slurmKeyRef.name=keys"], "use slurmKey.secretRef", False),
    # Slinky 1.2's values that this chart cannot honour.
    (["vendor.google.a3mega[0].targetNodeSet=gpu"], "vendor.google.a3mega", False),
    (["extraObjects[0]=just-a-string"], "extraObjects[0]", None),
    # Types, checked by values.schema.json (Slinky's chart renders them into
    # custom resources that the API server refuses).
    (["restapi.replicas=two"], "/restapi/replicas", False),
    (["nodesets.x.scalingMode=Deployment"], "scalingMode", False),
    (["controller.slurmctld.image.digest=latest"], "/controller/slurmctld/image", False),
    (["sssdConf=x"], "use sssd.conf", False),
    (["controller.nodeSelector.a=b"], "use controller.podSpec.nodeSelector", False),
    (["nodesets.slinky.podLabels.a=b"], "use nodesets.slinky.metadata.labels", False),
    (["partitions.all.nodesets=null"], "partitions.all", True),
    (["partitions.debug.enabled=true", "partitions.debug.nodesets={gone}"], "gone", True),
]


def refusals(helm, theirs_chart, base):
    for sets, words, slinky_too in REFUSALS:
        ours, err = helm.template(OUR_CHART, "slurm", "slurm", [base], sets)
        check(ours is None and words in err,
              "our chart with %s: want a failure naming %r, got %s" % (sets, words, "success" if ours else err))
        if not theirs_chart:
            continue
        theirs, _ = helm.template(theirs_chart, "slurm", "slurm", [base], sets)
        check(slinky_too is None or (theirs is None) == slinky_too,
              "Slinky's chart with %s: %s" % (sets, "refused" if theirs is None else "rendered"))
    print("refusals: %d values refused with their name" % len(REFUSALS))


def unknown_names(helm, theirs_chart, base, tmp):
    """The names the release notes list as no values of the chart: our chart
    copied with a template that renders the notes' helper into a ConfigMap."""
    probe = os.path.join(tmp, "probe-chart")
    shutil.copytree(OUR_CHART, probe)
    with open(os.path.join(probe, "templates", "zz-probe.yaml"), "w") as f:
        f.write('apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe\n'
                'data:\n  names: {{ include "slurm.unknownNames" . | quote }}\n')

    def names(files, sets=()):
        objs, err = helm.template(probe, "slurm", "slurm", files, sets)
        if not check(objs is not None, "probe with %s: %s" % (files[1:] + list(sets), err)):
            return None
        cm = [o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "probe"]
        return json.loads(cm[0]["data"]["names"]) if cm else None

    check(names([base]) == [], "Slinky's values.yaml: names listed as unknown: %s" % names([base]))
    gpu = os.path.join(theirs_chart or tmp, "_vendor", "nvidia", "dcgm", "example-values.yaml")
    if os.path.exists(gpu):
        # The example puts the image and resources beside slurmd, not in it:
        # both charts render the NodeSet without them; ours says so.
        got = names([base, gpu])
        check(got == ["nodesets.gpu-nodes.image", "nodesets.gpu-nodes.resources"],
              "the DCGM example: unknown names %s" % got)
    got = names([base], ["nodesetDefaults.podLabels.a=b", "controller.replicas=2", "typo=1"])
    check(got == ["controller.replicas", "nodesetDefaults.podLabels", "typo"], "typos: unknown names %s" % got)
    for n in sorted(os.listdir(DATA)):
        if n.endswith(".yaml"):
            got = names([base, os.path.join(DATA, n)])
            check(got == [], "%s: names listed as unknown: %s" % (n, got))
    print("release notes: unknown value names listed")


# Slinky's own chart tests (helm/slurm/tests/*_test.yaml, helm-unittest
# suites) whose values our chart refuses on purpose, by the words of the
# refusal: the GKE A3 Mega preset is not reproduced.
CHART_TESTS_REFUSED = {"vendor_google_a3mega_test.yaml": "vendor.google.a3mega"}


def slinky_chart_tests(helm, theirs_chart, src_dir, tmp):
    """The values of every test case of Slinky's own chart tests, through
    both charts: the same objects, or both refusing, or ours refusing a
    value it cannot honour (CHART_TESTS_REFUSED)."""
    import concurrent.futures
    import glob
    files = sorted(glob.glob(os.path.join(theirs_chart, "tests", "*_test.yaml")))
    if not files:
        print("Slinky's chart tests: none in this chart")
        return
    r = subprocess.run([os.path.join(BUILD, "tools", "yaml2json")] + files, capture_output=True, text=True)
    if not check(r.returncode == 0, "yaml2json of Slinky's chart tests: %s" % r.stderr):
        return
    docs = json.loads(r.stdout)
    jobs = []
    for f in files:
        suite = (docs[f] or [{}])[0] or {}
        for i, t in enumerate(suite.get("tests") or []):
            rel = t.get("release") or suite.get("release") or {}
            path = os.path.join(tmp, "chart-test-%d.json" % len(jobs))
            with open(path, "w") as out:
                json.dump(t.get("set") or {}, out)
            jobs.append(("%s #%d (%s)" % (os.path.basename(f), i, t.get("it")), os.path.basename(f), path,
                         rel.get("name") or "test-release", rel.get("namespace") or "test-namespace"))

    # Slinky's renders depend on nothing but the archive and the values:
    # kept beside the unpacked archive (a folder of the version's cache),
    # so that a warm run renders only our chart.
    import hashlib
    cache = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(src_dir))), "helm-renders")
    cacheable = os.access(os.path.dirname(cache), os.W_OK) and os.path.basename(os.path.dirname(src_dir)) == "src"

    def theirs_render(path, release, ns):
        with open(path, "rb") as f:
            # The helm binary's path names its pinned build (tests/k8s/build.sh's key).
            key = hashlib.sha256(f.read() + ("\0%s\0%s\0%s" % (release, ns, helm.path)).encode()).hexdigest()[:24]
        hit = os.path.join(cache, key + ".json")
        if cacheable and os.path.exists(hit):
            with open(hit) as f:
                got = json.load(f)
            return got["objects"], got["error"]
        objs, err = helm.template(theirs_chart, release, ns, [path])
        if cacheable:
            os.makedirs(cache, exist_ok=True)
            tmpf = "%s.%d" % (hit, os.getpid())
            with open(tmpf, "w") as f:
                json.dump({"objects": objs, "error": err}, f)
            os.replace(tmpf, hit)
        return objs, err

    def one(job):
        case, suite, path, release, ns = job
        theirs, err_t = theirs_render(path, release, ns)
        ours, err_o = helm.template(OUR_CHART, release, ns, [path])
        if theirs is None and ours is None:
            return []
        if theirs is None:
            return ["%s: Slinky's chart refuses it, ours renders" % case]
        if ours is None:
            words = CHART_TESTS_REFUSED.get(suite)
            return [] if words and words in err_o else ["%s: our chart refuses it: %s" % (case, err_o[-600:])]
        fullname = one_of(theirs, "Controller", "RestApi")["metadata"]["name"]
        return compare(case, theirs, ours, fullname)

    with concurrent.futures.ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as ex:
        results = list(ex.map(one, jobs))
    for problems in results:
        for p in problems:
            check(False, p)
    print("Slinky's chart tests: the values of %d test cases through both charts, %d with differences"
          % (len(jobs), sum(1 for x in results if x)))


OPERATOR_CHART = os.path.join(SRC, "deploy", "helm", "slurmop")
# Every value of Slinky's slurm-operator chart and what ours makes of it:
# "same" (the same name here), "mapped" (onto another name), "refused" (the
# render fails, naming it), "ignored" (listed in the release notes). A value
# that Slinky's values.yaml has and this table lacks fails the test.
OPERATOR_VALUES = {
    "nameOverride": "same", "fullnameOverride": "same", "namespaceOverride": "refused",
    "imagePullSecrets": "same", "imagePullPolicy": "mapped", "priorityClassName": "same",
    "crds.enabled": "refused", "operator.enabled": "refused", "operator.replicas": "mapped",
    "operator.imagePullPolicy": "mapped", "operator.image.repository": "mapped", "operator.image.tag": "mapped",
    "operator.image.digest": "mapped", "operator.serviceAccount.create": "mapped",
    "operator.serviceAccount.name": "mapped", "operator.nodeSelector": "mapped", "operator.affinity": "mapped",
    "operator.tolerations": "mapped", "operator.topologySpreadConstraints": "mapped",
    "operator.podSecurityContext": "mapped", "operator.resources": "mapped", "operator.securityContext": "mapped",
    "operator.pdb.enabled": "mapped", "operator.pdb.minAvailable": "mapped", "operator.pdb.maxUnavailable": "mapped",
    "operator.logLevel": "mapped", "operator.healthPort": "mapped", "operator.metricsPort": "mapped",
    "operator.metricsSecure": "mapped", "operator.leaderElection": "mapped", "operator.namespaces": "mapped",
    "operator.profile": "ignored", "operator.profileAddr": "ignored",
    "certManager.enabled": "mapped", "certManager.secretName": "ignored", "certManager.duration": "mapped",
    "certManager.renewBefore": "mapped", "propagatedNodeConditions": "same", "extraObjects": "same",
}
for _w in ("accounting", "controller", "loginset", "nodeset", "restapi", "token", "slurmclient"):
    OPERATOR_VALUES["operator.%sWorkers" % _w] = "ignored"


def leaves(v, prefix=""):
    """Dotted names of a values tree; the maps Slinky's chart passes to
    Kubernetes objects whole count as one."""
    whole = ("nodeSelector", "affinity", "podSecurityContext", "resources", "securityContext")
    if isinstance(v, dict) and v and prefix.rsplit(".", 1)[-1] not in whole:
        out = []
        for k, x in v.items():
            out += leaves(x, prefix + "." + k if prefix else k)
        return out
    return [prefix]


def operator_chart(helm, src, tmp):
    """deploy/helm/slurmop with the value names of Slinky's slurm-operator
    chart."""
    names = []
    if src:
        theirs_values = os.path.join(src, "helm", "slurm-operator", "values.yaml")
        r = subprocess.run([os.path.join(BUILD, "tools", "yaml2json"), theirs_values], capture_output=True, text=True)
        if not check(r.returncode == 0, "yaml2json %s: %s" % (theirs_values, r.stderr)):
            return
        doc = json.loads(r.stdout)[theirs_values][0]
        names = [n for n in leaves(doc) if not n.startswith("webhook.")]
        for n in names:
            check(n in OPERATOR_VALUES, "Slinky's slurm-operator value %s: not in OPERATOR_VALUES (what does ours make "
                  "of it?)" % n)
        check("webhook" in doc, "Slinky's slurm-operator values.yaml has no webhook section any more")
    else:
        # A stand-in for Slinky's values.yaml: the values of it the checks
        # below rely on (its own image, empty maps).
        theirs_values = os.path.join(tmp, "slinky-operator-values.yaml")
        with open(theirs_values, "w") as f:
            f.write("operator:\n  image:\n    repository: ghcr.io/slinkyproject/slurm-operator\n    tag: null\n"
                    "  resources: {}\n  securityContext: {}\n  podSecurityContext: {}\n  nodeSelector: {}\n"
                    "  imagePullPolicy: IfNotPresent\n")

    def render(files=(), sets=()):
        args = ["template", "x", OPERATOR_CHART, "--namespace", "slinky"]
        for f in files:
            args += ["-f", f]
        for x in sets:
            args += ["--set", x]
        r = helm.run(*args)
        return ([o for o in manifests.load_yaml_text(r.stdout) if o] if r.returncode == 0 else None), r.stderr

    def deployment(objs):
        d = one_of(objs, "Deployment")
        return d, d["spec"]["template"]["spec"]["containers"][0]

    ours, err = render()
    theirs, err2 = render([theirs_values])
    if not check(ours is not None and theirs is not None, "the operator chart with Slinky's values.yaml: %s%s" % (err, err2)):
        return
    d0, c0 = deployment(ours)
    d1, c1 = deployment(theirs)
    # Slinky's own image is not run, its empty maps keep our defaults.
    check(c1["image"] == c0["image"], "Slinky's values.yaml: image %s, want ours %s" % (c1["image"], c0["image"]))
    check(c1["securityContext"] == c0["securityContext"] and c1["resources"] == c0["resources"]
          and d1["spec"]["template"]["spec"]["securityContext"] == d0["spec"]["template"]["spec"]["securityContext"],
          "Slinky's values.yaml: its empty maps replaced our security context or resources")
    sets = ["operator.replicas=2", "operator.namespaces=a\\,b", "operator.pdb.enabled=true", "operator.pdb.minAvailable=1",
            "operator.logLevel=debug", "operator.image.repository=registry.example/slurmop",
            "operator.image.digest=sha256:" + "ab" * 32, "operator.metricsSecure=true", "operator.imagePullPolicy=Always",
            "operator.tolerations[0].operator=Exists", "certManager.enabled=true", "operator.healthPort=9091"]
    objs, err = render([theirs_values], sets)
    if check(objs is not None, "the operator chart with Slinky's names %s: %s" % (sets, err)):
        d, c = deployment(objs)
        args = c.get("args") or []
        check(d["spec"]["replicas"] == 2, "operator.replicas: %s" % d["spec"]["replicas"])
        check("--namespace=a" in args and "--namespace=b" in args, "operator.namespaces: %s" % args)
        check("--log-level=debug" in args and "--metrics-secure" in args and "--health-addr=:9091" in args,
              "operator.logLevel/metricsSecure/healthPort: %s" % args)
        check(c["image"] == "registry.example/slurmop@sha256:" + "ab" * 32 and c["imagePullPolicy"] == "Always",
              "operator.image: %s %s" % (c["image"], c["imagePullPolicy"]))
        check(d["spec"]["template"]["spec"].get("tolerations") == [{"operator": "Exists"}],
              "operator.tolerations: %s" % d["spec"]["template"]["spec"].get("tolerations"))
        check(any(o["kind"] == "Certificate" for o in objs), "certManager.enabled=true: no Certificate rendered")
        pdb = [o for o in objs if o["kind"] == "PodDisruptionBudget"]
        check(len(pdb) == 1 and pdb[0]["spec"].get("minAvailable") == 1, "operator.pdb: %s" % pdb)
    objs, err = render([theirs_values], ["certManager.enabled=false"])
    check(objs is not None and not any(o["kind"] == "Certificate" for o in objs),
          "certManager.enabled=false: a Certificate rendered, or refused: %s" % err)
    # Replicas that would each make their own self-signed webhook certificate.
    for sets, words in ((["operator.replicas=2", "certManager.enabled=false"], "a certificate the replicas share"),
                        (["crds.enabled=true"], "slurmop-crds"), (["operator.enabled=false"], "operator.enabled"),
                        (["namespaceOverride=other"], "namespaceOverride")):
        objs, err = render([theirs_values], sets)
        check(objs is None and words in err, "the operator chart with %s: want a refusal naming %r, got %s"
              % (sets, words, "success" if objs else err))
    # The release notes list what has no meaning here.
    probe = os.path.join(tmp, "probe-operator")
    shutil.copytree(OPERATOR_CHART, probe)
    with open(os.path.join(probe, "templates", "zz-probe.yaml"), "w") as f:
        f.write('apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe\n'
                'data:\n  names: {{ include "slurmop.slinkyIgnored" . | quote }}\n')
    r = helm.run("template", "x", probe, "-f", theirs_values)
    if src and check(r.returncode == 0, "the operator probe: %s" % r.stderr):
        cm = [o for o in manifests.load_yaml_text(r.stdout) if o and o.get("kind") == "ConfigMap"]
        got = sorted(x.split(":", 1)[0] for x in json.loads(cm[0]["data"]["names"]))
        want = sorted([n for n, w in OPERATOR_VALUES.items() if w == "ignored"] + ["webhook.*"] +
                      ["operator.image.repository=ghcr.io/slinkyproject/slurm-operator"])
        check(got == want, "the operator chart's notes list %s, want %s" % (got, want))
    print("operator chart: %d of Slinky's slurm-operator values accounted for" % len(names))


def lint(helm, base):
    files = [None, base] + [os.path.join(DATA, n) for n in sorted(os.listdir(DATA)) if n.endswith(".yaml")]
    for f in files:
        args = ["lint", "--strict", OUR_CHART]
        if f:
            args += ["-f", base, "-f", f] if f != base else ["-f", base]
        r = helm.run(*args)
        check(r.returncode == 0, "helm lint --strict %s: %s%s" % (f or "(defaults)", r.stdout[-2000:], r.stderr))
    print("helm lint --strict: %d values files" % len(files))


if __name__ == "__main__":
    sys.exit(main())

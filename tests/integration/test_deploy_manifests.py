#!/usr/bin/env python3
"""deploy/: the plain manifests, the three Helm charts and the CRD copies.

YAML is read through tests/tools/yaml2json, which uses the project's own
loader (core/yaml), because Python's standard library has no YAML parser.

What is checked:
  * every manifest, Chart.yaml, values.yaml and CRD copy parses;
  * the ClusterRole grants exactly the operator's permission table (nothing
    more, no wildcards, Nodes read-only) and the leader-election Role only
    get/create/update on Leases, get/update limited to the Lease's name;
  * the Deployment passes only flags that cmd/slurmop.c defines and (when the
    binary is built) that `slurmop --help` documents and accepts; probes hit
    /healthz and /readyz on the --health-addr port; the security context is
    the restricted one; resources are set;
  * deploy/manifests-namespaced (a kustomize overlay of deploy/manifests):
    the Role in each watched namespace grants every namespaced permission of
    the table, the ClusterRole only Nodes (read) and the CRD lookup; with
    kubectl, it builds and matches the chart's namespaces option;
  * deploy/manifests/crds and deploy/helm/slurmop-crds/templates are
    byte-identical to crds/ (deploy/sync-crds.sh was run);
  * the chart templates are balanced, include only defined templates and
    read only values that values.yaml declares;
  * with a helm binary on PATH (or $HELM): helm lint, the slurmop chart
    renders to the same objects as the plain manifests, and the slurm chart's
    custom resources validate against the CRDs' schemas. Without helm these
    are skipped with a message.
"""
import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

SRC = os.environ.get("OP_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("OP_BUILD_DIR") or os.path.join(SRC, "build")
DEPLOY = os.path.join(SRC, "deploy")
MANIFESTS = os.path.join(DEPLOY, "manifests")
HELM_DIR = os.path.join(DEPLOY, "helm")
CRDS = os.path.join(SRC, "crds")
OP_NS = "slurmop-system"

CRD_NAMES = {
    "controllers.slinky.slurm.net",
    "nodesets.slinky.slurm.net",
    "loginsets.slinky.slurm.net",
    "restapis.slinky.slurm.net",
    "accountings.slinky.slurm.net",
    "tokens.slinky.slurm.net",
}
SLINKY_KINDS = ["controllers", "nodesets", "loginsets", "restapis", "accountings", "tokens"]
OWNED = ["get", "list", "watch", "create", "update", "patch", "delete"]


def _expected_cluster_permissions():
    """The operator's permission table: {(apiGroup, resource): set(verbs)}."""
    p = {}

    def grant(group, resources, verbs):
        for r in resources:
            p.setdefault((group, r), set()).update(verbs)

    grant("", ["pods", "services", "persistentvolumeclaims"], OWNED)
    # Never replaced with update: created, merge-patched, deleted; listed and
    # watched with the managed-by selector; referenced ones read by name.
    grant("", ["configmaps", "secrets"], ["get", "list", "watch", "create", "patch", "delete"])
    grant("", ["pods/status"], ["get", "update", "patch"])
    grant("", ["secrets/finalizers"], ["update"])
    # patch (the taintKubeNodes taint) only with --allow-node-taints and optional/node-taints.yaml.
    grant("", ["nodes"], ["get", "list", "watch"])
    grant("", ["events"], ["create", "patch"])
    grant("events.k8s.io", ["events"], ["create", "patch"])
    grant("apps", ["statefulsets", "deployments", "controllerrevisions"], OWNED)
    grant("policy", ["poddisruptionbudgets"], OWNED)
    grant("monitoring.coreos.com", ["servicemonitors"], ["get", "create", "update", "patch", "delete"])
    grant("apiextensions.k8s.io", ["customresourcedefinitions"], ["get", "list"])
    grant("slinky.slurm.net", SLINKY_KINDS, ["get", "list", "watch", "update", "patch"])
    grant("slinky.slurm.net", [k + "/status" for k in SLINKY_KINDS], ["get", "update", "patch"])
    grant("slinky.slurm.net", [k + "/finalizers" for k in SLINKY_KINDS], ["update"])
    return p


EXPECTED_CLUSTER = _expected_cluster_permissions()


# --------------------------------------------------------------------------
# YAML through the project's loader

def yaml2json_path():
    p = os.environ.get("YAML2JSON") or os.path.join(BUILD, "tools", "yaml2json")
    if not os.access(p, os.X_OK):
        raise AssertionError("%s is missing: build the project first (tests/tools/yaml2json.c)" % p)
    return p


def load_yaml_files(paths):
    """{path: [documents]} for every path, parsed by yaml2json."""
    if not paths:
        return {}
    r = subprocess.run([yaml2json_path()] + list(paths), capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError("YAML does not parse:\n" + r.stderr)
    return json.loads(r.stdout)


def load_yaml_text(text):
    r = subprocess.run([yaml2json_path(), "-"], input=text, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError("YAML does not parse: " + r.stderr)
    return json.loads(r.stdout)


def files_under(top, exts=(".yaml", ".yml")):
    out = []
    for d, _, names in os.walk(top):
        for n in names:
            if n.endswith(exts):
                out.append(os.path.join(d, n))
    return sorted(out)


def plain_manifest_files():
    return files_under(MANIFESTS)


def kind_files():
    return files_under(os.path.join(DEPLOY, "kind"))


def chart_yaml_files():
    """Every chart file that is YAML as it stands: Chart.yaml, values.yaml
    and the CRD chart's templates (copies of crds/, no template actions)."""
    out = []
    for chart in sorted(os.listdir(HELM_DIR)):
        cdir = os.path.join(HELM_DIR, chart)
        if not os.path.isdir(cdir):
            continue
        for n in ("Chart.yaml", "values.yaml"):
            if os.path.exists(os.path.join(cdir, n)):
                out.append(os.path.join(cdir, n))
    out += files_under(os.path.join(HELM_DIR, "slurmop-crds", "templates"))
    return out


def objects(docs_by_file):
    out = []
    for docs in docs_by_file.values():
        out.extend(docs)
    return out


def find(objs, kind, name=None):
    hits = [o for o in objs if o.get("kind") == kind and (name is None or o["metadata"]["name"] == name)]
    return hits


def operator_rbac(objs):
    """objs without the --metrics-secure roles (25-metrics-auth.yaml) and the
    --topology-webhook role (26-topology-webhook-rbac.yaml), checked on their own."""
    return [o for o in objs if not (o.get("kind", "").startswith("ClusterRole")
                                    and re.search(r"-(metrics-(auth|reader)|topology-webhook)$",
                                                  o["metadata"]["name"]))]


def metrics_service(objs):
    """The operator's headless Service (the topology webhook has its own)."""
    return one([o for o in objs if not o["metadata"]["name"].endswith("-webhook")], "Service")


def one(objs, kind, name=None):
    hits = find(objs, kind, name)
    if len(hits) != 1:
        raise AssertionError("want exactly one %s%s, found %d" % (kind, " " + name if name else "", len(hits)))
    return hits[0]


# --------------------------------------------------------------------------
# flags

def source_flags():
    """{flag: takes_value} from cmd/slurmop.c's getopt_long table."""
    with open(os.path.join(SRC, "cmd", "slurmop.c"), encoding="utf-8") as f:
        text = f.read()
    flags = {}
    for name, arg in re.findall(r'\{\s*"([a-z][a-z0-9-]*)"\s*,\s*(no_argument|required_argument|optional_argument)',
                                text):
        flags[name] = arg != "no_argument"
    if not flags:
        raise AssertionError("no getopt_long table found in cmd/slurmop.c")
    return flags


def split_args(args):
    """[(flag, value or None)] from a container's args; a flag's value is
    either after '=' or the next item when that is not a flag."""
    out, i = [], 0
    while i < len(args):
        a = args[i]
        if not a.startswith("--"):
            raise AssertionError("argument %r is not a --flag" % a)
        if "=" in a:
            name, value = a[2:].split("=", 1)
            out.append((name, value))
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            out.append((a[2:], args[i + 1]))
            i += 1
        else:
            out.append((a[2:], None))
        i += 1
    return out


def flag_value(args, name, default=None):
    vals = [v for n, v in split_args(args) if n == name]
    return vals[-1] if vals else default


def addr_port(addr):
    return int(addr.rsplit(":", 1)[1])


def mem_bytes(q):
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi)?", str(q))
    if not m:
        raise AssertionError("memory quantity %r: want N, NKi, NMi or NGi" % q)
    return int(m.group(1)) * {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}[m.group(2)]


# --------------------------------------------------------------------------
# checks shared by the plain manifests and the rendered slurmop chart

class OperatorChecks:
    """Mixed into test cases; self.objs is the list of operator objects."""

    def deployment(self):
        return one(self.objs, "Deployment")

    def container(self):
        d = self.deployment()
        cs = d["spec"]["template"]["spec"]["containers"]
        self.assertEqual(len(cs), 1, "one container")
        return cs[0]

    def check_cluster_role(self):
        cr = one(operator_rbac(self.objs), "ClusterRole")
        granted, problems = {}, []
        for rule in cr["rules"]:
            self.assertNotIn("nonResourceURLs", rule, "no non-resource URLs")
            self.assertNotIn("resourceNames", rule, "ClusterRole rules are not limited by name")
            for field in ("apiGroups", "resources", "verbs"):
                self.assertNotIn("*", rule.get(field, []), "wildcard in %s: %s" % (field, rule))
            for g in rule["apiGroups"]:
                for r in rule["resources"]:
                    granted.setdefault((g, r), set()).update(rule["verbs"])
        for key, verbs in sorted(granted.items()):
            extra = verbs - EXPECTED_CLUSTER.get(key, set())
            if extra:
                problems.append("granted beyond need: %s %s %s" % (key[0] or "core", key[1], sorted(extra)))
        for key, verbs in sorted(EXPECTED_CLUSTER.items()):
            missing = verbs - granted.get(key, set())
            if missing:
                problems.append("missing: %s %s %s" % (key[0] or "core", key[1], sorted(missing)))
        self.assertEqual(problems, [], "ClusterRole differs from the operator's permission table")
        self.assertEqual(granted[("", "nodes")], {"get", "list", "watch"},
                         "Nodes are read; patched (taintKubeNodes) only with optional/node-taints.yaml")
        self.assertNotIn(("coordination.k8s.io", "leases"), granted, "Leases belong in the namespaced Role")
        return cr

    def service_account(self):
        d = self.deployment()
        sa = d["spec"]["template"]["spec"]["serviceAccountName"]
        ns = d["metadata"]["namespace"]
        return sa, ns

    def check_bindings(self):
        cr = one(operator_rbac(self.objs), "ClusterRole")
        sa, ns = self.service_account()
        crb = one(operator_rbac(self.objs), "ClusterRoleBinding")
        self.assertEqual(crb["roleRef"], {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                          "name": cr["metadata"]["name"]})
        self.assertEqual(crb["subjects"], [{"kind": "ServiceAccount", "name": sa, "namespace": ns}])
        if find(self.objs, "ServiceAccount"):
            s = one(self.objs, "ServiceAccount")
            self.assertEqual((s["metadata"]["name"], s["metadata"]["namespace"]), (sa, ns))

    def check_metrics_auth(self):
        """--metrics-secure: the operator may create TokenReviews and
        SubjectAccessReviews (nothing else), and a reader role grants get on
        /metrics."""
        sa, ns = self.service_account()
        auth = [o for o in self.objs if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("-metrics-auth")]
        self.assertEqual(len(auth), 1)
        self.assertEqual(granted_by(auth[0]["rules"]), {("authentication.k8s.io", "tokenreviews"): {"create"},
                                                        ("authorization.k8s.io", "subjectaccessreviews"): {"create"}})
        crb = [o for o in self.objs if o["kind"] == "ClusterRoleBinding"
               and o["metadata"]["name"].endswith("-metrics-auth")]
        self.assertEqual(len(crb), 1)
        self.assertEqual(crb[0]["roleRef"]["name"], auth[0]["metadata"]["name"])
        self.assertEqual(crb[0]["subjects"], [{"kind": "ServiceAccount", "name": sa, "namespace": ns}])
        reader = [o for o in self.objs if o["kind"] == "ClusterRole"
                  and o["metadata"]["name"].endswith("-metrics-reader")]
        self.assertEqual(len(reader), 1)
        self.assertEqual(reader[0]["rules"], [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}])

    def check_leader_election(self):
        args = self.container()["args"]
        names = [n for n, _ in split_args(args)]
        self.assertIn("leader-elect", names, "the Deployment runs with --leader-elect")
        lease = flag_value(args, "leader-elect-lease", "slurmop")
        lease_ns = flag_value(args, "leader-elect-namespace", "$(POD_NAMESPACE)")
        if lease_ns == "$(POD_NAMESPACE)":
            lease_ns = self.deployment()["metadata"]["namespace"]
        role = one(self.objs, "Role")
        self.assertEqual(role["metadata"]["namespace"], lease_ns, "the Role is where the Lease is")
        verbs_by_name = {}
        for rule in role["rules"]:
            self.assertEqual(rule["apiGroups"], ["coordination.k8s.io"])
            self.assertEqual(rule["resources"], ["leases"])
            self.assertTrue(set(rule["verbs"]) <= {"get", "create", "update"}, rule)
            for v in rule["verbs"]:
                verbs_by_name.setdefault(v, []).append(rule.get("resourceNames"))
        self.assertEqual(verbs_by_name.get("create"), [None], "create cannot be limited by name")
        for v in ("get", "update"):
            self.assertEqual(verbs_by_name.get(v), [[lease]], "%s limited to the Lease %s" % (v, lease))
        sa, ns = self.service_account()
        rb = one(self.objs, "RoleBinding")
        self.assertEqual(rb["metadata"]["namespace"], lease_ns)
        self.assertEqual(rb["roleRef"], {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                         "name": role["metadata"]["name"]})
        self.assertEqual(rb["subjects"], [{"kind": "ServiceAccount", "name": sa, "namespace": ns}])

    def check_args_in_source(self):
        c = self.container()
        flags = source_flags()
        env = {e["name"] for e in c.get("env", [])}
        for name, value in split_args(c["args"]):
            self.assertIn(name, flags, "--%s is not a slurmop flag (cmd/slurmop.c)" % name)
            if flags[name]:
                self.assertIsNotNone(value, "--%s needs a value" % name)
            else:
                self.assertIsNone(value, "--%s takes no value" % name)
            for ref in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", value or ""):
                self.assertIn(ref, env, "--%s uses $(%s), which the container does not define" % (name, ref))
        self.assertNotIn("command", c, "the image's ENTRYPOINT is slurmop")

    def check_args_with_binary(self):
        binary = os.path.join(BUILD, "slurmop")
        if not os.access(binary, os.X_OK):
            self.skipTest("%s is not built yet: flags were checked against cmd/slurmop.c only" % binary)
        r = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        documented = set(re.findall(r"^\s+--([a-z][a-z0-9-]*)", r.stdout, re.M))
        args = [a.replace("$(POD_NAMESPACE)", self.deployment()["metadata"]["namespace"])
                for a in self.container()["args"]]
        for name, _ in split_args(args):
            self.assertIn(name, documented, "--%s is not documented by slurmop --help" % name)
        # getopt_long parses every flag before --help at the end: bad values
        # exit 2 with a message, good ones reach --help and exit 0.
        r = subprocess.run([binary] + args + ["--help"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, "slurmop rejects the Deployment's args: " + r.stderr)

    def check_ports_and_probes(self):
        c = self.container()
        args = c["args"]
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        self.assertEqual(ports.get("health"), addr_port(flag_value(args, "health-addr", ":8081")))
        self.assertEqual(ports.get("metrics"), addr_port(flag_value(args, "metrics-addr", ":8080")))
        self.assertEqual(c["livenessProbe"]["httpGet"]["path"], "/healthz")
        self.assertEqual(c["readinessProbe"]["httpGet"]["path"], "/readyz")
        for probe in ("livenessProbe", "readinessProbe"):
            port = c[probe]["httpGet"]["port"]
            self.assertIn(port, ("health", ports["health"]), "%s goes to the health port" % probe)
        svc = metrics_service(self.objs)
        self.assertEqual(svc["spec"].get("clusterIP"), "None", "the Service is headless")
        # The topology webhook: its port, its Service (443 -> the port), its registration.
        if flag_value(args, "topology-webhook", "false") == "true":
            self.assertEqual(ports.get("webhook"), addr_port(flag_value(args, "webhook-addr", ":9443")))
            wsvc = [o for o in self.objs if o["kind"] == "Service" and o["metadata"]["name"].endswith("-webhook")]
            self.assertEqual(len(wsvc), 1)
            self.assertEqual([(p["port"], p["targetPort"]) for p in wsvc[0]["spec"]["ports"]], [(443, "webhook")])
            mwc = one(self.objs, "MutatingWebhookConfiguration")
            wh = mwc["webhooks"][0]
            self.assertEqual(wh["failurePolicy"], "Ignore")
            self.assertEqual(wh["rules"][0]["resources"], ["pods/binding"])
            self.assertEqual(wh["clientConfig"]["service"]["name"], wsvc[0]["metadata"]["name"])
            self.assertEqual(wh["clientConfig"]["service"]["path"], "/mutate-pods-binding")
            if flag_value(args, "webhook-config", None) is not None:
                self.assertEqual(flag_value(args, "webhook-config", None), mwc["metadata"]["name"])
                role = one(self.objs, "ClusterRole", mwc["metadata"]["name"] + "-webhook")
                self.assertEqual(role["rules"], [{"apiGroups": ["admissionregistration.k8s.io"],
                                                  "resources": ["mutatingwebhookconfigurations"],
                                                  "resourceNames": [mwc["metadata"]["name"]],
                                                  "verbs": ["get", "patch"]}])
        pod_labels = self.deployment()["spec"]["template"]["metadata"]["labels"]
        for k, v in svc["spec"]["selector"].items():
            self.assertEqual(pod_labels.get(k), v, "Service selector %s=%s matches the pods" % (k, v))
        sports = {p["name"]: p for p in svc["spec"]["ports"]}
        self.assertEqual(set(sports), {"metrics", "health"})
        for name, p in sports.items():
            self.assertIn(p["targetPort"], (name, ports[name]))
        sel = self.deployment()["spec"]["selector"]["matchLabels"]
        for k, v in sel.items():
            self.assertEqual(pod_labels.get(k), v)

    def check_security_and_resources(self):
        d = self.deployment()
        pod = d["spec"]["template"]["spec"]
        c = self.container()
        psc, csc = pod.get("securityContext", {}), c.get("securityContext", {})
        self.assertTrue(psc.get("runAsNonRoot") or csc.get("runAsNonRoot"), "runAsNonRoot")
        uid = csc.get("runAsUser", psc.get("runAsUser"))
        self.assertTrue(uid is None or uid != 0, "not uid 0")
        self.assertIs(csc.get("readOnlyRootFilesystem"), True)
        self.assertIs(csc.get("allowPrivilegeEscalation"), False)
        self.assertEqual(csc.get("capabilities", {}).get("drop"), ["ALL"])
        self.assertNotIn("add", csc.get("capabilities", {}))
        self.assertNotIn("privileged", csc)
        seccomp = csc.get("seccompProfile", psc.get("seccompProfile", {}))
        self.assertEqual(seccomp.get("type"), "RuntimeDefault")
        self.assertFalse(pod.get("hostNetwork") or pod.get("hostPID") or pod.get("hostIPC"))
        self.assertIsNot(pod.get("automountServiceAccountToken"), False, "the operator needs its token")
        res = c["resources"]
        for k in ("cpu", "memory"):
            self.assertIn(k, res["requests"])
            self.assertIn(k, res["limits"])
        req, lim = mem_bytes(res["requests"]["memory"]), mem_bytes(res["limits"]["memory"])
        # The design target is 64 MiB resident at 8,192 nodes; the request
        # covers it and the limit leaves room for transient peaks.
        self.assertGreaterEqual(req, 64 << 20)
        self.assertGreaterEqual(lim, 4 * (64 << 20))
        self.assertGreaterEqual(lim, req)


# --------------------------------------------------------------------------

class TestPlainManifests(unittest.TestCase, OperatorChecks):
    @classmethod
    def setUpClass(cls):
        cls.docs = load_yaml_files(plain_manifest_files())
        op = [p for p in cls.docs if os.sep + "operator" + os.sep in p]
        cls.objs = objects({p: cls.docs[p] for p in op})
        cls.optional = objects({p: d for p, d in cls.docs.items() if os.sep + "optional" + os.sep in p})

    def test_every_document_is_an_object(self):
        self.assertTrue(self.docs, "no manifests found under deploy/manifests")
        for path, docs in self.docs.items():
            self.assertTrue(docs, "%s has no document" % path)
            for d in docs:
                for k in ("apiVersion", "kind"):
                    self.assertIn(k, d, "%s: a document without %s" % (path, k))
                if d["kind"] != "Kustomization":
                    self.assertTrue(d.get("metadata", {}).get("name"), "%s: %s without a name" % (path, d["kind"]))

    def test_kustomization_lists_crds_and_operator(self):
        k = one(self.docs[os.path.join(MANIFESTS, "kustomization.yaml")], "Kustomization")
        want = sorted(os.path.relpath(p, MANIFESTS) for p in plain_manifest_files()
                      if os.path.basename(os.path.dirname(p)) in ("crds", "operator"))
        self.assertEqual(sorted(k["resources"]), want)

    def test_namespace_and_objects_in_it(self):
        ns = one(self.objs, "Namespace")
        self.assertEqual(ns["metadata"]["name"], OP_NS)
        self.assertEqual(ns["metadata"]["labels"].get("pod-security.kubernetes.io/enforce"), "restricted")
        for o in self.objs + self.optional:
            if o["kind"] in ("Namespace", "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration"):
                self.assertNotIn("namespace", o["metadata"])
            else:
                self.assertEqual(o["metadata"].get("namespace"), OP_NS, "%s %s" % (o["kind"], o["metadata"]["name"]))

    def test_operator_files_apply_in_order(self):
        # kubectl apply -f on the folder goes file by file, in name order:
        # the Namespace must come first.
        first = sorted(os.listdir(os.path.join(MANIFESTS, "operator")))[0]
        self.assertEqual(self.docs[os.path.join(MANIFESTS, "operator", first)][0]["kind"], "Namespace")

    def test_metrics_auth_roles(self):
        self.check_metrics_auth()
        self.assertEqual(find(self.objs, "ClusterRole", "slurmop-metrics-reader")[0]["metadata"]["name"],
                         "slurmop-metrics-reader")

    def test_cluster_role_is_least_privilege(self):
        self.check_cluster_role()

    def test_bindings(self):
        self.check_bindings()

    def test_leader_election_role(self):
        self.check_leader_election()

    def test_deployment_flags_exist_in_source(self):
        self.check_args_in_source()

    def test_deployment_flags_accepted_by_binary(self):
        self.check_args_with_binary()

    def test_ports_probes_service(self):
        self.check_ports_and_probes()

    def test_security_and_resources(self):
        self.check_security_and_resources()

    def test_deployment_shape(self):
        d = self.deployment()
        self.assertEqual(d["spec"]["replicas"], 1)
        self.assertEqual(self.container()["image"], "slurmop:0.1.0")
        grace = int(flag_value(self.container()["args"], "shutdown-grace", "10"))
        self.assertGreater(d["spec"]["template"]["spec"]["terminationGracePeriodSeconds"], grace)

    def test_optional_objects_select_the_operator(self):
        pod_labels = self.deployment()["spec"]["template"]["metadata"]["labels"]
        pdb = one(self.optional, "PodDisruptionBudget")
        self.assertIn("maxUnavailable", pdb["spec"], "a single replica must not block node drains")
        sm = one(self.optional, "ServiceMonitor")
        svc = metrics_service(self.objs)
        for k, v in pdb["spec"]["selector"]["matchLabels"].items():
            self.assertEqual(pod_labels.get(k), v)
        for k, v in sm["spec"]["selector"]["matchLabels"].items():
            self.assertEqual(svc["metadata"]["labels"].get(k), v)
        self.assertEqual([e["port"] for e in sm["spec"]["endpoints"]], ["metrics"])


NAMESPACED = os.path.join(DEPLOY, "manifests-namespaced")
CLUSTER_ONLY = {("", "nodes"), ("apiextensions.k8s.io", "customresourcedefinitions")}


def granted_by(rules):
    out = {}
    for rule in rules:
        for g in rule["apiGroups"]:
            for res in rule["resources"]:
                out.setdefault((g, res), set()).update(rule["verbs"])
    return out


def kubectl_binary():
    k = os.environ.get("KUBECTL") or shutil.which("kubectl")
    if not k and helm_binary():
        k = os.path.join(os.path.dirname(helm_binary()), "kubectl")
    return k if k and os.access(k, os.X_OK) else None


class TestNamespacedManifests(unittest.TestCase):
    """deploy/manifests-namespaced: the plain manifests with every namespaced
    permission as a Role in the watched namespace."""

    @classmethod
    def setUpClass(cls):
        cls.docs = load_yaml_files(files_under(NAMESPACED))
        cls.objs = [o for o in objects(cls.docs) if isinstance(o, dict) and o.get("kind") in
                    ("Role", "RoleBinding", "ClusterRole")]

    def watched(self):
        patch = self.docs[os.path.join(NAMESPACED, "deployment-patch.yaml")][0]
        return [op["value"].split("=", 1)[1] for op in patch if op["value"].startswith("--namespace=")]

    def test_role_holds_every_namespaced_permission(self):
        nss = self.watched()
        self.assertTrue(nss, "the Deployment patch adds --namespace")
        want = {k: v for k, v in EXPECTED_CLUSTER.items() if k not in CLUSTER_ONLY}
        for ns in nss:
            role = one([o for o in self.objs if o["metadata"].get("namespace") == ns], "Role")
            self.assertEqual(granted_by(role["rules"]), want, ns)
            rb = one([o for o in self.objs if o["metadata"].get("namespace") == ns], "RoleBinding")
            self.assertEqual(rb["roleRef"], {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                             "name": role["metadata"]["name"]})
            self.assertEqual(rb["subjects"], [{"kind": "ServiceAccount", "name": "slurmop", "namespace": OP_NS}])

    def test_cluster_role_keeps_only_what_has_no_namespace(self):
        cr = one(operator_rbac(self.objs), "ClusterRole")
        self.assertEqual(granted_by(cr["rules"]), {k: EXPECTED_CLUSTER[k] for k in CLUSTER_ONLY})

    def test_secrets_never_updated(self):
        role = one(self.objs, "Role")
        g = granted_by(role["rules"])
        for r in ("secrets", "configmaps"):
            self.assertNotIn("update", g[("", r)], r)

    @unittest.skipUnless(kubectl_binary(), "no kubectl on PATH (or $KUBECTL): kustomize build skipped")
    def test_kustomize_builds(self):
        r = subprocess.run([kubectl_binary(), "kustomize", NAMESPACED], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        objs = [o for o in load_yaml_text(r.stdout) if o]
        cr = one(operator_rbac(objs), "ClusterRole")
        self.assertEqual(granted_by(cr["rules"]), {k: EXPECTED_CLUSTER[k] for k in CLUSTER_ONLY})
        d = one(objs, "Deployment")
        args = d["spec"]["template"]["spec"]["containers"][0]["args"]
        self.assertEqual([v for n, v in split_args(args) if n == "namespace"], self.watched())
        self.assertEqual(len(find(objs, "CustomResourceDefinition")), 6)
        roles = [o for o in objs if o["kind"] == "Role" and o["metadata"]["namespace"] != OP_NS]
        self.assertEqual(sorted(o["metadata"]["namespace"] for o in roles), sorted(self.watched()))
        if helm_binary():
            # The chart with the same namespaces grants the same.
            chart = render("slurmop", "slurmop", OP_NS, "--set", "namespaces={%s}" % ",".join(self.watched()))
            for ns in self.watched():
                a = one([o for o in chart if o["metadata"].get("namespace") == ns], "Role")
                b = one([o for o in objs if o["metadata"].get("namespace") == ns], "Role")
                self.assertEqual(granted_by(a["rules"]), granted_by(b["rules"]), ns)


class TestKindConfig(unittest.TestCase):
    def test_kind_cluster_has_two_workers(self):
        # The quick start's NodeSet has two replicas, one per worker node.
        cfg = one(objects(load_yaml_files(kind_files())), "Cluster")
        self.assertEqual(cfg["apiVersion"], "kind.x-k8s.io/v1alpha4")
        self.assertEqual(sorted(n["role"] for n in cfg["nodes"]), ["control-plane", "worker", "worker"])


class TestCrdCopies(unittest.TestCase):
    def test_copies_are_byte_identical(self):
        src = sorted(n for n in os.listdir(CRDS) if n.endswith(".yaml"))
        self.assertEqual(len(src), 6, "crds/ holds the six CRDs")
        for dest in (os.path.join(MANIFESTS, "crds"), os.path.join(HELM_DIR, "slurmop-crds", "templates")):
            got = sorted(n for n in os.listdir(dest) if n.endswith(".yaml"))
            self.assertEqual(got, src, "%s: run deploy/sync-crds.sh" % dest)
            for n in src:
                with open(os.path.join(CRDS, n), "rb") as a, open(os.path.join(dest, n), "rb") as b:
                    self.assertEqual(a.read(), b.read(), "%s/%s differs from crds/%s: run deploy/sync-crds.sh"
                                     % (dest, n, n))

    def test_crds_parse_and_are_the_six_kinds(self):
        docs = load_yaml_files(files_under(CRDS))
        crds = objects(docs)
        self.assertEqual({c["metadata"]["name"] for c in crds}, CRD_NAMES)
        for c in crds:
            self.assertEqual(c["kind"], "CustomResourceDefinition")
            self.assertEqual(c["spec"]["group"], "slinky.slurm.net")

    def test_no_template_actions_in_crds(self):
        # The CRD chart's templates are rendered by Helm.
        for n in os.listdir(CRDS):
            with open(os.path.join(CRDS, n), encoding="utf-8") as f:
                self.assertNotIn("{{", f.read(), n)

    def test_sync_script_check_mode(self):
        r = subprocess.run(["bash", os.path.join(DEPLOY, "sync-crds.sh"), "--check"], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)


# --------------------------------------------------------------------------
# Helm charts, statically

ACTION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}", re.S)


def chart_dirs():
    return {n: os.path.join(HELM_DIR, n) for n in ("slurmop-crds", "slurmop", "slurm")}


def template_files(chart):
    tdir = os.path.join(HELM_DIR, chart, "templates")
    return sorted(os.path.join(tdir, n) for n in os.listdir(tdir))


class TestChartsStatic(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.docs = load_yaml_files(chart_yaml_files())

    def values(self, chart):
        docs = self.docs[os.path.join(HELM_DIR, chart, "values.yaml")]
        return docs[0] if docs else {}

    def test_chart_metadata(self):
        for name, d in chart_dirs().items():
            meta = self.docs[os.path.join(d, "Chart.yaml")][0]
            self.assertEqual(meta["apiVersion"], "v2", name)
            self.assertEqual(meta["name"], name)
            self.assertRegex(str(meta["version"]), r"^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$")
            self.assertIsInstance(meta["appVersion"], str, "%s: quote appVersion" % name)
            self.assertTrue(os.path.exists(os.path.join(d, "README.md")), "%s has a README" % name)

    def test_slurmop_values(self):
        v = self.values("slurmop")
        for key in ("image", "replicas", "leaderElection", "logLevel", "logFormat", "metricsPort", "healthPort",
                    "namespaces", "qps", "burst", "propagatedNodeConditions", "unhealthyNodes", "resources", "nodeSelector",
                    "tolerations", "affinity", "podSecurityContext", "serviceMonitor"):
            self.assertIn(key, v)
        self.assertIs(v["serviceMonitor"]["enabled"], False)
        self.assertIs(v["leaderElection"]["enabled"], True)

    def test_slurmop_values_match_plain_manifests(self):
        v = self.values("slurmop")
        objs = objects(load_yaml_files(files_under(os.path.join(MANIFESTS, "operator"))))
        d = one(objs, "Deployment")
        pod = d["spec"]["template"]["spec"]
        c = pod["containers"][0]
        self.assertEqual(v["resources"], c["resources"])
        self.assertEqual(v["podSecurityContext"], pod["securityContext"])
        self.assertEqual(v["securityContext"], c["securityContext"])
        self.assertEqual(v["nodeSelector"], pod["nodeSelector"])
        self.assertEqual(v["replicas"], d["spec"]["replicas"])

    def test_slurm_values(self):
        v = self.values("slurm")
        images = {
            "controller.slurmctld": "ghcr.io/slinkyproject/slurmctld",
            "restapi.slurmrestd": "ghcr.io/slinkyproject/slurmrestd",
            "accounting.slurmdbd": "ghcr.io/slinkyproject/slurmdbd",
            "nodesetDefaults.slurmd": "ghcr.io/slinkyproject/slurmd",
            "loginsetDefaults.login": "ghcr.io/slinkyproject/login",
        }
        for path, repo in images.items():
            node = v
            for p in path.split("."):
                node = node[p]
            self.assertEqual(node["image"]["repository"], repo)
            self.assertEqual(node["image"]["tag"], "26.05-ubuntu26.04")
            self.assertIsNone(node["image"]["digest"])
        self.assertEqual(v["nodesetDefaults"]["logfile"]["image"],
                         {"repository": "docker.io/library/alpine", "tag": "latest", "digest": None})
        # Slinky 1.2's value names: entries start from the *Defaults, which
        # are enabled, and there is no entry by default (no worker, no login
        # pod until asked for).
        self.assertEqual(v["nodesets"], {})
        self.assertEqual(v["loginsets"], {})
        self.assertIs(v["nodesetDefaults"]["enabled"], True)
        self.assertIs(v["loginsetDefaults"]["enabled"], True)
        self.assertEqual(v["extraObjects"], [])
        for k in ("slurmKey", "jwtKey", "jwksKeys", "priorityClass", "sssd", "vendor"):
            self.assertIn(k, v)
        self.assertIs(v["slurmKey"]["create"], True)
        self.assertIs(v["controller"]["external"], False)
        self.assertIs(v["accounting"]["external"], False)
        self.assertIs(v["restapi"]["pdb"]["enabled"], False)
        self.assertIs(v["accounting"]["enabled"], False)
        self.assertEqual(v["accounting"]["storageConfig"], {
            "host": "mariadb", "port": 3306, "database": "slurm_acct_db", "username": "slurm",
            "passwordKeyRef": {"name": "mariadb-password", "key": "password"}})
        self.assertEqual(v["partitions"]["all"]["nodesets"], ["ALL"])
        self.assertIs(v["partitions"]["all"]["enabled"], False)

    def test_templates_are_balanced(self):
        for chart in ("slurmop", "slurm"):
            for path in template_files(chart):
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                self.assertEqual(text.count("{{"), text.count("}}"), path)
                depth = 0
                for m in ACTION.finditer(text):
                    body = m.group(1)
                    if body.startswith("/*"):
                        self.assertTrue(body.endswith("*/"), "%s: unterminated comment" % path)
                        continue
                    word = re.match(r"[a-z]*", body).group(0)
                    if word in ("if", "range", "with", "define", "block"):
                        depth += 1
                    elif word == "end":
                        depth -= 1
                        self.assertGreaterEqual(depth, 0, "%s: extra {{ end }}" % path)
                    elif word == "else":
                        self.assertGreater(depth, 0, "%s: else outside a block" % path)
                self.assertEqual(depth, 0, "%s: unclosed block" % path)

    def test_includes_are_defined(self):
        for chart in ("slurmop", "slurm"):
            defined, used = set(), set()
            for path in template_files(chart):
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                defined |= set(re.findall(r'\{\{-?\s*define\s+"([^"]+)"', text))
                used |= set(re.findall(r'(?:include|template)\s+"([^"]+)"', text))
            self.assertTrue(used, chart)
            self.assertEqual(used - defined, set(), "%s: templates used but not defined" % chart)

    def test_values_read_by_templates_exist(self):
        for chart in ("slurmop", "slurm"):
            values = self.values(chart)
            for path in template_files(chart):
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                for ref in set(re.findall(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)", text)):
                    node = values
                    for part in ref.lstrip(".").split("."):
                        self.assertIsInstance(node, dict, "%s: .Values%s goes through a non-map" % (path, ref))
                        if part not in node and node == {}:
                            break  # a map the user fills (nodesets, configFiles, ...)
                        self.assertIn(part, node, "%s: .Values%s is not in values.yaml" % (path, ref))
                        node = node[part]


# --------------------------------------------------------------------------
# Helm charts, rendered (needs a helm binary)

def helm_binary():
    h = os.environ.get("HELM") or shutil.which("helm")
    if not h:
        # The pinned helm of the real control plane's tools, when built.
        r = subprocess.run(["bash", os.path.join(SRC, "tests", "k8s", "build.sh"), "--check"],
                           capture_output=True, text=True, timeout=60)
        if r.returncode == 0 and r.stdout.strip():
            h = os.path.join(r.stdout.strip(), "helm")
    return h if h and os.access(h, os.X_OK) else None


def helm(*args, check=True):
    args = list(args)
    if args and args[0] == "template" and "--kube-version" not in args:
        # The charts need Kubernetes >= 1.29; helm assumes 1.20 without a cluster.
        args += ["--kube-version", "1.35.0"]
    r = subprocess.run([helm_binary()] + args, capture_output=True, text=True, timeout=120)
    if check and r.returncode != 0:
        raise AssertionError("helm %s failed:\n%s" % (" ".join(args), r.stderr))
    return r


def render(chart, release, namespace, *args):
    out = helm("template", release, os.path.join(HELM_DIR, chart), "--namespace", namespace, *args).stdout
    return load_yaml_text(out)


def normalise(o):
    """An object without the labels that only Helm adds."""
    o = json.loads(json.dumps(o))

    def strip(meta):
        labels = meta.get("labels", {})
        for k in ("helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/version"):
            labels.pop(k, None)
    strip(o["metadata"])
    if o["kind"] == "Deployment":
        strip(o["spec"]["template"]["metadata"])
    if o["kind"] in ("ClusterRole", "Role"):
        # What is granted matters, not the order the rules are listed in.
        o["rules"] = sorted(o.get("rules") or [], key=lambda r: json.dumps(r, sort_keys=True))
    return o


def lines(o):
    """An object as sorted, indented JSON lines, so that a difference shows
    as a readable diff."""
    return json.dumps(o, indent=1, sort_keys=True).splitlines()


class SchemaError(Exception):
    pass


def validate_schema(value, schema, path="spec"):
    """A small structural-schema validator: types, required, enum, unknown
    fields (which the API server would silently drop), items,
    additionalProperties, int-or-string and preserve-unknown-fields."""
    if value is None and schema.get("nullable"):
        return
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            raise SchemaError("%s: want an integer or a string, got %r" % (path, value))
        return
    t = schema.get("type")
    checks = {"object": dict, "array": list, "string": str, "boolean": bool}
    if t in checks and not isinstance(value, checks[t]):
        raise SchemaError("%s: want %s, got %r" % (path, t, value))
    if t == "integer" and (isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value)):
        raise SchemaError("%s: want an integer, got %r" % (path, value))
    if t == "number" and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise SchemaError("%s: want a number, got %r" % (path, value))
    if "enum" in schema and value not in schema["enum"]:
        raise SchemaError("%s: %r is not one of %s" % (path, value, schema["enum"]))
    if isinstance(value, dict):
        for r in schema.get("required", []):
            if r not in value:
                raise SchemaError("%s: %s is required" % (path, r))
        props = schema.get("properties")
        for k, v in value.items():
            if props is not None and k in props:
                validate_schema(v, props[k], path + "." + k)
            elif isinstance(schema.get("additionalProperties"), dict):
                validate_schema(v, schema["additionalProperties"], path + "." + k)
            elif schema.get("x-kubernetes-preserve-unknown-fields") or schema.get("additionalProperties") is True:
                continue
            elif props is not None or t == "object":
                raise SchemaError("%s.%s: unknown field (the API server would drop it)" % (path, k))
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            validate_schema(v, schema["items"], "%s[%d]" % (path, i))


def crd_schemas():
    out = {}
    for c in objects(load_yaml_files(files_under(CRDS))):
        for v in c["spec"]["versions"]:
            out[(c["spec"]["group"] + "/" + v["name"], c["spec"]["names"]["kind"])] = \
                v["schema"]["openAPIV3Schema"]
    return out


@unittest.skipUnless(helm_binary(), "no helm binary on PATH (or $HELM): rendered-chart checks skipped; "
                                    "the static checks above still ran")
class TestChartsRendered(unittest.TestCase):
    maxDiff = None
    def test_lint(self):
        for name, d in chart_dirs().items():
            helm("lint", "--strict", d)
        helm("lint", "--strict", chart_dirs()["slurm"], "--set", "nodesets.slinky.enabled=true",
             "--set", "loginsets.slinky.enabled=true", "--set", "accounting.enabled=true",
             "--set", "partitions.all.enabled=true")

    def test_crd_chart_renders_the_crds(self):
        objs = render("slurmop-crds", "slurmop-crds", "default")
        self.assertEqual({o["metadata"]["name"] for o in objs}, CRD_NAMES)

    def test_slurmop_chart_equals_plain_manifests(self):
        rendered = [normalise(o) for o in render("slurmop", "slurmop", OP_NS)]
        plain = [normalise(o) for o in objects(load_yaml_files(files_under(os.path.join(MANIFESTS, "operator"))))
                 if o["kind"] != "Namespace"]
        key = lambda o: (o["kind"], o["metadata"]["name"])  # noqa: E731
        self.assertEqual(sorted(map(key, rendered)), sorted(map(key, plain)))
        by_key = {key(o): o for o in plain}
        for o in rendered:
            self.assertEqual(lines(o), lines(by_key[key(o)]), "chart and deploy/manifests differ on %s %s" % key(o))
        extra = [normalise(o) for o in render("slurmop", "slurmop", OP_NS, "--set", "podDisruptionBudget.enabled=true",
                                              "--set", "serviceMonitor.enabled=true")]
        opt = {key(o): normalise(o) for o in objects(load_yaml_files(files_under(os.path.join(MANIFESTS, "optional"))))}
        for k in (("PodDisruptionBudget", "slurmop"), ("ServiceMonitor", "slurmop")):
            got = [o for o in extra if key(o) == k]
            self.assertEqual(len(got), 1, k)
            self.assertEqual(lines(got[0]), lines(opt[k]), "chart and deploy/manifests/optional differ on %s %s" % k)

    def test_slurmop_chart_with_options(self):
        case = self
        objs = render("slurmop", "ops", "hpc", "--set", "replicas=2", "--set", "topologyWebhook.certManager=true", "--set", "namespaces={slurm,team-a}",
                      "--set", "propagatedNodeConditions={KernelDeadlock,GPUUnhealthy}",
                      "--set", "unhealthyNodes.conditions={GpuUnhealthy,Ready=False}",
                      "--set", "unhealthyNodes.taints={nvidia.com/gpu-bad}", "--set", "unhealthyNodes.maxShare=5",
                      "--set", "leaderElection.namespace=leases", "--set", "clusterDomain=example.local",
                      "--set", "logLevel=debug")

        class Rendered(OperatorChecks):
            def __getattr__(self, name):
                return getattr(case, name)
        r = Rendered()
        r.objs = objs
        # With namespaces, every namespaced permission is a Role there and
        # the ClusterRole keeps only what has no namespace.
        cr = one(operator_rbac(objs), "ClusterRole")
        cluster = {(g, res) for rule in cr["rules"] for g in rule["apiGroups"] for res in rule["resources"]}
        self.assertEqual(cluster, {("", "nodes"), ("apiextensions.k8s.io", "customresourcedefinitions")})
        # The topology webhook is called for the watched namespaces only (where NodeSets can be).
        mwc = one(objs, "MutatingWebhookConfiguration")
        exprs = mwc["webhooks"][0]["namespaceSelector"]["matchExpressions"]
        self.assertIn({"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["slurm", "team-a"]}, exprs)
        for ns in ("slurm", "team-a"):
            roles = [o for o in objs if o["kind"] == "Role" and o["metadata"].get("namespace") == ns]
            self.assertEqual(len(roles), 1, ns)
            granted = {}
            for rule in roles[0]["rules"]:
                for g in rule["apiGroups"]:
                    for res in rule["resources"]:
                        granted.setdefault((g, res), set()).update(rule["verbs"])
            self.assertEqual(granted, {k: v for k, v in EXPECTED_CLUSTER.items() if k not in cluster}, ns)
            rbs = [o for o in objs if o["kind"] == "RoleBinding" and o["metadata"].get("namespace") == ns]
            self.assertEqual(len(rbs), 1, ns)
            self.assertEqual(rbs[0]["roleRef"]["kind"], "Role")
        r.check_args_in_source()
        r.check_ports_and_probes()
        r.check_security_and_resources()
        args = r.container()["args"]
        self.assertEqual([v for n, v in split_args(args) if n == "namespace"], ["slurm", "team-a"])
        self.assertEqual(flag_value(args, "propagated-node-conditions"), "KernelDeadlock,GPUUnhealthy")
        self.assertEqual([v for n, v in split_args(args) if n == "unhealthy-node-condition"],
                         ["GpuUnhealthy", "Ready=False"])
        self.assertEqual(flag_value(args, "unhealthy-node-taint"), "nvidia.com/gpu-bad")
        self.assertEqual(flag_value(args, "unhealthy-max-share"), "5")
        self.assertEqual(flag_value(args, "leader-elect-namespace"), "leases")
        self.assertEqual(flag_value(args, "leader-elect-lease"), "ops-slurmop")
        self.assertEqual(len([o for o in objs if o["kind"] == "Role" and o["metadata"].get("namespace") == "leases"]),
                         1)

    def test_slurmop_chart_node_taints_only_when_allowed(self):
        """taintKubeNodes writes cluster-scoped Nodes: off by default (no flag, no patch on Nodes), on with
        allowNodeTaints (the flag and a ClusterRole of its own that patches Nodes)."""
        def node_verbs(objs):
            return {v for o in objs if o["kind"] == "ClusterRole" for rule in o["rules"]
                    if "nodes" in rule.get("resources", []) for v in rule["verbs"]}

        def args(objs):
            d = [o for o in objs if o["kind"] == "Deployment"][0]
            return d["spec"]["template"]["spec"]["containers"][0]["args"]
        off = render("slurmop", "slurmop", OP_NS)
        self.assertNotIn("patch", node_verbs(off))
        self.assertNotIn("--allow-node-taints", args(off))
        on = render("slurmop", "slurmop", OP_NS, "--set", "allowNodeTaints=true")
        self.assertIn("patch", node_verbs(on))
        self.assertIn("--allow-node-taints", args(on))
        crb = [o for o in on if o["kind"] == "ClusterRoleBinding" and o["metadata"]["name"].endswith("-node-taints")]
        self.assertEqual(len(crb), 1, "the node-taints ClusterRole is bound")
        self.assertEqual(crb[0]["subjects"][0]["namespace"], OP_NS)

    def test_slurmop_chart_refuses_replicas_sharing_no_webhook_certificate(self):
        # Self-signed (no cert-manager here): each replica would make its own.
        r = helm("template", "x", chart_dirs()["slurmop"], "--set", "replicas=2", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("needs a certificate the replicas share", r.stderr)
        for ok in (["--set", "topologyWebhook.certManager=true"], ["--set", "topologyWebhook.enabled=false"]):
            r = helm("template", "x", chart_dirs()["slurmop"], "--set", "replicas=2", *ok, check=False)
            self.assertEqual(r.returncode, 0, (ok, r.stderr))

    def test_slurmop_chart_refuses_replicas_without_leader_election(self):
        r = helm("template", "x", chart_dirs()["slurmop"], "--set", "replicas=2", "--set",
                 "leaderElection.enabled=false", "--set", "topologyWebhook.certManager=true", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("leaderElection", r.stderr)

    def check_crs(self, objs):
        schemas = crd_schemas()
        for o in objs:
            k = (o["apiVersion"], o["kind"])
            if k in schemas:
                try:
                    validate_schema(o["spec"], schemas[k]["properties"]["spec"])
                except SchemaError as e:
                    self.fail("%s %s: %s" % (o["kind"], o["metadata"]["name"], e))

    def test_slurm_chart_defaults(self):
        objs = render("slurm", "slurm", "slurm")
        self.check_crs(objs)
        self.assertEqual(sorted((o["kind"], o["metadata"]["name"]) for o in objs), [
            ("Controller", "slurm"), ("RestApi", "slurm"),
            ("Secret", "slurm-auth-jwt"), ("Secret", "slurm-auth-slurm")])
        for name, key in (("slurm-auth-slurm", "slurm.key"), ("slurm-auth-jwt", "jwt.key")):
            s = one(objs, "Secret", name)
            self.assertIs(s["immutable"], True)
            raw = base64.b64decode(s["data"][key])
            self.assertEqual(len(raw), 1024)
            self.assertRegex(raw.decode(), r"^[A-Za-z0-9]+$")
        ctl = one(objs, "Controller")
        self.assertEqual(ctl["spec"]["slurmKeyRef"], {"name": "slurm-auth-slurm", "key": "slurm.key"})
        self.assertEqual(ctl["spec"]["jwtKeyRef"], {"name": "slurm-auth-jwt", "key": "jwt.key"})
        self.assertEqual(ctl["spec"]["slurmctld"]["image"], "ghcr.io/slinkyproject/slurmctld:26.05-ubuntu26.04")
        self.assertNotIn("accountingRef", ctl["spec"])
        # The CR's own namespace, as Slinky 1.2's chart writes it (no namespace field).
        self.assertEqual(one(objs, "RestApi")["spec"]["controllerRef"], {"name": "slurm"})
        self.assertEqual(find(objs, "NodeSet"), [], "no worker by default")
        with open(os.path.join(HELM_DIR, "slurm", "templates", "secrets.yaml"), encoding="utf-8") as f:
            text = f.read()
        self.assertIn('lookup "v1" "Secret"', text, "keys are read back on upgrade")

    def test_slurm_chart_full(self):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write(FULL_VALUES)
        try:
            objs = render("slurm", "lab", "hpc", "-f", f.name)
        finally:
            os.unlink(f.name)
        self.check_crs(objs)
        # The release name does not contain the chart's: objects are lab-slurm.
        ctl = one(objs, "Controller", "lab-slurm")
        # A reference without a namespace: the CR's own (Slinky 1.2's CRDs have no such field).
        self.assertEqual(ctl["spec"]["accountingRef"], {"name": "lab-slurm"})
        self.assertEqual(ctl["spec"]["extraConf"].split("\n"), [
            "SchedulerParameters=bf_continue",
            "PartitionName=all Nodes=ALL Default=YES MaxTime=UNLIMITED",
            "PartitionName=gpu Nodes=cpu,gpu MaxTime=1:00:00"])
        self.assertEqual(ctl["spec"]["configFileRefs"], [{"name": "lab-slurm-config-extra"}])
        self.assertEqual(ctl["spec"]["persistence"]["storageClassName"], "fast")
        acct = one(objs, "Accounting", "lab-slurm")
        self.assertEqual(acct["spec"]["storageConfig"]["passwordKeyRef"],
                         {"name": "mariadb-password", "key": "password"})
        gpu = one(objs, "NodeSet", "lab-slurm-worker-gpu")
        self.assertEqual(gpu["spec"]["template"]["spec"]["hostname"], "gpu-")
        self.assertEqual(gpu["spec"]["replicas"], 3)
        self.assertEqual(gpu["spec"]["slurmd"]["resources"], {"limits": {"nvidia.com/gpu": 8}})
        self.assertEqual(gpu["spec"]["slurmd"]["image"], "ghcr.io/slinkyproject/slurmd:26.05-ubuntu26.04")
        self.assertEqual(gpu["spec"]["ssh"]["sssdConfRef"], {"name": "lab-slurm-sssd-conf", "key": "sssd.conf"})
        cpu = one(objs, "NodeSet", "lab-slurm-worker-cpu")
        self.assertEqual(cpu["spec"]["replicas"], 0)
        self.assertIs(cpu["spec"]["partition"]["enabled"], False)
        self.assertEqual(cpu["spec"]["template"]["spec"]["hostname"], "cpu-")
        # slurmop's own NodeSet fields pass through when an entry sets them.
        self.assertIs(cpu["spec"]["oversubscribeNode"], True)
        self.assertEqual(cpu["spec"]["minReadySeconds"], 5)
        self.assertIs(gpu["spec"]["oversubscribeNode"], False)  # nodesetDefaults
        self.assertEqual(find(objs, "NodeSet", "lab-slurm-worker-off"), [], "enabled: false drops the entry")
        login = one(objs, "LoginSet", "lab-slurm-login-slinky")
        self.assertEqual(login["spec"]["replicas"], 2)
        self.assertEqual(login["spec"]["sssdConfRef"], {"name": "lab-slurm-sssd-conf", "key": "sssd.conf"})
        self.assertIn("sssd.conf", one(objs, "Secret", "lab-slurm-sssd-conf")["stringData"])
        self.assertEqual(one(objs, "ConfigMap", "lab-slurm-config-extra")["data"],
                         {"cgroup.conf": "CgroupPlugin=cgroup/v2\n"})

    def test_slurm_chart_ha_and_external_keys(self):
        objs = render("slurm", "slurm", "slurm", "--set", "controller.ha.enabled=true", "--set",
                      "controller.persistence.existingClaim=statesave", "--set", "slurmKey.create=false",
                      "--set", "slurmKey.secretRef.name=mykeys", "--set", "jwtKey.create=false",
                      "--set", "jwtKey.secretRef.name=mykeys")
        self.check_crs(objs)
        ctl = one(objs, "Controller")
        self.assertEqual(ctl["spec"]["ha"], {"enabled": True, "backups": 1})
        self.assertEqual(ctl["spec"]["persistence"]["existingClaim"], "statesave")
        self.assertEqual(ctl["spec"]["slurmKeyRef"], {"name": "mykeys", "key": "slurm.key"})
        self.assertEqual(find(objs, "Secret"), [], "no key Secret is generated when both are given")

    def test_slurm_chart_refusals(self):
        for args, words in (
                (["--set", "nodesets.Bad_Key.enabled=true"], "Bad_Key"),
                (["--set", "controller.ha.enabled=true"], "existingClaim"),
                (["--set-string", "configFiles.slurm\\.conf=x"], "slurm.conf"),
                (["--set", "partitions.all.enabled=true", "--set", "partitions.all.nodesets=null"], "nodesets")):
            r = helm("template", "slurm", chart_dirs()["slurm"], *args, check=False)
            self.assertNotEqual(r.returncode, 0, args)
            self.assertIn(words, r.stderr, args)


FULL_VALUES = """
accounting:
  enabled: true
controller:
  extraConf: SchedulerParameters=bf_continue
  persistence:
    storageClassName: fast
  metrics:
    enabled: true
    serviceMonitor:
      enabled: true
configFiles:
  cgroup.conf: |
    CgroupPlugin=cgroup/v2
partitions:
  all:
    enabled: true
  gpu:
    enabled: true
    nodesets: [gpu, cpu]
    config: MaxTime=1:00:00
nodesets:
  cpu:
    enabled: true
    replicas: 0
    oversubscribeNode: true
    minReadySeconds: 5
    slurmd:
      image: ghcr.io/slinkyproject/slurmd:26.05-ubuntu26.04
    logfile:
      image: docker.io/library/alpine:latest
    partition:
      enabled: false
  gpu:
    enabled: true
    replicas: 3
    slurmd:
      image:
        repository: ghcr.io/slinkyproject/slurmd
        tag: 26.05-ubuntu26.04
      resources:
        limits:
          nvidia.com/gpu: 8
    logfile:
      image: docker.io/library/alpine:latest
    ssh:
      enabled: true
    podSpec:
      tolerations:
        - key: nvidia.com/gpu
          operator: Exists
  off:
    enabled: false
loginsets:
  slinky:
    enabled: true
    replicas: 2
"""


if __name__ == "__main__":
    prog = unittest.main(verbosity=2, exit=False)
    res = prog.result
    if res.skipped and os.environ.get("CI") == "true":
        # In CI kubectl, helm and the build are there (tests/run.sh makes
        # them): a skip here means a check did not run, which is a failure.
        for case, why in res.skipped:
            print("FAIL (skipped in CI): %s: %s" % (case.id(), why))
        raise SystemExit(1)
    raise SystemExit(0 if res.wasSuccessful() else 1)

#!/usr/bin/env python3
"""The operator chart's alerts and the Grafana dashboard use only exported
metrics, and the alerts fire when they should.

- test_dashboard_metrics: every query of deploy/grafana/slurmop.json (panel
  targets, those of panels inside collapsed rows included, template
  variables) names at least one metric, and every metric
  it names is listed in docs/metrics.md (which integration.metrics_doc
  checks against /metrics); the JSON is a dashboard Grafana imports (uid,
  panels with unique ids, a datasource variable).
- test_rule_metrics: the PrometheusRule of deploy/helm/slurmop
  (prometheusRule.enabled=true, rendered with the pinned helm of
  tests/k8s/build.sh) has the five alerts, and each expression names only
  metrics of docs/metrics.md; off by default (nothing rendered).
- test_promtool: `promtool check rules` accepts the rendered rules and
  `promtool test rules tests/alerts/slurmop_test.yaml` passes (each alert
  fires on its case after its "for" and not on the healthy one). promtool
  comes from its Go module (tests/alerts/build.sh, cached outside the clone;
  skipped when Go is missing, exit 77).

Seconds once promtool and helm are built. Run directly (python3
test_alerts.py [name-substring]) or through ctest.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from backend import Skip  # noqa: E402
from kubesim import run_tests  # noqa: E402
from slurmop import SRC, yaml_to_json  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_metrics_doc import doc_metrics  # noqa: E402

DASHBOARD = os.path.join(SRC, "deploy", "grafana", "slurmop.json")
CHART = os.path.join(SRC, "deploy", "helm", "slurmop")
ALERTS = os.path.join(SRC, "tests", "alerts")
KUBE_VERSION = "1.35.4"
ALERT_NAMES = {"SlurmopDrainBlocked", "SlurmopSlurmUnreachable", "SlurmopNoLeader", "SlurmopReconcileErrors",
               "SlurmopAPIThrottled"}

# PromQL words that are not metric names.
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool",
            "offset", "inf", "nan"}


def metric_names(expr):
    """The metric names a PromQL (or Grafana label_values) expression reads:
    identifiers that are not functions, keywords, label names in matchers or
    in by/without/on lists, durations or Grafana variables."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)           # strings
    e = re.sub(r"\{[^{}]*\}", "", e)                          # label matchers
    e = re.sub(r"\[[^\]]*\]", "", e)                          # ranges, subqueries
    e = re.sub(r"\$\{?\w+\}?", "", e)                         # Grafana variables
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,[^)]*\)", r" \1 ", e)
    out = set()
    for m in re.finditer(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?", e):
        name, call = m.group(1), m.group(2)
        if call or name.lower() in KEYWORDS:
            continue
        out.add(name)
    return out


def documented(name, doc):
    """name is a documented metric, or one of a documented histogram's series."""
    if name in doc:
        return True
    for suffix in ("_bucket", "_sum", "_count"):
        base = name[:-len(suffix)]
        if name.endswith(suffix) and doc.get(base, ("",))[0] == "histogram":
            return True
    return False


def check_exprs(exprs, where):
    doc = doc_metrics()
    bad = []
    for what, e in exprs:
        names = metric_names(e)
        if not names:
            bad.append("%s: names no metric: %s" % (what, e))
        for n in sorted(names):
            if not documented(n, doc):
                bad.append("%s: %s is not in docs/metrics.md (%s)" % (what, n, e))
    assert not bad, where + ":\n  " + "\n  ".join(bad)


def test_metric_names_parser():
    # the parser itself, so that a check that finds nothing cannot pass
    assert metric_names('histogram_quantile(0.99, sum by (le, controller) '
                        '(rate(workqueue_queue_duration_seconds_bucket{job=~"$job",name="a"}[$__rate_interval])))') \
        == {"workqueue_queue_duration_seconds_bucket"}
    assert metric_names('max(leader_election_master_status{name="x"}) < 1 or absent(up)') == \
        {"leader_election_master_status", "up"}
    assert metric_names("label_values(leader_election_master_status, job)") == {"leader_election_master_status"}
    assert metric_names("sum without (code, host) (rate(x_total[5m])) > 0 or max(y) > 50") == {"x_total", "y"}
    assert not documented("no_such_metric_total", doc_metrics())


def test_dashboard_metrics():
    d = json.load(open(DASHBOARD))
    assert d.get("uid") and d.get("title") and d.get("panels"), "not a dashboard"
    # A collapsed row holds its panels inside it (Grafana saves it so when
    # a row is folded in the editor): those are queries too.
    panels = []
    for p in d["panels"]:
        panels.append(p)
        panels.extend(p.get("panels") or [])
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    assert any(v.get("type") == "datasource" for v in d["templating"]["list"]), "no datasource variable"
    exprs = []
    for p in panels:
        for t in p.get("targets", []):
            assert t.get("expr"), "panel %r has a target without a PromQL expr: %r" % (p["title"], t)
            exprs.append(("panel %r" % p["title"], t["expr"]))
    for v in d["templating"]["list"]:
        q = v.get("query")
        if v.get("type") == "query":
            exprs.append(("variable %s" % v["name"], q["query"] if isinstance(q, dict) else q))
    assert len(exprs) >= 20, len(exprs)
    check_exprs(exprs, "deploy/grafana/slurmop.json")
    print("  %d dashboard queries, every metric documented" % len(exprs))


def find_helm():
    b = os.environ.get("K8S_BIN")
    if b and os.access(os.path.join(b, "helm"), os.X_OK):
        return os.path.join(b, "helm")
    r = subprocess.run(["bash", os.path.join(SRC, "tests", "k8s", "build.sh"), "--check"],
                       capture_output=True, text=True, timeout=120)
    h = os.path.join(r.stdout.strip(), "helm") if r.returncode == 0 and r.stdout.strip() else ""
    return h if h and os.access(h, os.X_OK) else (shutil.which("helm") or None)


def render_rules(extra=()):
    helm = find_helm()
    if not helm:
        raise Skip("helm is not built (bash tests/k8s/build.sh)")
    args = [helm, "template", "slurmop", CHART, "--namespace", "slurmop", "--kube-version", KUBE_VERSION]
    for s in extra:
        args += ["--set", s]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    with tempfile.TemporaryDirectory() as tmp:
        p = os.path.join(tmp, "out.yaml")
        open(p, "w").write(r.stdout)
        docs = [x for x in yaml_to_json([p]) if x]
    return [x for x in docs if x.get("kind") == "PrometheusRule"]


def test_rule_metrics():
    assert render_rules() == [], "the PrometheusRule is rendered by default"
    rules = render_rules(["prometheusRule.enabled=true"])
    assert len(rules) == 1, rules
    alerts = [r for g in rules[0]["spec"]["groups"] for r in g["rules"]]
    assert {a["alert"] for a in alerts} == ALERT_NAMES, [a["alert"] for a in alerts]
    check_exprs([(a["alert"], a["expr"]) for a in alerts], "the PrometheusRule")
    # the threshold follows the value
    again = render_rules(["prometheusRule.enabled=true", "prometheusRule.drainBlockedMinutes=7"])
    expr = [r["expr"] for g in again[0]["spec"]["groups"] for r in g["rules"] if r["alert"] == "SlurmopDrainBlocked"]
    assert expr and expr[0].endswith("> 420"), expr


def promtool():
    r = subprocess.run(["bash", os.path.join(ALERTS, "build.sh")], capture_output=True, text=True, timeout=3600)
    if r.returncode == 77:
        raise Skip("Go is not installed: promtool cannot be built (tests/alerts/build.sh)")
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_promtool():
    rules = render_rules(["prometheusRule.enabled=true"])
    tool = promtool()
    with tempfile.TemporaryDirectory() as tmp:
        # promtool reads plain rule files: the PrometheusRule's spec
        with open(os.path.join(tmp, "rules.yaml"), "w") as f:
            json.dump(rules[0]["spec"], f)  # JSON is YAML
        shutil.copy(os.path.join(ALERTS, "slurmop_test.yaml"), tmp)
        r = subprocess.run([tool, "check", "rules", os.path.join(tmp, "rules.yaml")], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        r = subprocess.run([tool, "test", "rules", os.path.join(tmp, "slurmop_test.yaml")], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        print("  " + (r.stdout.strip().splitlines() or [""])[-1])


if __name__ == "__main__":
    run_tests(globals())

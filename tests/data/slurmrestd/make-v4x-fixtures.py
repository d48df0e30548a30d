#!/usr/bin/env python3
"""Write the v0.0.40-v0.0.45 slurmrestd fixtures of tests/data/slurmrestd/.

No Slurm 23.11+ runs on this machine, so these responses are written by hand
from the OpenAPI documents of each version: every object starts as the
schema's full shape (every property present, with an empty value of its
type) and the scenario sets the fields that matter; the result is checked
against the schema before it is written. v0.0.40 and v0.0.41 documents were
not available: their fixtures use v0.0.42's shapes, without the ping fields
"responding"/"primary" in v0.0.40 (it reports "pinged" only); v0.0.45 has
no "pinged" and no "mode" any more.

Usage: make-v4x-fixtures.py OPENAPI_DIR [OUTDIR]
  OPENAPI_DIR holds v0.0.42.json, v0.0.43.json, v0.0.44.json, v0.0.45.json.
"""
import copy
import json
import os
import sys

SLURM = {40: ("23", "11", "10"), 41: ("24", "05", "8"), 42: ("24", "11", "6"), 43: ("25", "05", "8"),
         44: ("25", "11", "7"), 45: ("26", "05", "5")}
NOW = 1795300000


class Schema:
    def __init__(self, doc, ver):
        self.s = doc["components"]["schemas"]
        self.ver = ver

    def resolve(self, sch):
        while "$ref" in sch:
            sch = self.s[sch["$ref"].rsplit("/", 1)[1]]
        return sch

    def get(self, name):
        return self.s["v0.0.%d_%s" % (self.ver, name)]

    def empty(self, sch, depth=0):
        """The full shape of a schema with empty values."""
        sch = self.resolve(sch)
        t = sch.get("type")
        if t == "object" or "properties" in sch:
            if depth > 5:
                return {}
            return {k: self.empty(v, depth + 1) for k, v in sch.get("properties", {}).items()}
        return {"array": [], "string": "", "integer": 0, "number": 0.0, "boolean": False}.get(t, None)

    def check(self, sch, val, path="$"):
        """Raise when val does not have the schema's type (recursively)."""
        sch = self.resolve(sch)
        t = sch.get("type") or ("object" if "properties" in sch else None)
        ok = {"object": dict, "array": list, "string": str, "boolean": bool,
              "integer": int, "number": (int, float)}.get(t)
        if ok is None:
            return
        if not isinstance(val, ok) or (t in ("integer", "number") and isinstance(val, bool)):
            raise SystemExit("%s: %r is not %s" % (path, val, t))
        if t == "object":
            props = sch.get("properties", {})
            for k, v in val.items():
                if props and k not in props:
                    raise SystemExit("%s: unknown property %s" % (path, k))
                if k in props:
                    self.check(props[k], v, path + "." + k)
        if t == "array":
            items = sch.get("items", {})
            enum = self.resolve(items).get("enum")
            for i, v in enumerate(val):
                if enum and v not in enum:
                    raise SystemExit("%s[%d]: %r not in enum" % (path, i, v))
                self.check(items, v, "%s[%d]" % (path, i))


def nv(n=None, infinite=False):
    """A {set, infinite, number} struct."""
    if infinite:
        return {"set": False, "infinite": True, "number": 0}
    if n is None:
        return {"set": False, "infinite": False, "number": 0}
    return {"set": True, "infinite": False, "number": n}


def meta(ver):
    major, minor, micro = SLURM[ver]
    return {"plugin": {"type": "openapi/slurmctld", "name": "Slurm OpenAPI slurmctld",
                       "data_parser": "data_parser/v0.0.%d" % ver, "accounting_storage": ""},
            "client": {"source": "[10.244.0.7]:41234(fd:9)", "user": "slurm", "group": "slurm"},
            "slurm": {"version": {"major": major, "micro": micro, "minor": minor},
                      "release": "%s.%s.%s" % (major, minor, micro), "cluster": "slinky"}}


def pod_comment(pod):
    return json.dumps({"namespace": "slurm", "podName": pod, "node": "gpu-node-%s" % pod[-1],
                       "nodeSetName": "slinky", "nodeSetUID": "6f1c2d1e-0b7a-4c55-9d0e-111111111111"},
                      separators=(",", ":"))


NODES = [
    # name, state, reason, extra fields
    ("slinky-0", ["IDLE"], "", {}),
    ("slinky-1", ["IDLE", "DRAIN"], "slurm-operator: Pod (slurm/slinky-1) is pending termination for scale-in", {}),
    ("slinky-2", ["MIXED", "DRAIN"], "bad GPU, ticket 4711", {"alloc_cpus": 32}),
    ("slinky-3", ["ALLOCATED"], "", {"alloc_cpus": 64}),
    ("slinky-4", ["DOWN", "NOT_RESPONDING"], "Not responding", {}),
    ("slinky-5", ["IDLE", "NOT_RESPONDING"], "", {}),
    ("slinky-6", ["IDLE", "DYNAMIC_NORM"], "", {}),
    ("slinky-7", ["MIXED", "COMPLETING"], "", {"alloc_cpus": 8}),
    ("slinky-8", ["IDLE", "MAINTENANCE", "RESERVED"], "", {"reservation": "SlurmOperatorMaint-slinky"}),
    ("slinky-9", ["IDLE", "DRAIN", "UNDRAIN"], "slurm-operator: Pod (slurm/slinky-9) was uncordoned", {}),
    ("slinky-10", ["FUTURE"], "", {}),
]


def node(sch, name, state, reason, extra):
    n = sch.empty(sch.get("node"))
    n.update({"name": name, "hostname": name, "address": "10.244.1.%s" % name.split("-")[1],
              "state": state, "reason": reason, "cpus": 64, "effective_cpus": 64, "sockets": 2,
              "cores": 32, "threads": 1, "boards": 1, "real_memory": 512000, "port": 6818,
              "architecture": "x86_64", "version": ".".join(SLURM[sch.ver]),
              "operating_system": "Linux 6.8.0-49-generic #49-Ubuntu SMP", "partitions": ["slinky", "all"],
              "features": ["k8s/zone-a", "gpu"], "active_features": ["k8s/zone-a", "gpu"],
              "gres": "gpu:h100:8", "gres_used": "gpu:h100:0(IDX:N/A)", "gres_drained": "N/A",
              "tres": "cpu=64,mem=500G,billing=64,gres/gpu=8", "cluster_name": "slinky",
              "comment": pod_comment(name), "weight": 1, "alloc_idle_cpus": 64,
              "boot_time": nv(NOW - 86400), "slurmd_start_time": nv(NOW - 3600), "last_busy": nv(NOW - 60),
              "free_mem": nv(480000), "reason_changed_at": nv(NOW - 120 if reason else 0),
              "resume_after": nv(None), "next_state_after_reboot": ["INVALID"]})
    if reason:
        n["reason_set_by_user"] = "slurm"
    if "topology" in n:
        n["topology"] = "default:block%d" % (int(name.split("-")[1]) // 4)
    n.update(extra)
    n["alloc_idle_cpus"] = n["cpus"] - n.get("alloc_cpus", 0)
    return n


def resp(sch, ver, name, body):
    out = {"meta": meta(ver), "errors": [], "warnings": []}
    out.update(body)
    if name:
        sch.check(sch.get(name), out)
    return out


def err(desc, num, msg, src):
    return {"description": desc, "error_number": num, "error": msg, "source": src}


def job(sch, jid, state, nodes, start, limit):
    j = sch.empty(sch.get("job_info"))
    j.update({"job_id": jid, "job_state": state, "nodes": nodes, "name": "train-%d" % jid,
              "user_name": "alice", "partition": "slinky", "start_time": start, "time_limit": limit,
              "submit_time": nv(NOW - 600), "end_time": nv(NOW + 3600), "batch_flag": True})
    return j


def main():
    src = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(os.path.abspath(__file__))
    docs = {v: json.load(open(os.path.join(src, "v0.0.%d.json" % v))) for v in (42, 43, 44, 45)}
    for ver in (40, 41, 42, 43, 44, 45):
        sch = Schema(docs[max(ver, 42)], max(ver, 42))
        files = {}
        nodes = [node(sch, *n) for n in NODES]
        files["nodes_states_200"] = resp(sch, ver, "openapi_nodes_resp", {"nodes": nodes, "last_update": nv(NOW)})
        files["node_slinky-1_drained_200"] = resp(sch, ver, "openapi_nodes_resp",
                                                  {"nodes": [nodes[1]], "last_update": nv(NOW)})
        files["node_empty_200"] = resp(sch, ver, "openapi_nodes_resp", {"nodes": [], "last_update": nv(NOW)})
        files["err_unknown_node_500"] = resp(sch, ver, "openapi_nodes_resp", {
            "nodes": [], "last_update": nv(0),
            "errors": [err("Failure to query node nosuch", 2018, "Invalid node name specified", "slurm_load_node")]})
        # An error list beside a data list that looks complete: still an error.
        files["nodes_with_errors_200"] = resp(sch, ver, "openapi_nodes_resp", {
            "nodes": nodes[:2], "last_update": nv(NOW),
            "errors": [err("slurmctld is busy", 1800, "Unable to contact slurm controller (connect failure)",
                           "slurm_load_node")]})
        files["nodes_warnings_200"] = resp(sch, ver, "openapi_nodes_resp", {
            "nodes": nodes[:1], "last_update": nv(NOW),
            "warnings": [{"description": "Ignoring unknown field", "source": "parse"}]})
        files["jobs_200"] = resp(sch, ver, "openapi_job_info_resp", {
            "jobs": [job(sch, 101, ["RUNNING"], "slinky-[2-3]", nv(NOW - 600), nv(60)),
                     job(sch, 102, ["RUNNING"], "slinky-7", nv(NOW - 30), nv(infinite=True)),
                     job(sch, 103, ["PENDING"], "", nv(0), nv(30)),
                     job(sch, 104, ["COMPLETED", "COMPLETING"], "slinky-7", nv(NOW - 900), nv(10))],
            "last_backfill": nv(NOW - 5), "last_update": nv(NOW)})
        ping = {"hostname": "slurm-controller-0", "pinged": "UP", "latency": 412, "mode": "primary"}
        if ver >= 41:
            ping.update({"responding": True, "primary": True})
        backup = {"hostname": "slurm-controller-1", "pinged": "DOWN", "latency": 0, "mode": "backup1"}
        if ver >= 41:
            backup.update({"responding": False, "primary": False})
        if ver >= 45:
            for p in (ping, backup):
                del p["pinged"], p["mode"]
        files["ping_200"] = resp(sch, ver, "openapi_ping_array_resp", {"pings": [ping, backup]})
        r = sch.empty(sch.get("reservation_info"))
        r.update({"name": "SlurmOperatorMaint-slinky", "start_time": nv(NOW + 3600), "end_time": nv(NOW + 5400),
                  "flags": ["MAINT", "IGNORE_JOBS", "SPEC_NODES"], "users": "slurm",
                  "node_list": "slinky-[0-3]", "node_count": 4, "tres": "cpu=256"})
        r2 = copy.deepcopy(r)
        r2.update({"name": "open-ended", "end_time": nv(infinite=True), "flags": ["DAILY", "PURGE_COMP"],
                   "users": "alice,bob", "node_list": "slinky-9"})
        files["reservations_200"] = resp(sch, ver, "openapi_reservation_resp",
                                         {"reservations": [r, r2], "last_update": nv(NOW)})
        files["update_node_200"] = resp(sch, ver, "openapi_resp", {})
        files["err_update_node_state_500"] = resp(sch, ver, "openapi_resp", {
            "errors": [err("Invalid node state specified", 2028, "Invalid node state specified",
                           "slurm_update_node")]})
        if ver == 40:  # v0.0.40 as documented by v0.0.42's shapes, minus the newer ping fields
            for p in files["ping_200"]["pings"]:
                assert "responding" not in p
        for name, body in files.items():
            path = os.path.join(out, "v%d_%s.json" % (ver, name))
            with open(path, "w") as f:
                json.dump(body, f, indent=1, sort_keys=False)
                f.write("\n")
    # The paths of each version's /openapi/v3 document, for negotiation tests.
    for v, doc in docs.items():
        paths = {p: {m: {} for m in ops} for p, ops in doc["paths"].items()}
        with open(os.path.join(out, "openapi_v0.0.%d_paths.json" % v), "w") as f:
            json.dump({"openapi": doc.get("openapi"), "info": {"version": doc["info"]["version"]},
                       "paths": paths}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()

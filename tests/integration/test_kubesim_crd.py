"""kubesim custom resources over real sockets: a CRD with status and scale
subresources, defaults, pruning, and server-side apply."""

import time

from kubesim import Kubesim, run_tests

CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: nodesets.slinky.example.com
spec:
  group: slinky.example.com
  scope: Namespaced
  names:
    plural: nodesets
    singular: nodeset
    kind: NodeSet
    shortNames: [nss]
  versions:
  - name: v1beta1
    served: true
    storage: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
        labelSelectorPath: .status.selector
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              replicas: {type: integer, default: 1}
              partition: {type: string, default: main}
              template:
                type: object
                x-kubernetes-preserve-unknown-fields: true
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
"""

NS = "/apis/slinky.example.com/v1beta1/namespaces/default/nodesets"


def install(c):
    r = c.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=CRD,
                  content_type="application/yaml")
    assert r.status == 201, r
    return r.json()


def test_scale_subresource():
    with Kubesim() as ks:
        c = ks.client()
        install(c)
        disc = c.get("/apis/slinky.example.com/v1beta1").json()
        names = {r["name"]: r for r in disc["resources"]}
        assert names["nodesets"]["shortNames"] == ["nss"]
        assert names["nodesets/scale"]["group"] == "autoscaling" and names["nodesets/scale"]["kind"] == "Scale"
        r = c.post(NS, {"apiVersion": "slinky.example.com/v1beta1", "kind": "NodeSet", "metadata": {"name": "ns1"},
                        "spec": {"template": {"anything": {"goes": 1}}, "unknown": True},
                        "status": {"replicas": 42}})
        assert r.status == 201, r
        o = r.json()
        assert o["spec"]["replicas"] == 1 and o["spec"]["partition"] == "main"
        assert "unknown" not in o["spec"] and o["spec"]["template"] == {"anything": {"goes": 1}}
        assert "status" not in o
        assert r.header("Warning") and "unknown field" in r.header("Warning")
        r = c.patch(NS + "/ns1/status", {"status": {"replicas": 1, "selector": "app=ns1"}})
        assert r.status == 200 and r.json()["status"]["replicas"] == 1, r
        # GET/PUT .../scale
        s = c.get(NS + "/ns1/scale").json()
        assert s["kind"] == "Scale" and s["apiVersion"] == "autoscaling/v1"
        assert s["spec"]["replicas"] == 1 and s["status"] == {"replicas": 1, "selector": "app=ns1"}
        s["spec"]["replicas"] = 4
        r = c.put(NS + "/ns1/scale", s)
        assert r.status == 200 and r.json()["spec"]["replicas"] == 4, r
        obj = c.get(NS + "/ns1").json()
        assert obj["spec"]["replicas"] == 4 and obj["metadata"]["generation"] == 2
        # the old Scale is stale now
        r = c.put(NS + "/ns1/scale", s)
        assert r.status == 409 and r.json()["reason"] == "Conflict", r
        # strategic merge is refused for custom resources
        r = c.patch(NS + "/ns1", {"spec": {"replicas": 2}}, patch_type="strategic")
        assert r.status == 415, r
        c.close()


def test_server_side_apply_and_watch():
    with Kubesim() as ks:
        c = ks.client()
        install(c)
        w = c.watch(NS, resourceVersion=c.get(NS).json()["metadata"]["resourceVersion"])
        cfg = ("apiVersion: slinky.example.com/v1beta1\nkind: NodeSet\nmetadata:\n  name: a\nspec:\n"
               "  replicas: 3\n")
        r = c.patch(NS + "/a", cfg, patch_type="apply", params={"fieldManager": "slurmop"})
        assert r.status == 201, r
        r = c.patch(NS + "/a", cfg.replace("3", "5"), patch_type="apply", params={"fieldManager": "someone"})
        assert r.status == 409 and "conflict with \"slurmop\": .spec.replicas" in r.json()["message"], r
        r = c.patch(NS + "/a", cfg.replace("3", "5"), patch_type="apply",
                    params={"fieldManager": "someone", "force": "true"})
        assert r.status == 200 and r.json()["spec"]["replicas"] == 5, r
        r = c.patch(NS + "/a", cfg, patch_type="apply")
        assert r.status == 422, r
        evs = w.events(2, timeout=5)
        assert [e["type"] for e in evs] == ["ADDED", "MODIFIED"]
        assert all(e["object"]["apiVersion"] == "slinky.example.com/v1beta1" for e in evs)
        w.close()
        # list items of custom resources carry kind/apiVersion
        items = c.get(NS).json()["items"]
        assert items[0]["kind"] == "NodeSet"
        c.close()


if __name__ == "__main__":
    run_tests(globals())

#!/usr/bin/env python3
"""ocipack.py: pack a root file system into a one-layer OCI image archive.

    ocipack.py --rootfs DIR --out ARCHIVE.tar --image SPEC [--image SPEC ...]

Each SPEC is a JSON object describing one image; every image of one call
shares the same layer (the whole of DIR), so one archive carries several
images for the price of one layer:

    {"ref": "localhost/slurmop/slurmd:26.05",
     "entrypoint": ["/usr/local/bin/slurmd-entrypoint.sh"], "cmd": [],
     "env": ["PATH=..."], "user": "0:0", "workdir": "/",
     "ports": ["6818/tcp"], "labels": {"k": "v"}}

The archive is an OCI image layout in a tar (oci-layout, index.json, blobs),
with a docker-style manifest.json beside it, so that `ctr images import`,
`podman load`, `docker load` and `skopeo copy oci-archive:...` all take it.
index.json names each image with both the containerd annotation
(io.containerd.image.name: the full reference, which `ctr images import`
uses as the image's name) and the OCI one (org.opencontainers.image.ref.name).

The layer is an uncompressed tar: an import unpacks it at once, and gzip
would cost more CPU time (on a 2-core machine) than the disk it saves.
Entries are written in sorted order with the files' own owners, modes and
times, so the same tree gives the same layer digest. Device nodes, sockets
and FIFOs are left out (a container runtime provides /dev).

Standard library only.
"""

import argparse
import hashlib
import io
import json
import os
import stat
import sys
import tarfile
import tempfile

LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"


class HashingWriter(io.RawIOBase):
    """A file object that hashes and counts what is written through it."""

    def __init__(self, f):
        self.f = f
        self.h = hashlib.sha256()
        self.n = 0

    def writable(self):
        return True

    def write(self, b):
        self.h.update(b)
        self.n += len(b)
        return self.f.write(b)


def walk_sorted_one(root, rel):
    """Paths below root/rel, relative to root, sorted, parents first."""
    for n in sorted(os.listdir(os.path.join(root, rel))):
        r = os.path.join(rel, n)
        yield r
        if stat.S_ISDIR(os.lstat(os.path.join(root, r)).st_mode):
            yield from walk_sorted_one(root, r)


def write_layer(rootfs, out):
    """Write the layer tar of rootfs to the open binary file out; return
    (digest, size)."""
    hw = HashingWriter(out)
    buf = io.BufferedWriter(hw, buffer_size=1 << 20)
    hardlinks = {}
    with tarfile.open(fileobj=buf, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for rel in walk_sorted_one(rootfs, ""):
            full = os.path.join(rootfs, rel)
            st = os.lstat(full)
            mode = st.st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
                continue
            ti = tarfile.TarInfo(rel)
            ti.mode = stat.S_IMODE(mode)
            ti.uid, ti.gid = st.st_uid, st.st_gid
            ti.uname = ti.gname = ""
            ti.mtime = int(st.st_mtime)
            if stat.S_ISDIR(mode):
                ti.type = tarfile.DIRTYPE
                tar.addfile(ti)
            elif stat.S_ISLNK(mode):
                ti.type = tarfile.SYMTYPE
                ti.linkname = os.readlink(full)
                tar.addfile(ti)
            else:
                key = (st.st_dev, st.st_ino)
                if st.st_nlink > 1 and key in hardlinks:
                    ti.type = tarfile.LNKTYPE
                    ti.linkname = hardlinks[key]
                    tar.addfile(ti)
                    continue
                hardlinks[key] = rel
                ti.size = st.st_size
                with open(full, "rb") as f:
                    tar.addfile(ti, f)
    buf.flush()
    return "sha256:" + hw.h.hexdigest(), hw.n


def blob(data):
    return "sha256:" + hashlib.sha256(data).hexdigest(), data


def config_json(spec, diff_id):
    cfg = {
        "Env": spec.get("env") or ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
        "WorkingDir": spec.get("workdir", "/"),
    }
    if spec.get("user"):
        cfg["User"] = spec["user"]
    if spec.get("entrypoint") is not None:
        cfg["Entrypoint"] = spec["entrypoint"]
    if spec.get("cmd") is not None:
        cfg["Cmd"] = spec["cmd"]
    if spec.get("ports"):
        cfg["ExposedPorts"] = {p: {} for p in spec["ports"]}
    if spec.get("labels"):
        cfg["Labels"] = spec["labels"]
    if spec.get("stopsignal"):
        cfg["StopSignal"] = spec["stopsignal"]
    doc = {
        "architecture": spec.get("architecture", "amd64"),
        "os": "linux",
        "config": cfg,
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": "slurmop deploy/images/ocipack.py"}],
    }
    if spec.get("created"):
        doc["created"] = spec["created"]
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def add_bytes(tar, name, data):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.mode = 0o644
    tar.addfile(ti, io.BytesIO(data))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rootfs", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--image", action="append", required=True, help="JSON image spec (see the module doc)")
    a = ap.parse_args()
    specs = [json.loads(s) for s in a.image]
    for s in specs:
        if not s.get("ref"):
            sys.exit("ocipack: every --image needs a ref")
    out_dir = os.path.dirname(os.path.abspath(a.out))
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".ocipack.") as tmp:
        layer_path = os.path.join(tmp, "layer.tar")
        with open(layer_path, "wb") as f:
            layer_digest, layer_size = write_layer(a.rootfs, f)
        blobs = {}  # digest -> bytes (small blobs)
        index = {"schemaVersion": 2, "mediaType": INDEX_TYPE, "manifests": []}
        docker = []
        for s in specs:
            cd, cdata = blob(config_json(s, layer_digest))
            blobs[cd] = cdata
            man = {
                "schemaVersion": 2,
                "mediaType": MANIFEST_TYPE,
                "config": {"mediaType": CONFIG_TYPE, "digest": cd, "size": len(cdata)},
                "layers": [{"mediaType": LAYER_TYPE, "digest": layer_digest, "size": layer_size}],
            }
            md, mdata = blob(json.dumps(man, sort_keys=True, separators=(",", ":")).encode())
            blobs[md] = mdata
            index["manifests"].append({
                "mediaType": MANIFEST_TYPE, "digest": md, "size": len(mdata),
                "platform": {"architecture": s.get("architecture", "amd64"), "os": "linux"},
                "annotations": {"io.containerd.image.name": s["ref"],
                                "org.opencontainers.image.ref.name": s["ref"]},
            })
            docker.append({"Config": "blobs/sha256/" + cd[7:], "RepoTags": [s["ref"]],
                           "Layers": ["blobs/sha256/" + layer_digest[7:]]})
        part = a.out + ".part"
        with tarfile.open(part, "w", format=tarfile.PAX_FORMAT) as tar:
            add_bytes(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
            for d in ("blobs", "blobs/sha256"):
                ti = tarfile.TarInfo(d)
                ti.type = tarfile.DIRTYPE
                ti.mode = 0o755
                tar.addfile(ti)
            # Fixed metadata (mtime 0, root) so that the archive, not only
            # the layer, is the same for the same tree.
            ti = tarfile.TarInfo("blobs/sha256/" + layer_digest[7:])
            ti.size = layer_size
            ti.mode = 0o644
            with open(layer_path, "rb") as lf:
                tar.addfile(ti, lf)
            for d in sorted(blobs):
                add_bytes(tar, "blobs/sha256/" + d[7:], blobs[d])
            add_bytes(tar, "index.json", json.dumps(index, sort_keys=True, indent=1).encode())
            add_bytes(tar, "manifest.json", json.dumps(docker, indent=1).encode())
        os.replace(part, a.out)
    print("ocipack: %s: %d image(s), layer %s (%d MB)" % (a.out, len(specs), layer_digest[7:19], layer_size >> 20),
          file=sys.stderr)


if __name__ == "__main__":
    main()

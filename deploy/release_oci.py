#!/usr/bin/env python3
"""release_oci.py: turn the operator's docker archive into a release's OCI archive.

    release_oci.py --in DOCKER.tar --out OCI.tar --ref docker.io/library/slurmop:VERSION

deploy/images/build.sh writes the operator image as a docker archive
(`buildah push docker-archive:`) named after the charts' appVersion in the
tree. A release names it after the release's version instead, without
rebuilding it: the layers and the image config are copied byte for byte (the
config names no tag, so the image ID does not change), only the name is new.

The output is an OCI image layout in a tar (oci-layout, index.json,
blobs/sha256/...) with a docker-style manifest.json beside it, like the
archives of deploy/images/ocipack.py, so that `skopeo copy oci-archive:...`,
`podman load`, `ctr images import` (index.json's containerd annotation
io.containerd.image.name and the OCI org.opencontainers.image.ref.name both
carry the full reference) and `docker load` all take it. Layers
stay uncompressed, as in the input. Each layer's sha256 is checked against
the name the docker archive gives it (its diff ID); a mismatch is an error
and leaves no output. Entries are written in a fixed order with time 0, so
the same input gives the same archive.

Standard library only.
"""

import argparse
import hashlib
import io
import json
import os
import re
import sys
import tarfile

LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
HEX64 = re.compile(r"^[0-9a-f]{64}$")


class HashingReader(io.RawIOBase):
    """Reads through f, hashing what passes."""

    def __init__(self, f):
        self.f = f
        self.h = hashlib.sha256()

    def readable(self):
        return True

    def readinto(self, b):
        data = self.f.read(len(b))
        self.h.update(data)
        b[:len(data)] = data
        return len(data)


def info(name, size):
    ti = tarfile.TarInfo(name)
    ti.size = size
    ti.mode = 0o444
    ti.mtime = 0
    return ti


def add_bytes(tar, name, data):
    tar.addfile(info(name, len(data)), io.BytesIO(data))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--in", dest="src", required=True, help="docker archive with one image")
    ap.add_argument("--out", required=True, help="OCI archive to write")
    ap.add_argument("--ref", required=True, help="the image's full reference, e.g. docker.io/library/slurmop:0.2.0")
    a = ap.parse_args()

    with tarfile.open(a.src) as src:
        manifest = json.load(src.extractfile("manifest.json"))
        if len(manifest) != 1:
            sys.exit("release_oci: %s holds %d images, want 1" % (a.src, len(manifest)))
        m = manifest[0]
        cfg_name = m["Config"]
        cfg = src.extractfile(cfg_name).read()
        cfg_digest = hashlib.sha256(cfg).hexdigest()
        cfg_obj = json.loads(cfg)
        part = a.out + ".part"
        layers = []
        try:
            with tarfile.open(part, "w", format=tarfile.PAX_FORMAT) as out:
                add_bytes(out, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
                for name in m["Layers"]:
                    want = os.path.basename(name).split(".")[0]
                    if not HEX64.match(want):
                        sys.exit("release_oci: layer %s is not named by its sha256" % name)
                    mem = src.getmember(name)
                    r = HashingReader(src.extractfile(mem))
                    out.addfile(info("blobs/sha256/" + want, mem.size), r)
                    if r.h.hexdigest() != want:
                        sys.exit("release_oci: layer %s has sha256 %s" % (name, r.h.hexdigest()))
                    layers.append((want, mem.size))
                diff_ids = cfg_obj.get("rootfs", {}).get("diff_ids", [])
                if diff_ids != ["sha256:" + d for d, _ in layers]:
                    sys.exit("release_oci: the config's diff_ids do not match the layers")
                add_bytes(out, "blobs/sha256/" + cfg_digest, cfg)
                man = json.dumps({
                    "schemaVersion": 2,
                    "mediaType": MANIFEST_TYPE,
                    "config": {"mediaType": CONFIG_TYPE, "digest": "sha256:" + cfg_digest, "size": len(cfg)},
                    "layers": [{"mediaType": LAYER_TYPE, "digest": "sha256:" + d, "size": n} for d, n in layers],
                }, sort_keys=True).encode()
                man_digest = hashlib.sha256(man).hexdigest()
                add_bytes(out, "blobs/sha256/" + man_digest, man)
                index = {
                    "schemaVersion": 2,
                    "mediaType": INDEX_TYPE,
                    "manifests": [{
                        "mediaType": MANIFEST_TYPE, "digest": "sha256:" + man_digest, "size": len(man),
                        "platform": {"architecture": cfg_obj.get("architecture", "amd64"),
                                     "os": cfg_obj.get("os", "linux")},
                        "annotations": {"io.containerd.image.name": a.ref,
                                        "org.opencontainers.image.ref.name": a.ref},
                    }],
                }
                add_bytes(out, "index.json", json.dumps(index, indent=1, sort_keys=True).encode())
                docker = [{"Config": "blobs/sha256/" + cfg_digest, "RepoTags": [a.ref],
                           "Layers": ["blobs/sha256/" + d for d, _ in layers]}]
                add_bytes(out, "manifest.json", json.dumps(docker, indent=1).encode())
            os.replace(part, a.out)
        finally:
            if os.path.exists(part):
                os.unlink(part)
    print("%s %s" % (a.ref, "sha256:" + man_digest))


if __name__ == "__main__":
    main()

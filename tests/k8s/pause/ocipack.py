#!/usr/bin/env python3
"""ocipack.py FILE REF OUT: pack one static executable as a one-layer OCI
image archive (oci-layout, index.json, blobs/sha256/...) that
`ctr images import` accepts, named REF, whose entrypoint is /<basename of
FILE>. Deterministic: the same FILE gives the same archive (mtimes 0, owner
root, sorted entries), so the image ID is stable across builds."""
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile


def tar_bytes(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, data, mode in entries:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = mode
            info.mtime = 0
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: ocipack.py FILE REF OUT")
    path, ref, out = sys.argv[1:]
    name = os.path.basename(path)
    with open(path, "rb") as f:
        exe = f.read()
    layer_tar = tar_bytes([(name, exe, 0o755)])
    layer = gzip.compress(layer_tar, mtime=0)
    diff_id = "sha256:" + hashlib.sha256(layer_tar).hexdigest()
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Entrypoint": ["/" + name], "User": "65535:65535"},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": "tests/k8s/pause/ocipack.py " + name}],
    }, sort_keys=True).encode()
    blobs = {}

    def blob(data, media):
        digest = hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return {"mediaType": media, "digest": "sha256:" + digest, "size": len(data)}

    manifest = json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": blob(config, "application/vnd.oci.image.config.v1+json"),
        "layers": [blob(layer, "application/vnd.oci.image.layer.v1.tar+gzip")],
    }, sort_keys=True).encode()
    mdesc = blob(manifest, "application/vnd.oci.image.manifest.v1+json")
    tag = ref.rsplit(":", 1)[1] if ":" in ref.rsplit("/", 1)[-1] else "latest"
    mdesc["annotations"] = {"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": tag}
    index = json.dumps({"schemaVersion": 2, "manifests": [mdesc]}, sort_keys=True).encode()
    entries = [("oci-layout", b'{"imageLayoutVersion":"1.0.0"}', 0o644), ("index.json", index, 0o644)]
    entries += [("blobs/sha256/" + d, blobs[d], 0o644) for d in sorted(blobs)]
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(tar_bytes(entries))
    os.replace(tmp, out)


if __name__ == "__main__":
    main()

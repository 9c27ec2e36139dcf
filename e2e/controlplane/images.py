"""Container images without a registry or a container engine: layers are tar files, an image is
one tar that is at once an OCI image layout (``oci-layout``, ``index.json``, ``blobs/``) and a
docker archive (``manifest.json``), which ``ctr images import`` and ``kind load image-archive``
both read. Layers are uncompressed (gzip of a 1.7 GB layer costs a minute on two cores, and
the archive never leaves the machine).

Why written here rather than a tool: the format is four small JSON documents around the layer
tars (OCI image spec, image-layout.md and manifest.md), GNU tar already writes reproducible
layers, and the tools that do this (buildah, umoci) would unpack and re-pack a 1.7 GB rootfs.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"


@dataclass(frozen=True)
class ImageConfig:
    """What a container runs by default (the OCI config's ``config`` object)."""

    entrypoint: Sequence[str] = ()
    cmd: Sequence[str] = ()
    env: Sequence[str] = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",)
    user: str = ""
    workdir: str = "/"
    labels: dict[str, str] = field(default_factory=dict)

    def to_oci(self) -> dict[str, object]:
        config: dict[str, object] = {"Env": list(self.env), "WorkingDir": self.workdir}
        if self.entrypoint:
            config["Entrypoint"] = list(self.entrypoint)
        if self.cmd:
            config["Cmd"] = list(self.cmd)
        if self.user:
            config["User"] = self.user
        if self.labels:
            config["Labels"] = dict(self.labels)
        return config


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def single_file_layer(out: Path, files: dict[str, tuple[bytes, int]]) -> Path:
    """A reproducible layer tar holding ``files`` ({path: (content, mode)}), owned by root,
    mtime 0, with their parent directories."""
    dirs = sorted({str(Path(p).parent) for p in files} - {"."})
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for directory in dirs:
            info = tarfile.TarInfo(directory)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            tar.addfile(info)
        for path, (content, mode) in sorted(files.items()):
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(content), mode, 0
            tar.addfile(info, io.BytesIO(content))
    return out


def rootfs_layer(rootfs: Path, out: Path, *, exclude: Sequence[str] = ()) -> Path:
    """A reproducible layer tar of a root file system (GNU tar: sorted names, mtime kept,
    numeric owners, xattrs such as file capabilities)."""
    command = [
        "tar",
        "--sort=name",
        "--numeric-owner",
        "--xattrs",
        "--xattrs-include=security.capability",
        "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime",
        *(f"--exclude=./{pattern}" for pattern in exclude),
        "-C",
        str(rootfs),
        "-cf",
        str(out),
        ".",
    ]
    subprocess.run(command, check=True)
    return out


def write_image(
    out: Path,
    *,
    name: str | Sequence[str],
    layers: Sequence[Path],
    config: ImageConfig,
    created: str,
) -> str:
    """Write the image archive ``out`` named ``name`` (``repo:tag``, or several) from layer
    tars, bottom first; returns the manifest digest. Each layer is held once, by its digest."""
    names = [name] if isinstance(name, str) else list(name)
    staging: dict[str, bytes | Path] = {}
    layer_descs, diff_ids = [], []
    for layer in layers:
        digest = _sha256_file(layer)
        staging[f"blobs/sha256/{digest}"] = layer
        layer_descs.append(
            {"mediaType": OCI_LAYER, "digest": f"sha256:{digest}", "size": layer.stat().st_size}
        )
        diff_ids.append(f"sha256:{digest}")
    config_blob = _json(
        {
            "created": created,
            "architecture": "amd64",
            "os": "linux",
            "config": config.to_oci(),
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
        }
    )
    config_digest = hashlib.sha256(config_blob).hexdigest()
    staging[f"blobs/sha256/{config_digest}"] = config_blob
    manifest = _json(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {
                "mediaType": OCI_CONFIG,
                "digest": f"sha256:{config_digest}",
                "size": len(config_blob),
            },
            "layers": layer_descs,
        }
    )
    manifest_digest = hashlib.sha256(manifest).hexdigest()
    staging[f"blobs/sha256/{manifest_digest}"] = manifest
    staging["index.json"] = _json(
        {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": OCI_MANIFEST,
                    "digest": f"sha256:{manifest_digest}",
                    "size": len(manifest),
                    "annotations": {
                        "io.containerd.image.name": each,
                        "org.opencontainers.image.ref.name": each.rsplit(":", 1)[-1],
                    },
                }
                for each in names
            ],
        }
    )
    staging["oci-layout"] = _json({"imageLayoutVersion": "1.0.0"})
    staging["manifest.json"] = _json(
        [
            {
                "Config": f"blobs/sha256/{config_digest}",
                "RepoTags": names,
                "Layers": [f"blobs/sha256/{d.removeprefix('sha256:')}" for d in diff_ids],
            }
        ]
    )
    _write_archive(out, staging)
    return f"sha256:{manifest_digest}"


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


def _write_archive(out: Path, members: dict[str, bytes | Path]) -> None:
    tmp = out.with_name(out.name + ".tmp")
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        for directory in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(directory)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            tar.addfile(info)
        for member, content in sorted(members.items()):
            info = tarfile.TarInfo(member)
            info.mode, info.mtime = 0o644, 0
            if isinstance(content, Path):
                info.size = content.stat().st_size
                with content.open("rb") as f:
                    tar.addfile(info, f)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    tmp.replace(out)


def import_image(ctr: Path, socket: Path, archive: Path) -> None:
    """Import an image archive into containerd's ``k8s.io`` namespace (the one the kubelet's CRI
    uses) and unpack it for the overlayfs snapshotter."""
    subprocess.run(
        [
            str(ctr),
            f"--address={socket}",
            "--namespace=k8s.io",
            "images",
            "import",
            "--snapshotter=overlayfs",
            str(archive),
        ],
        check=True,
        capture_output=True,
        text=True,
    )


def files_image(
    out: Path, *, name: str, files: dict[str, tuple[bytes, int]], config: ImageConfig
) -> Path:
    """An image of one layer holding ``files`` ({path: (content, mode)}), written only when
    ``out`` does not exist yet (its name should carry a hash of the content)."""
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    layer = out.with_name(out.name + ".layer.tar")
    single_file_layer(layer, {path.lstrip("/"): data for path, data in files.items()})
    write_image(out, name=name, layers=[layer], config=config, created="1970-01-01T00:00:00Z")
    layer.unlink()
    return out


def binary_image(out: Path, *, name: str, binary: Path, path: str, config: ImageConfig) -> Path:
    """An image holding one static binary at ``path`` (the pause and CoreDNS images)."""
    return files_image(out, name=name, files={path: (binary.read_bytes(), 0o755)}, config=config)

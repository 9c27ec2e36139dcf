"""Spindle's own container image, built from the repository without a registry or Docker:
one image runs the broker, the operator, and Spark's driver and executors.

Two layers, each cached by a hash of what goes into it (under ``$SPINDLE_CACHE/images``):

1. **base**: Debian bookworm minbase from Debian's packages (``debootstrap``), Python 3.11, JRE
   17 (Spark's JVM), a virtual environment ``/opt/spindle`` holding Spindle's third-party
   dependencies from PyPI, and a passwd/group entry for the unprivileged uid 65532 (Spark fails
   with "Invalid UID, could not determine effective user" without one). Keyed by the Debian
   package list, ``pyproject.toml``'s dependencies and this module's recipe version; built once
   (about two minutes; 1.7 GB).
2. **app**: the Spindle wheel itself (``--no-deps``) and the entrypoint, installed into the
   venv through an overlay of the base; keyed by the sources. Rebuilt in seconds on each change.

pip inside the chroot needs the host's CA bundle (``PIP_CERT``): the machine reaches PyPI through
a proxy whose CA is in the host bundle only. It is copied in for the install and removed after.

``python -m controlplane.spindle_image`` builds what is missing and prints the archive's path and
the image name; ``kind load image-archive`` reads the same archive.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from controlplane import images
from controlplane.binaries import default_cache

#: Bump when the recipe below changes in a way the hashed inputs do not show.
RECIPE = "1"
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
DEBIAN_PACKAGES = ["python3", "python3-venv", "openjdk-17-jre-headless", "ca-certificates", "tini"]
UID = 65532
VENV = "/opt/spindle"
PYTHON_SITE = f"{VENV}/lib/python3.11/site-packages"
SPARK_HOME = f"{PYTHON_SITE}/pyspark"
JAVA_HOME = "/usr/lib/jvm/java-17-openjdk-amd64"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
#: Repository paths that make up the app layer.
SOURCES = ("pyproject.toml", "README.md", "broker", "operator", "rebalance")
ENTRYPOINT = Path(__file__).with_name("spindle-entrypoint.sh")
KEEP_ARCHIVES = 4


@dataclass(frozen=True)
class SpindleImage:
    archive: Path
    name: str  # spindle:<app hash>; the archive also names it spindle:latest


def base_key(root: Path) -> str:
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    text = "\n".join([RECIPE, SUITE, *DEBIAN_PACKAGES, *sorted(project["dependencies"])])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def app_key(root: Path, base: str) -> str:
    digest = hashlib.sha256(f"{base}\n{RECIPE}\n".encode())
    digest.update(ENTRYPOINT.read_bytes())
    for source in SOURCES:
        path = root / source
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            if "__pycache__" in file.parts:
                continue
            digest.update(str(file.relative_to(root)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()[:12]


def _run(*command: str, env: dict[str, str] | None = None, log: Path | None = None) -> None:
    with log.open("ab") if log else contextlib.nullcontext() as out:
        done = subprocess.run(
            command, stdout=out or subprocess.PIPE, stderr=subprocess.STDOUT, env=env
        )
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:] if log else (done.stdout or b"").decode()
        raise RuntimeError(f"{' '.join(command[:4])} ... failed ({done.returncode}):\n{tail}")


@contextlib.contextmanager
def _chroot_mounts(rootfs: Path) -> Iterator[None]:
    """/proc (the JRE's postinst runs java), /dev and the host's resolv.conf for the chroot."""
    (rootfs / "etc" / "resolv.conf").write_bytes(Path("/etc/resolv.conf").read_bytes())
    _run("mount", "-t", "proc", "proc", str(rootfs / "proc"))
    _run("mount", "--bind", "/dev", str(rootfs / "dev"))
    try:
        yield
    finally:
        for point in ("dev", "proc"):
            subprocess.run(["umount", "-l", str(rootfs / point)], capture_output=True)
        (rootfs / "etc" / "resolv.conf").unlink(missing_ok=True)


def _chroot_env() -> dict[str, str]:
    return {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "DEBIAN_FRONTEND": "noninteractive",
        "LANG": "C.UTF-8",
        "HOME": "/root",
        "PIP_CERT": "/tmp/host-ca.crt",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_CACHE_DIR": "1",
    }


def build_base(root: Path, work: Path, log: Path) -> Path:
    """The base rootfs (see the module docstring) as a layer tar."""
    rootfs = work / "rootfs"
    _run(
        "debootstrap",
        "--variant=minbase",
        f"--include={','.join(DEBIAN_PACKAGES)}",
        SUITE,
        str(rootfs),
        MIRROR,
        log=log,
    )
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    shutil.copyfile(HOST_CA, rootfs / "tmp" / "host-ca.crt")
    env = _chroot_env()
    with _chroot_mounts(rootfs):
        _run("chroot", str(rootfs), "python3", "-m", "venv", VENV, env=env, log=log)
        _run(
            "chroot",
            str(rootfs),
            f"{VENV}/bin/pip",
            "install",
            "-q",
            "--upgrade",
            "pip",
            env=env,
            log=log,
        )
        _run(
            "chroot",
            str(rootfs),
            f"{VENV}/bin/pip",
            "install",
            "-q",
            *project["dependencies"],
            env=env,
            log=log,
        )
    (rootfs / "tmp" / "host-ca.crt").unlink()
    with (rootfs / "etc" / "passwd").open("a") as f:
        f.write(f"spindle:x:{UID}:{UID}:Spindle:/home/spindle:/usr/sbin/nologin\n")
    with (rootfs / "etc" / "group").open("a") as f:
        f.write(f"spindle:x:{UID}:\n")
    home = rootfs / "home" / "spindle"
    home.mkdir(parents=True, exist_ok=True)
    os.chown(home, UID, UID)
    for junk in ("var/lib/apt/lists", "var/cache/apt/archives", "var/log"):
        shutil.rmtree(rootfs / junk, ignore_errors=True)
        (rootfs / junk).mkdir(parents=True, exist_ok=True)
    layer = work / "base.tar"
    images.rootfs_layer(rootfs, layer, exclude=["dev/*", "proc/*", "sys/*"])
    return layer


def build_app(root: Path, base_rootfs: Path, work: Path, log: Path) -> Path:
    """The app layer: the Spindle wheel installed into the base's venv, and the entrypoint.
    Installed in a chroot over an overlay of the base rootfs, so the upper dir is the diff."""
    lower = base_rootfs
    upper, ovl, merged = (work / n for n in ("upper", "ovl-work", "merged"))
    for d in (upper, ovl, merged):
        d.mkdir()
    wheels = work / "wheels"
    # -P: the repository's operator/ must not shadow the standard library's.
    _run(
        sys.executable,
        "-P",
        "-m",
        "pip",
        "wheel",
        "-q",
        "--no-deps",
        "-w",
        str(wheels),
        str(root),
        log=log,
    )
    wheel = next(wheels.glob("spindle-*.whl"))
    _run(
        "mount",
        "-t",
        "overlay",
        "overlay",
        "-o",
        f"lowerdir={lower},upperdir={upper},workdir={ovl}",
        str(merged),
    )
    try:
        shutil.copyfile(wheel, merged / "tmp" / wheel.name)
        _run(
            "chroot",
            str(merged),
            f"{VENV}/bin/pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            f"/tmp/{wheel.name}",
            env=_chroot_env(),
            log=log,
        )
        (merged / "tmp" / wheel.name).unlink()
        entry = merged / "usr" / "local" / "bin" / "spindle-entrypoint"
        shutil.copyfile(ENTRYPOINT, entry)
        entry.chmod(0o755)
    finally:
        subprocess.run(["umount", str(merged)], capture_output=True)
    layer = work / "app.tar"
    # Whiteouts (char devices 0/0) would mean the install deleted base files: it must not.
    images.rootfs_layer(upper, layer, exclude=["tmp/*"])
    return layer


def config() -> images.ImageConfig:
    return images.ImageConfig(
        entrypoint=["/usr/bin/tini", "--", "/usr/local/bin/spindle-entrypoint"],
        env=(
            f"PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            f"JAVA_HOME={JAVA_HOME}",
            f"SPARK_HOME={SPARK_HOME}",
            "PYTHONSAFEPATH=1",
            "LANG=C.UTF-8",
            f"PYSPARK_PYTHON={VENV}/bin/python",
        ),
        user=f"{UID}:{UID}",
        workdir="/home/spindle",
        labels={"org.opencontainers.image.title": "spindle"},
    )


def ensure(root: Path, cache: Path | None = None) -> SpindleImage:
    """Build what is missing (base, app, archive) and return the image archive and name."""
    cache = (cache or default_cache()) / "images"
    cache.mkdir(parents=True, exist_ok=True)
    base = base_key(root)
    app = app_key(root, base)
    name = f"spindle:{app}"
    archive = cache / f"spindle-{app}.tar"
    if archive.exists():
        return SpindleImage(archive, name)
    # Several shells may build at once (./dev sync in each clone): one builds, the others wait.
    with (cache / ".spindle-image.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not archive.exists():
            print(
                f"[spindle-image] building {name} (log: {cache}/spindle-{app}.build.log)",
                file=sys.stderr,
            )
            _build(root, cache, base, app, archive)
    return SpindleImage(archive, name)


def _build(root: Path, cache: Path, base: str, app: str, archive: Path) -> None:
    name = f"spindle:{app}"
    log = cache / f"spindle-{app}.build.log"
    log.write_text("")
    # The base is kept twice: as its layer tar (for archives) and unpacked (the overlay's lower
    # dir when the app layer is rebuilt), 1.7 GB each, once per base.
    base_layer = cache / f"spindle-base-{base}.tar"
    base_rootfs = cache / f"spindle-base-{base}.rootfs"
    with tempfile.TemporaryDirectory(dir=cache, prefix=".build-") as tmp:
        work = Path(tmp)
        if not (base_layer.exists() and base_rootfs.is_dir()):
            shutil.rmtree(base_rootfs, ignore_errors=True)
            built = build_base(root, work, log)
            (work / "rootfs").replace(base_rootfs)
            built.replace(base_layer)
        app_layer = build_app(root, base_rootfs, work, log)
        images.write_image(
            archive,
            name=[f"docker.io/library/{name}", "docker.io/library/spindle:latest"],
            layers=[base_layer, app_layer],
            config=config(),
            created="1970-01-01T00:00:00Z",
        )
    # Keep the newest few app archives: several clones (engineers, CI) build their own sources
    # on one machine and share this cache. Bases are kept.
    apps = sorted(
        (p for p in cache.glob("spindle-*.tar") if not p.name.startswith("spindle-base-")),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in apps[KEEP_ARCHIVES:]:
        old.unlink(missing_ok=True)
        old.with_suffix(".build.log").unlink(missing_ok=True)


def main() -> int:
    root = Path(os.environ.get("SPINDLE_ROOT") or Path(__file__).resolve().parents[2])
    image = ensure(root)
    print(f"{image.archive} {image.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

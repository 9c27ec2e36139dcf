"""Per-PV file systems and their failures.

Each volume of the ``spindle-local`` StorageClass is its own ext4 file system in a sparse image
file, loop-mounted at ``<volumes dir>/<pv name>``: it has the claimed size (``df`` inside the Pod
shows it, a full one says ENOSPC), and one volume can fail while the others keep working, as
one disk of a JBOD broker does. ext4 on a loop device rather than a size-limited tmpfs: it is a
block-device file system like a broker's real disks (a journal, ``errors=`` behaviour, the
``shutdown`` ioctl that makes every later I/O fail as a dead disk does), and its data does not
live in the machine's memory.

``fail`` breaks a mounted volume in one of four ways, each with the errno a Pod writing to it
then sees; ``restore`` undoes the first three.
"""

from __future__ import annotations

import errno
import fcntl
import os
import subprocess
import time
from enum import StrEnum
from pathlib import Path

#: EXT4_IOC_SHUTDOWN = _IOR('X', 125, __u32) (linux/fs/ext4/ext4.h); flag 2 =
#: EXT4_GOING_FLAGS_NOLOGFLUSH: stop at once, as a disk that vanished would.
EXT4_IOC_SHUTDOWN = 0x8004587D
EXT4_GOING_FLAGS_NOLOGFLUSH = 2
FILLER = ".spindle-fill"


class Failure(StrEnum):
    """How a volume fails, and the errno writes then get."""

    READ_ONLY = "read-only"  # remounted read-only: EROFS
    FULL = "full"  # no free block left: ENOSPC
    PERMISSIONS = "permissions"  # root dir mode 000: EACCES for a non-root Pod
    IO_ERROR = "io-error"  # ext4 shut down: EIO on every access (cannot be restored)

    @property
    def errno(self) -> int:
        return {
            Failure.READ_ONLY: errno.EROFS,
            Failure.FULL: errno.ENOSPC,
            Failure.PERMISSIONS: errno.EACCES,
            Failure.IO_ERROR: errno.EIO,
        }[self]


def image_path(volumes_dir: Path, pv: str) -> Path:
    return volumes_dir / f"{pv}.img"


def mount_path(volumes_dir: Path, pv: str) -> Path:
    return volumes_dir / pv


def create(volumes_dir: Path, pv: str, size_bytes: int) -> Path:
    """Make and mount the file system of ``pv``; returns its mount point (the PV's path).
    Idempotent: a volume already mounted is left as it is."""
    image, mount = image_path(volumes_dir, pv), mount_path(volumes_dir, pv)
    if os.path.ismount(mount):
        return mount
    if not image.exists():
        tmp = image.with_name(image.name + ".tmp")
        with tmp.open("wb") as f:
            f.truncate(size_bytes)
        # -m 0: no blocks reserved for root (a broker's disk fills for everyone alike);
        # lazy init: a sparse image stays small and mkfs takes milliseconds.
        _run(
            "mkfs.ext4",
            "-q",
            "-F",
            "-m",
            "0",
            "-E",
            "lazy_itable_init=1,lazy_journal_init=1",
            str(tmp),
        )
        tmp.replace(image)
    mount.mkdir(exist_ok=True)
    _run("mount", "-o", "loop", str(image), str(mount))
    # A fresh file system is root's with mode 755; Pods run as other users. lost+found would
    # look like a stray entry in a log directory.
    mount.chmod(0o777)
    (mount / "lost+found").rmdir()
    return mount


def remove(volumes_dir: Path, pv: str) -> None:
    """Unmount (which also frees the loop device) and delete the volume's file system."""
    mount = mount_path(volumes_dir, pv)
    busy = (
        os.path.ismount(mount)
        and subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0
    )
    if busy:
        _run("umount", "-l", str(mount))
    if mount.exists():
        mount.rmdir()
    image_path(volumes_dir, pv).unlink(missing_ok=True)


def fail(volumes_dir: Path, pv: str, failure: Failure) -> None:
    """Break the mounted file system of ``pv`` for real (see Failure)."""
    mount = mount_path(volumes_dir, pv)
    if not os.path.ismount(mount):
        raise FileNotFoundError(f"volume {pv} is not mounted at {mount}")
    if failure is Failure.READ_ONLY:
        remount_read_only(mount)
    elif failure is Failure.FULL:
        _fill(mount)
    elif failure is Failure.PERMISSIONS:
        mount.chmod(0)
    else:
        fd = os.open(mount, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, EXT4_GOING_FLAGS_NOLOGFLUSH.to_bytes(4, "little"))
        finally:
            os.close(fd)


def remount_read_only(mount: str | Path, *, patience: float = 30.0) -> None:
    """Remount the file system at ``mount`` read-only, as an ext4 with ``errors=remount-ro``
    does on a disk error.

    The kernel refuses a remount (EBUSY, "mount point is busy") while any file on the mount is
    open for writing. A broker opens a segment only for the length of an append, so a remount
    that lands in one is tried again until it lands between two (fresh-clone CI saw one land
    in an append under a running producer). Any other refusal, or still busy after
    ``patience`` seconds, raises OSError.
    """
    command = ("mount", "-o", "remount,ro", str(mount))
    deadline = time.monotonic() + patience
    while True:
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode == 0:
            return
        if "busy" not in done.stderr or time.monotonic() > deadline:
            raise OSError(f"{' '.join(command)} failed: {done.stderr.strip()}")
        time.sleep(0.01)


def restore(volumes_dir: Path, pv: str, failure: Failure) -> None:
    """Undo ``fail`` (not possible for IO_ERROR: a shut-down ext4 must be unmounted)."""
    mount = mount_path(volumes_dir, pv)
    if failure is Failure.READ_ONLY:
        _run("mount", "-o", "remount,rw", str(mount))
    elif failure is Failure.FULL:
        (mount / FILLER).unlink(missing_ok=True)
    elif failure is Failure.PERMISSIONS:
        mount.chmod(0o777)
    else:
        raise ValueError("an ext4 shut down by io-error cannot be restored while mounted")


def _fill(mount: Path) -> None:
    """Allocate every free block to one file (fallocate: instant, no data written)."""
    filler = mount / FILLER
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        free = os.statvfs(mount)
        size = free.f_bavail * free.f_frsize
        # Metadata for the file's own extents comes out of the same free space: step down
        # until the allocation fits, then take whatever is left block by block.
        while size > 0:
            try:
                os.posix_fallocate(fd, 0, size)
                break
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                size -= 1 << 20
        offset = os.fstat(fd).st_size
        while True:
            try:
                os.posix_fallocate(fd, offset, 4096)
                offset += 4096
            except OSError:
                break
    finally:
        os.close(fd)


def _run(*command: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise OSError(f"{' '.join(command)} failed: {done.stderr.strip()}")

"""Files under the runs folder: written to a temporary name, fsynced, then renamed, and only
then recorded, so the ledger never names a file that is not complete on disk.

Nothing is written through a link. A temporary file is created with ``O_EXCL`` (and
``O_NOFOLLOW``) under an unpredictable name in the folder of its target, relative to that
folder opened without following links, then renamed over the target: a link found at the
target is replaced, never followed, and a folder that is itself a link is refused. Reads of
loop's own files do not follow links either and take only regular files, so a FIFO or
``/dev/zero`` planted in ``runs/`` cannot hang a reader.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import re
import secrets
import stat
import sys
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from loop.core.errors import LoopError
from loop.core.hashing import bytes_sha
from loop.core.leftovers import process_alive

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
DIRECTORY = getattr(os, "O_DIRECTORY", 0)
FLAGS = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
# POSIX: every step relative to a folder descriptor, so the folder cannot be swapped midway
# (os.replace takes src_dir_fd and dst_dir_fd as os.rename does, but only os.rename is listed)
DIR_FD = bool(DIRECTORY) and {os.open, os.rename, os.unlink} <= os.supports_dir_fd
# .NAME.PID-TOKEN.tmp: the pid tells a stale temporary file (its writer is gone) from a live one
TEMP = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)(-[0-9a-f]{16})?\.tmp$")  # also the older .NAME.PID.tmp
RUNS_FOLDERS = ("artifacts", "artifacts/tensors", "cache", "generations", "candidates", "quarantine", "arrays")
MAX_NAME_BYTES = 200  # leaves room for the temporary name's additions under a 255-byte limit


class StoreFault(LoopError):
    """The runs folder or the disk under it failed: full, damaged, or a link where loop writes.
    Not the user's input, so the command line exits 1, not 2."""


class StoreWarning(UserWarning):
    """A file under ``runs/`` was not what its name says; loop went on without it."""


def safe_component(name: str, what: str = "name") -> str:
    """``name`` if it can be one path component as it is, else a :class:`LoopError`: user names
    never become paths unchecked. Unicode is fine; separators, NUL, control characters, ``..``
    and a leading dot (hidden files, ``.``/``..``) are not."""
    bad = ("/", "\\", "\x00", "..", *tuple(s for s in (os.sep, os.altsep) if s))
    if (
        not name
        or name.startswith(".")
        or any(b in name for b in bad)
        or any(ord(c) < 32 for c in name)
        or len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES
    ):
        raise LoopError(f"{what} {name!r} cannot name a file (no separators, NUL, '..' or leading dot)")
    return name


def check_runs(runs: Path) -> None:
    """Refuse a runs folder whose subfolders are links, before anything is written."""
    for sub in RUNS_FOLDERS:
        if (Path(runs) / sub).is_symlink():
            raise LoopError(
                f"{Path(runs) / sub} is a symbolic link; loop does not write through links (make it a folder)",
                field="--runs",
            )


@contextmanager
def _folder(folder: Path) -> Iterator[int | None]:
    """The folder, opened without following a link (a descriptor), or None where the platform
    has no descriptor-relative calls (then the link check is by path)."""
    folder.mkdir(parents=True, exist_ok=True)
    if not DIR_FD:
        if folder.is_symlink():
            raise StoreFault(f"{folder} is a symbolic link; loop does not write through links")
        yield None
        return
    try:
        fd = os.open(folder, os.O_RDONLY | DIRECTORY | NOFOLLOW | FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise StoreFault(f"{folder} is a symbolic link; loop does not write through links") from None
        raise
    try:
        yield fd
    finally:
        os.close(fd)


def _at(folder: Path, dir_fd: int | None, name: str) -> str:
    return name if dir_fd is not None else str(folder / name)


def temp_name(name: str) -> str:
    return f".{name}.{os.getpid()}-{secrets.token_hex(8)}.tmp"


def atomic_write(path: Path, data: bytes, durable: bool = True) -> Path:
    """Write ``data`` to ``path`` all at once: a crash or a full disk leaves the old file (or
    none), and no temporary file behind. ``durable=False``: no fsync, for a file that only saves
    time and is checked against its hashes when read (a compile cache entry): after a power cut
    it may be torn, which its reader takes as a miss."""
    with _folder(path.parent) as dir_fd:
        tmp = _at(path.parent, dir_fd, temp_name(path.name))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | FLAGS, 0o644, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                if durable:
                    f.flush()
                    os.fsync(f.fileno())
            os.replace(tmp, _at(path.parent, dir_fd, path.name), src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            _unlink(tmp, dir_fd)
            raise
        if durable and dir_fd is not None:  # the rename itself is made durable; Windows cannot open a folder for it
            os.fsync(dir_fd)
    return path


def atomic_writes(folder: Path, files: Mapping[str, bytes]) -> None:
    """Write many files into ``folder`` as :func:`atomic_write` writes one, made durable together:
    every temporary file written, one flush of the file system (Linux's ``syncfs``), the renames,
    and one flush more: two disk flushes for the lot, not two a file (a generation's arrays are
    hundreds of small files). Where there is no ``syncfs``, each file and the folder are fsynced."""
    if not files:
        return
    with _folder(folder) as dir_fd:
        together = dir_fd is not None and _libc() is not None
        temps = {name: _at(folder, dir_fd, temp_name(name)) for name in files}
        try:
            for name, data in files.items():
                fd = os.open(temps[name], os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | FLAGS, 0o644, dir_fd=dir_fd)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    if not together:
                        f.flush()
                        os.fsync(f.fileno())
            if together:
                _syncfs(dir_fd)  # type: ignore[arg-type]  # together: a descriptor
            for name, tmp in temps.items():
                os.replace(tmp, _at(folder, dir_fd, name), src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            for tmp in temps.values():
                _unlink(tmp, dir_fd)
            raise
        if dir_fd is not None:
            _syncfs(dir_fd) if together else os.fsync(dir_fd)


def _syncfs(fd: int) -> None:
    """Flush the whole file system ``fd`` is on to disk (Linux), as fsync does one file."""
    if _libc().syncfs(fd) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


@functools.cache
def _libc() -> Any:
    """The C library where it has ``syncfs`` (Linux), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    return libc if hasattr(libc, "syncfs") else None


def _unlink(name: str, dir_fd: int | None) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass


def read_regular(path: Path, follow: bool = False) -> bytes:
    """The bytes of a regular file; a link (unless ``follow``), FIFO or device is an OSError."""
    with open_regular(path, follow) as f:
        return f.read()


@contextmanager
def open_regular(path: Path, follow: bool = False) -> Iterator[BinaryIO]:
    """A regular file opened to read; a link (unless ``follow``), FIFO or device is an OSError,
    raised at once (a FIFO is never waited on)."""
    flags = os.O_RDONLY | FLAGS | getattr(os, "O_NONBLOCK", 0) | (0 if follow else NOFOLLOW)
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        yield f


def read_verified(path: Path, sha: str) -> bytes | None:
    """The file's bytes if their SHA-256 starts with ``sha`` (a full hash, or the 32-digit
    prefix a file is named by); None if it is missing, a link, or anything else."""
    try:
        data = read_regular(path)
    except OSError:
        return None
    return data if sha and bytes_sha(data).startswith(sha) else None


def store_verified(path: Path, sha: str, data: bytes) -> Path:
    """Keep ``data`` at ``path``, named by content: a file already there is kept only if it
    holds these very bytes; anything else there (a link, a swapped or flipped file) is replaced."""
    if bytes_sha(data) != sha:
        raise StoreFault(f"{path.name}: the bytes to store do not match their hash {sha[:12]}; not stored")
    if read_verified(path, sha) is not None:
        return path
    if os.path.lexists(path):
        warnings.warn(f"{path} did not match its hash; rewritten", StoreWarning, stacklevel=2)
    return atomic_write(path, data)


def artifact_path(runs: Path, sha: str, suffix: str) -> Path:
    """Where the artifact of hash ``sha`` lies: absolute (the ledger records it), with the runs
    folder's own link, if it is one, resolved, but never a link inside it."""
    return runs_artifact(runs, f"{sha[:32]}{suffix}")


def runs_artifact(runs: Path, name: str) -> Path:
    """The file ``name`` in ``runs/artifacts`` (a name read back from the ledger stays a name)."""
    return Path(runs).resolve() / "artifacts" / safe_component(name, "artifact name")


def stale_temps(folder: Path) -> list[Path]:
    """Temporary files in ``folder`` whose writer is gone."""
    out = []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    for name in names:
        match = TEMP.match(name)
        if match and not process_alive(int(match["pid"])):
            out.append(folder / name)
    return sorted(out)


def remove_stale_temps(runs: Path) -> list[Path]:
    """Remove what killed writers left under ``runs``' folders (a crash mid-write, a full disk)."""
    removed = []
    for sub in RUNS_FOLDERS:
        for path in stale_temps(Path(runs) / sub):
            try:
                path.unlink()
                removed.append(path)
            except OSError:
                pass
    return removed


NETWORK_FILESYSTEMS = (
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "fuse.sshfs",
    "9p",
    "afs",
    "ceph",
    "glusterfs",
    "lustre",
    "fuse.gcsfuse",
    "fuse.s3fs",
    "davfs",
)


def filesystem_type(path: Path, mounts: str | None = None) -> str | None:
    """The type of the filesystem holding ``path``, from /proc/mounts (longest mount point)."""
    if mounts is None:
        try:
            mounts = Path("/proc/mounts").read_text()
        except OSError:
            return None
    target, best, kind = str(Path(path).resolve()), "", None
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(best):
            best, kind = point, parts[2]
    return kind


def nearly_full(folder: Path) -> bool:
    """Less than 1 MiB left on the disk holding ``folder``."""
    try:
        stat = os.statvfs(folder)
    except (OSError, AttributeError):  # Windows has no statvfs
        return False
    return stat.f_bavail * stat.f_frsize < 2**20

"""Files under the runs folder: written to a temporary name, fsynced, then renamed, and only
then recorded, so the ledger never names a file that is not complete on disk."""
from __future__ import annotations

import os
from pathlib import Path


def atomic_write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    if os.name != "nt":  # the rename itself is made durable; Windows cannot open a folder for it
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return path


def store_artifact(runs: Path, sha: str, suffix: str, data: bytes) -> Path:
    """Content-addressed: the same bytes are stored once."""
    path = (runs / "artifacts" / f"{sha[:32]}{suffix}").resolve()
    if not path.exists():
        atomic_write(path, data)
    return path

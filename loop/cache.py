"""Content-addressed store of compile results under ``<runs>/cache/``.

The key covers everything that changes what a compile produces: the float ONNX bytes, the
compile options (less ``threads`` and ``timeout_s``, which change only how fast), the
calibration frames, the backend and the versions of the tools behind it. A hit is one file
holding the pickled :class:`CompileResult`, artifact bytes included, behind a checksum, so a
torn or flipped file reads as a miss and is removed rather than trusted.
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import pickle
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from loop.compilers.base import CompileOptions, CompileResult
from loop.errors import LoopError
from loop.frames import frames_sha
from loop.store import atomic_write

MAGIC = b"loop-cache-1\n"
SPEED_ONLY = ("threads", "timeout_s")  # options that change how fast, not what comes out
DIGEST = hashlib.sha256().digest_size


@dataclass
class Entry:
    """One cached compile; ``info`` is the small sidecar (backend, artifact sha, sizes)."""

    key: str
    size: int
    mtime: float
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def backend(self) -> str | None:
        return self.info.get("backend")


def calibration_sha(frames: np.ndarray) -> str:
    return frames_sha(frames)


def options_json(options: CompileOptions) -> str:
    data = {k: v for k, v in dataclasses.asdict(options).items() if k not in SPEED_ONLY}
    return json.dumps(data, sort_keys=True, default=repr, separators=(",", ":"))


def cache_key(model: bytes, calibration: np.ndarray, options: CompileOptions, backend: str,
              versions: dict[str, str]) -> str:
    return key_of(hashlib.sha256(model).hexdigest(), calibration_sha(calibration), options, backend, versions)


def key_of(model_sha: str, calib_sha: str, options: CompileOptions, backend: str, versions: dict[str, str]) -> str:
    """The key from hashes the caller already holds (the ONNX bytes' and the frames')."""
    h = hashlib.sha256()
    # Length-prefixed parts, so no two different inputs can concatenate to the same stream.
    for part in (model_sha.encode(), options_json(options).encode(), calib_sha.encode(),
                 backend.encode(), json.dumps(versions, sort_keys=True).encode()):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


class Cache:
    """The cache in one folder; every method is safe against concurrent sweeps."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @classmethod
    def for_runs(cls, runs: Path) -> "Cache":
        return cls(Path(runs) / "cache")

    def _blob(self, key: str) -> Path:
        return self.root / f"{key}.pkl"

    def _sidecar(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def lookup(self, key: str) -> CompileResult | None:
        """The stored result, as a fresh copy marked ``cache_hit``; None on a miss."""
        try:
            data = self._blob(key).read_bytes()
        except FileNotFoundError:
            return None
        result = _decode(data)
        if result is None:
            self.remove(key)
            return None
        _touch(self._blob(key))  # pruning drops the least recently used first
        result.cache_hit = True
        return result

    def store(self, key: str, result: CompileResult) -> bool:
        """Keep ``result`` if it succeeded; failures are never cached (they may be transient)."""
        if not result.ok or result.artifact is None:
            return False
        stored = copy.copy(result)
        stored.cache_hit = False
        atomic_write(self._blob(key), _encode(stored))
        atomic_write(self._sidecar(key), json.dumps(_sidecar(result)).encode())
        return True

    def remove(self, key: str) -> None:
        for path in (self._blob(key), self._sidecar(key)):
            path.unlink(missing_ok=True)

    def entries(self) -> list[Entry]:
        """Every entry, oldest (least recently used) first."""
        out = [e for e in (self._entry(p) for p in self.root.glob("*.pkl")) if e is not None]
        return sorted(out, key=lambda e: (e.mtime, e.key))

    def _entry(self, blob: Path) -> Entry | None:
        key = blob.stem
        try:
            stat = blob.stat()
        except FileNotFoundError:  # pruned by another process meanwhile
            return None
        try:
            side = self._sidecar(key)
            info, size = json.loads(side.read_text()), stat.st_size + side.stat().st_size
        except (OSError, ValueError):
            info, size = {}, stat.st_size
        return Entry(key, size, stat.st_mtime, info)

    def prune(self, older_than_s: float | None = None, max_bytes: int | None = None) -> list[Entry]:
        """Remove entries unused for ``older_than_s``, then the oldest until the cache fits
        in ``max_bytes``. Returns what was removed."""
        entries, removed = self.entries(), []
        if older_than_s is not None:
            cutoff = time.time() - older_than_s
            removed = [e for e in entries if e.mtime < cutoff]
            entries = [e for e in entries if e.mtime >= cutoff]
        total = sum(e.size for e in entries)
        while max_bytes is not None and entries and total > max_bytes:
            oldest = entries.pop(0)
            total -= oldest.size
            removed.append(oldest)
        for entry in removed:
            self.remove(entry.key)
        return removed


SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
BYTES = {"b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_age(text: str) -> float:
    """``90``, ``90s``, ``15m``, ``12h``, ``7d``, ``2w`` as seconds (for ``loop cache``)."""
    return _scaled(text, SECONDS, "s", "an age like 12h or 7d")


def parse_size(text: str) -> int:
    """``500M``, ``2G``, ``1024`` (bytes) as bytes, binary units (for ``loop cache``)."""
    return int(_scaled(text.lower().removesuffix("ib").removesuffix("b") or "0", BYTES, "b", "a size like 500M or 2G"))


def _scaled(text: str, units: dict[str, int], default: str, what: str) -> float:
    raw = text.strip().lower()
    unit = raw[-1] if raw and raw[-1] in units else default
    try:
        value = float(raw[:-1] if raw and raw[-1] in units else raw)
    except ValueError:
        raise LoopError(f"'{text}' is not {what}") from None
    if value < 0:
        raise LoopError(f"'{text}' is not {what}")
    return value * units[unit]


def _encode(result: CompileResult) -> bytes:
    payload = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
    return MAGIC + hashlib.sha256(payload).digest() + payload


def _decode(data: bytes) -> CompileResult | None:
    """The result in ``data``, or None when it is torn, flipped or from another format."""
    head = len(MAGIC) + DIGEST
    digest, payload = data[len(MAGIC):head], data[head:]
    if not data.startswith(MAGIC) or hashlib.sha256(payload).digest() != digest:
        return None
    try:
        result = pickle.loads(payload)
    except Exception:  # noqa: BLE001 - e.g. a class renamed since: a miss, not a crash
        return None
    return result if isinstance(result, CompileResult) and result.ok else None


def _sidecar(result: CompileResult) -> dict[str, Any]:
    artifact = result.artifact
    assert artifact is not None
    return {"backend": artifact.backend, "artifact_sha": artifact.sha, "artifact_bytes": len(artifact.data),
            "compiled_on": result.compiled_on, "host": result.info.get("host"),
            "versions": result.info.get("versions", {}), "stages": result.stages, "stored": time.time()}


def _touch(path: Path) -> None:
    try:
        os.utime(path)
    except OSError:  # read-only cache or pruned meanwhile: the hit is still good
        pass

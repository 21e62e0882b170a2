"""Content-addressed store of compile results under ``<runs>/cache/``.

The key covers everything that changes what a compile produces: the float ONNX bytes, the
compile options (less ``threads`` and ``timeout_s``, which change only how fast), the
calibration frames, the backend and the versions of the tools behind it.

Beside compiles it keeps quantized models (``scale_grid``'s input: optimized once per base and
options, then patched per candidate), keyed by the same parts less the edits made after
quantization, under a key of their own kind (:func:`quantized_key`); same files, same checks.

An entry is data, never code: ``KEY.meta.json`` holds the result's fields as JSON under a
header line with the JSON's hash, and ``KEY.blob`` the artifact's bytes, whose hashes the
JSON gives (:mod:`loop.store.codec`). The JSON also names the key it was stored under, so an
entry copied under another key does not pass. A hit is checked in full when read; a torn,
flipped or swapped entry is a miss with a one-line warning, and is removed, so the compile
that follows writes it anew. The hashes catch damage and mix-ups, not forgery: whoever can
write the cache can make it hold a wrong result (never run code), as with the ledger itself.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from loop.core.errors import LoopError
from loop.core.hashing import parts_sha
from loop.core.vocab import CompileOptions, CompileResult, Quantized
from loop.store.codec import FORMAT, QUANTIZED, Damaged, body, decode, decode_quantized, encode, encode_quantized
from loop.store.files import StoreWarning, atomic_write, read_regular, safe_component
from loop.store.shared import FOLDER, TensorStore, remove_unread

SPEED_ONLY = ("threads", "timeout_s")  # options that change how fast, not what comes out
META, BLOB = ".meta.json", ".blob"
LEGACY = (".pkl", ".json")  # the pickled format before; never read, `loop doctor` removes it


T = TypeVar("T")


@dataclass
class Entry:
    """One cached compile; ``info`` is its summary (backend, artifact sha, sizes)."""

    key: str
    size: int
    mtime: float
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def backend(self) -> str | None:
        return self.info.get("backend")


def options_json(options: CompileOptions) -> str:
    data = options.model_dump(exclude=set(SPEED_ONLY))
    return json.dumps(data, sort_keys=True, default=repr, separators=(",", ":"))


def key_of(model_sha: str, calib_sha: str, options: CompileOptions, backend: str, versions: dict[str, str]) -> str:
    """The key from hashes the caller already holds (the ONNX bytes' and the frames')."""
    # Length-prefixed parts, so no two different inputs can concatenate to the same stream.
    return parts_sha(
        model_sha.encode(),
        options_json(options).encode(),
        calib_sha.encode(),
        backend.encode(),
        json.dumps(versions, sort_keys=True).encode(),
    )


def quantized_key(
    model_sha: str, calib_sha: str, options: CompileOptions, backend: str, versions: dict[str, str]
) -> str:
    """The key of the quantized model a compile with ``options`` starts from: its options less
    the edits made after quantization, under a part no compile key has."""
    return parts_sha(b"quantized", key_of(model_sha, calib_sha, options.quantizing(), backend, versions).encode())


class Cache:
    """The cache in one folder; every method is safe against concurrent sweeps."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @classmethod
    def for_runs(cls, runs: Path) -> Cache:
        return cls(Path(runs) / "cache")

    @property
    def tensors(self) -> TensorStore:
        """Where its entries' artifacts keep their large tensors: the runs folder's shared ones."""
        return TensorStore(self.root.parent / "artifacts" / FOLDER)

    def path(self, key: str, suffix: str) -> Path:
        return self.root / f"{safe_component(key, 'cache key')}{suffix}"

    def lookup(self, key: str) -> CompileResult | None:
        """The stored result, as a fresh copy marked ``cache_hit``; None on a miss."""
        result = self._checked(key, lambda k, m, b: verified(k, m, b, self.tensors))
        if result is not None:
            result.cache_hit = True
        return result

    def lookup_quantized(self, key: str) -> Quantized | None:
        """A stored quantized model, checked in full as a compile is; None on a miss."""
        return self._checked(key, verified_quantized)

    def quantized_source(self, key: str) -> str | None:
        """The float model's path a stored quantized model names, read from its entry's JSON
        alone (checked against its header's hash, its parts' sizes against its bytes' file, which
        whoever reads the model checks in full): None on a miss, damage, or an entry that holds
        its float model's bytes. A sweep's process learns of a base this way without reading it."""
        try:
            data = body(read_regular(self.path(key, META)), QUANTIZED)
            size = self.path(key, BLOB).stat().st_size
            sizes = sum(int(p["size"]) for p in data["parts"])
        except (OSError, LoopError, Damaged, KeyError, TypeError, ValueError):
            return None
        path = data.get("source_path")
        if data.get("extra", {}).get("key") != key or sizes != size or not isinstance(path, str):
            return None
        return path

    def _checked(self, key: str, verify: Callable[[str, bytes, bytes], T]) -> T | None:
        """The entry ``key`` read and checked by ``verify``; None on a miss, or on damage (said)."""
        try:
            meta, blob = read_regular(self.path(key, META)), read_regular(self.path(key, BLOB))
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._damaged(key, f"unreadable ({exc.strerror or exc})")
            return None
        try:
            found = verify(key, meta, blob)
        except Damaged as exc:
            self._damaged(key, str(exc))
            return None
        _touch(self.path(key, META))  # pruning drops the least recently used first
        return found

    def store_quantized(self, key: str, quantized: Quantized) -> bool:
        """Keep a quantized model; a write that fails is a warning, as for a compile."""
        summary = {"backend": quantized.backend, "kind": "quantized", "stages": quantized.stages, "stored": time.time()}
        return self.store_encoded(key, *encode_quantized(quantized, {"key": key, "summary": summary}))

    def _damaged(self, key: str, why: str) -> None:
        warnings.warn(
            f"cache entry {key[:16]}: {why}; a miss, compiled again and rewritten", StoreWarning, stacklevel=3
        )
        self.remove(key)

    def store(self, key: str, result: CompileResult) -> bool:
        """Keep ``result`` if it succeeded; failures are never cached (they may be transient).
        The cache only saves time, so a write that fails (a full disk) is a warning."""
        if not result.ok or result.artifact is None:
            return False
        entry = self.encoded(key, result)
        return entry is not None and self.store_encoded(key, *entry)

    def encoded(self, key: str, result: CompileResult) -> tuple[bytes, bytes] | None:
        """:func:`entry_bytes` with its artifact's large tensors written beside this cache's runs
        folder; None, said in a warning, where they cannot be (a full disk, a link in the way)."""
        try:
            return entry_bytes(key, result, self.tensors)
        except (OSError, LoopError) as exc:
            warnings.warn(f"cache entry {key[:16]} not stored: {exc}", StoreWarning, stacklevel=2)
            return None

    def store_encoded(self, key: str, meta: bytes, blob: bytes) -> bool:
        """Keep an entry :func:`entry_bytes` made (a patch child makes its own: the parent then
        stores its very bytes rather than encoding the result a second time)."""
        try:
            # no fsync: an entry only saves time, and one torn by a power cut is a miss (its hashes)
            atomic_write(self.path(key, BLOB), blob, durable=False)
            atomic_write(self.path(key, META), meta, durable=False)  # last: an entry without it is not one
        except (OSError, LoopError) as exc:
            warnings.warn(f"cache entry {key[:16]} not stored: {exc}", StoreWarning, stacklevel=2)
            self.remove(key)
            return False
        return True

    def remove(self, key: str) -> None:
        for suffix in (META, BLOB, *LEGACY):
            try:
                self.path(key, suffix).unlink(missing_ok=True)
            except OSError:
                pass

    def entries(self) -> list[Entry]:
        """Every entry, oldest (least recently used) first."""
        metas = self.root.glob(f"*{META}") if self.root.is_dir() else []
        out = [e for e in (self._entry(p) for p in metas) if e is not None]
        return sorted(out, key=lambda e: (e.mtime, e.key))

    def _entry(self, meta: Path) -> Entry | None:
        key = meta.name[: -len(META)]
        try:
            stat = meta.lstat()
            size = stat.st_size + self.path(key, BLOB).lstat().st_size
        except (OSError, LoopError):  # pruned by another process meanwhile, or half written
            return None
        info: dict[str, Any] = {}
        for fmt in (FORMAT, QUANTIZED):
            try:
                info = body(read_regular(meta), fmt)["extra"].get("summary", {})
                break
            except (OSError, Damaged, AttributeError):
                continue
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
        if removed:
            remove_unread(self.root.parent, self._tensors_read())
        return removed

    def _tensors_read(self) -> set[str]:
        """The shared tensors this cache's entries read (each entry's JSON names them)."""
        reads: set[str] = set()
        for meta in self.root.glob(f"*{META}") if self.root.is_dir() else []:
            try:
                head = body(read_regular(meta)).get("artifact") or {}
            except (OSError, Damaged):
                continue
            reads.update(str(n) for n in head.get("tensors", []) if isinstance(n, str))
        return reads


def verified(key: str, meta: bytes, blob: bytes, tensors: TensorStore | None = None) -> CompileResult:
    """The result of an entry that passes every check for ``key``; :class:`Damaged` otherwise."""
    result, extra = decode(meta, blob, tensors)
    if extra.get("key") != key:
        raise Damaged("it was stored under another key (a copied entry)")
    if not result.ok or result.artifact is None:
        raise Damaged("it holds no successful compile")
    if result.artifact.path is not None:  # an entry holds its artifact; a file's path is a worker's word
        raise Damaged("it names a file rather than holding its artifact")
    return result


def verified_quantized(key: str, meta: bytes, blob: bytes) -> Quantized:
    """The quantized model of an entry that passes every check for ``key``; :class:`Damaged` otherwise."""
    quantized, extra = decode_quantized(meta, blob)
    if extra.get("key") != key:
        raise Damaged("it was stored under another key (a copied entry)")
    return quantized


def is_quantized(meta: bytes) -> bool:
    return meta.startswith(f"{QUANTIZED} ".encode())


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


def entry_bytes(key: str, result: CompileResult, tensors: TensorStore | None = None) -> tuple[bytes, bytes]:
    """A successful compile's entry as the cache keeps it under ``key``: meta and blob (an ONNX
    artifact's large tensors written to ``tensors``, where given)."""
    stored = dataclasses.replace(result, cache_hit=False, quantized=None)
    return encode(stored, {"key": key, "summary": _summary(result)}, tensors)


def _summary(result: CompileResult) -> dict[str, Any]:
    artifact = result.artifact
    assert artifact is not None
    return {
        "backend": artifact.backend,
        "artifact_sha": artifact.sha,
        "artifact_bytes": len(artifact.data),
        "compiled_on": result.compiled_on,
        "host": result.info.host,
        "versions": result.info.versions,
        "stages": result.stages,
        "stored": time.time(),
    }


def _touch(path: Path) -> None:
    try:
        os.utime(path, follow_symlinks=False)
    except (OSError, NotImplementedError):  # read-only cache or pruned meanwhile: the hit is still good
        pass

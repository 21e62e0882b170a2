"""ONNX artifacts that share their unchanged weights: one file a tensor, named by its hash.

A scale-only candidate (``scale_grid``, a QZO probe) keeps its base's integer kernels; stored
whole, each candidate was a copy of the model twice over (its artifact and its cache entry):
268.9 MB each at 1.1 GB of float weights. Stored split, an artifact (and the cache entry of its
compile) is its graph, with every tensor of :data:`SHARE_FROM` bytes or more in
``runs/artifacts/tensors/{sha256}``, written once whoever needs it. The graph names each such
tensor as ONNX's external data does (``location: tensors/{sha256}``), so ONNX Runtime opens
``runs/artifacts/x.onnx`` as it lies.

An artifact keeps its identity: the hash of its bytes as compiled. A split file is joined
(each tensor read back into the graph) and the join must hash to the recorded hash, so a
swapped or damaged tensor file is caught as a whole artifact's would be. A model whose bytes
do not come back exactly from a join is stored whole.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from loop.core.hashing import bytes_sha
from loop.store.files import StoreFault, StoreWarning, artifact_path, atomic_write, read_regular, store_verified

if TYPE_CHECKING:
    import onnx

SHARE_FROM = 16 * 1024  # a tensor this large goes to the tensor store; smaller ones (most scales) stay in the graph
SPLIT_FROM = 64 * 1024  # an artifact smaller than this is stored whole: nothing worth sharing
FOLDER = "tensors"  # in runs/artifacts, so that a split artifact's locations stay inside its folder
JOIN_BELOW = 64 << 20  # a file this large is a whole artifact, never a graph to join
NAMED = re.compile(r"[0-9a-f]{64}")  # a stored tensor's name: never a path out of its folder


class TensorStore:
    """Tensors named by their SHA-256 in one folder (``runs/artifacts/tensors``)."""

    def __init__(self, folder: Path, durable: bool = False, mend: bool = True) -> None:
        """``durable``: each tensor written is flushed to disk (a stored artifact's: the ledger
        records it as done); ``mend``: a failed join removes what does not match its name
        (:meth:`drop_damaged`), which ``loop doctor`` without ``--repair`` never does."""
        self.folder, self.durable, self.mend = Path(folder), durable, mend

    @classmethod
    def for_runs(cls, runs: Path) -> TensorStore:
        return cls(Path(runs).resolve() / "artifacts" / FOLDER)

    def put(self, data: bytes) -> str:
        """Keep ``data``; its hash. A file of that name and size already there is kept: the
        join of any artifact that reads it is checked against the artifact's own hash."""
        sha = bytes_sha(data)
        path = self.folder / sha
        try:
            if path.stat().st_size == len(data) and not path.is_symlink():
                os.utime(path)  # in use again: :func:`remove_unread` spares what was written of late
                return sha
        except FileNotFoundError:
            pass
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data, durable=self.durable)  # a torn one fails its artifact's join check
        return sha

    def sync(self, shas: list[str]) -> None:
        """Flush these files to disk (written by a store that did not)."""
        for sha in shas:
            fd = os.open(self.folder / sha, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def get(self, sha: str) -> bytes:
        return read_regular(self.folder / sha)

    def drop_damaged(self, shas: list[str]) -> None:
        """Remove each of these files that does not hash to its name (flipped, truncated,
        swapped), so the next :meth:`put` writes it anew; called when a join fails its check."""
        if not self.mend:
            return
        for sha in shas:
            try:
                if bytes_sha(self.get(sha)) != sha:
                    (self.folder / sha).unlink()
            except OSError:
                pass


def _shared(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    from onnx.external_data_helper import _get_all_tensors

    for tensor in _get_all_tensors(model):
        if len(tensor.raw_data) >= SHARE_FROM and tensor.data_location != tensor.EXTERNAL:
            yield tensor


_ONCE: list[dict[int, tuple[bytes, Path, bytes | None]]] = []  # the open split_once blocks' splits


@contextlib.contextmanager
def split_once() -> Iterator[None]:
    """Within it, the same bytes split again for the same folder give the graph already made: a
    worker stores one artifact as its cache entry and as its file, and a split parses the model
    and serializes it twice (1.6 s at 268 MB)."""
    memo: dict[int, tuple[bytes, Path, bytes | None]] = {}
    _ONCE.append(memo)
    try:
        yield
    finally:
        _ONCE.remove(memo)


def split(data: bytes, store: TensorStore) -> bytes | None:
    """``data`` (an ONNX model's bytes) as a graph whose large tensors lie in ``store``; None
    where there is nothing to share, the bytes are no ONNX model, or a join would not give
    them back exactly (then they are stored whole)."""
    folder = store.folder.resolve()
    for memo in _ONCE:
        done = memo.get(id(data))
        if done is not None and done[0] is data and done[1] == folder:
            if done[2] is not None and store.durable:  # written before by a store that did not flush
                store.sync(names(done[2]))
            return done[2]
    graph = _split(data, store)
    for memo in _ONCE:
        memo[id(data)] = (data, folder, graph)
    return graph


def _split(data: bytes, store: TensorStore) -> bytes | None:
    import onnx

    if len(data) < SPLIT_FROM:
        return None
    try:
        model = onnx.load_from_string(data)
    except Exception:  # a HEF named .onnx, a damaged file: stored whole, as it came
        return None
    moved = [(t, t.raw_data) for t in _shared(model)]
    # a tensor that states its location (DEFAULT) would not come back as it was: stored whole
    if not moved or any(t.HasField("data_location") for t, _ in moved):
        return None
    for tensor, raw in moved:
        tensor.ClearField("raw_data")
        tensor.data_location = tensor.EXTERNAL
        entry = tensor.external_data.add()
        entry.key, entry.value = "location", f"{FOLDER}/{bytes_sha(raw)}"
    graph = model.SerializeToString()
    for tensor, raw in moved:  # put back as join does, to check the round trip on the very bytes
        _inline(tensor, raw)
    if len(graph) >= JOIN_BELOW or model.SerializeToString() != data:
        return None
    del model
    for _, raw in moved:
        store.put(raw)
    return graph


def _inline(tensor: onnx.TensorProto, raw: bytes) -> None:
    tensor.ClearField("external_data")
    tensor.ClearField("data_location")
    tensor.raw_data = raw


def join(graph: bytes, store: TensorStore) -> bytes | None:
    """The whole model of a graph :func:`split` wrote; None if it names no stored tensor (it is
    no split graph) or a tensor is missing or unreadable."""
    import onnx

    try:
        model = onnx.load_from_string(graph)
    except Exception:
        return None
    found = False
    from onnx.external_data_helper import _get_all_tensors

    for tensor in _get_all_tensors(model):
        name = _stored_name(tensor)
        if name is None:
            continue
        try:
            raw = store.get(name)
        except (OSError, ValueError):
            return None
        _inline(tensor, raw)
        found = True
    return model.SerializeToString() if found else None


def store_artifact(runs: Path, sha: str, suffix: str, data: bytes) -> Path:
    """Content-addressed under ``runs/artifacts``: stored once, after its bytes are checked
    against ``sha``; an ONNX artifact as a graph whose large tensors are shared (:func:`split`)."""
    path = artifact_path(runs, sha, suffix)
    if bytes_sha(data) != sha:
        raise StoreFault(f"{path.name}: the bytes to store do not match their hash {sha[:12]}; not stored")
    if os.path.lexists(path) and read_whole(path, sha) is not None:
        return path
    # durable: the ledger records the run as done once this returns
    graph = split(data, TensorStore(path.parent / FOLDER, durable=True)) if suffix == ".onnx" else None
    if graph is None:
        return store_verified(path, sha, data)
    if os.path.lexists(path):
        warnings.warn(f"{path} did not match its hash; rewritten", StoreWarning, stacklevel=2)
    return atomic_write(path, graph)


def read_whole(path: Path, sha: str, data: bytes | None = None, mend: bool = True) -> bytes | None:
    """The artifact at ``path`` as compiled, if it hashes to ``sha`` (a whole hash or the prefix
    a file is named by): the file itself (``data``, where read already), or the join of the
    graph it holds. None otherwise (``mend``: see :class:`TensorStore`)."""
    if data is None:
        try:
            data = read_regular(path)
        except OSError:
            return None
    if sha and bytes_sha(data).startswith(sha):
        return data
    if not sha or path.suffix != ".onnx" or len(data) >= JOIN_BELOW:
        return None
    return checked_join(data, TensorStore(path.parent / FOLDER, mend=mend), sha)


def checked_join(graph: bytes, store: TensorStore, sha: str) -> bytes | None:
    """:func:`join`, if the whole hashes to ``sha`` (or starts with it); a failed join removes
    the stored tensors that do not match their names, so storing the artifact again mends it."""
    joined = join(graph, store)
    if joined is not None and bytes_sha(joined).startswith(sha):
        return joined
    store.drop_damaged(names(graph))
    return None


def names(graph_or_model: bytes) -> list[str]:
    """The stored tensors a split graph reads (none for a whole model or other bytes)."""
    import onnx
    from onnx.external_data_helper import _get_all_tensors

    if len(graph_or_model) >= JOIN_BELOW:
        return []
    try:
        model = onnx.load_from_string(graph_or_model)
    except Exception:
        return []
    return [n for n in map(_stored_name, _get_all_tensors(model)) if n is not None]


def _stored_name(tensor: onnx.TensorProto) -> str | None:
    """The stored tensor ``tensor`` names, if it names one (``location: tensors/{sha256}``)."""
    if tensor.data_location != tensor.EXTERNAL:
        return None
    where = {e.key: e.value for e in tensor.external_data}.get("location", "")
    folder, _, name = where.partition("/")
    return name if folder == FOLDER and NAMED.fullmatch(name) else None


def tensors_read(path: Path) -> list[str]:
    """The stored tensors the artifact file at ``path`` reads (none for a whole one)."""
    try:
        return names(read_regular(path)) if os.path.getsize(path) < JOIN_BELOW else []
    except OSError:
        return []


SPARED_S = 600.0  # a tensor written this recently may belong to an artifact whose graph is on its way


def remove_unread(runs: Path, reads: set[str]) -> list[Path]:
    """Remove the shared tensors of ``runs`` that no artifact file and none of ``reads`` (the
    cache's) reads, sparing any written or reused in the last :data:`SPARED_S` seconds, since a
    sweep writes an artifact's tensors before its graph. What was removed."""
    folder = Path(runs) / "artifacts" / FOLDER
    if not folder.is_dir():
        return []
    for graph in (Path(runs) / "artifacts").glob("*.onnx"):
        reads = reads | set(tensors_read(graph))
    cutoff, removed = time.time() - SPARED_S, []
    for path in folder.iterdir():
        try:
            if path.name in reads or path.name.startswith(".") or path.lstat().st_mtime >= cutoff:
                continue
            path.unlink()
            removed.append(path)
        except OSError:
            continue
    return removed

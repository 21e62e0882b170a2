"""Artifacts on disk: an ONNX artifact carries its I/O layout in its own metadata, so
``loop check runs/artifacts/x.onnx`` needs nothing else; another format's layout comes from the
device that runs it.

An artifact is named by the hash of its bytes, stored only once they match it, and checked
against it whenever it is read back: a file swapped for another variant's, or flipped on
disk, is never measured as the variant.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import onnx

from loop.core.errors import LoopError
from loop.core.hashing import bytes_sha, stream_sha
from loop.core.registry import BACKEND_BY_SUFFIX
from loop.core.registry import DEVICE_BY_SUFFIX as DEVICE_BY_SUFFIX  # re-exported: the CLI reads it here
from loop.core.text import for_person
from loop.core.vocab import Artifact, CompileResult, TensorLayout
from loop.store.cache import Cache
from loop.store.files import StoreFault, open_regular, read_regular, store_verified
from loop.store.shared import FOLDER, JOIN_BELOW, TensorStore, join, names, read_whole, split_once, store_artifact

if TYPE_CHECKING:
    from loop.core.record import RunRecord

LAYOUT_KEY = "loop.layout"


def with_layout(model: onnx.ModelProto, inputs: tuple[TensorLayout, ...], outputs: tuple[TensorLayout, ...]) -> None:
    """Record the I/O layout in ``model``'s metadata, where :func:`load_artifact` reads it."""
    entry = model.metadata_props.add()
    entry.key = LAYOUT_KEY
    entry.value = json.dumps({"inputs": [t.to_json() for t in inputs], "outputs": [t.to_json() for t in outputs]})


def spill(runs: Path, result: CompileResult) -> CompileResult:
    """Store a finished compile's artifact (and extras) under ``runs/artifacts`` and keep only
    its path and hashes in memory."""
    artifact = result.artifact
    if artifact is None or not artifact.data:
        return result
    sha = artifact.sha
    path = store_artifact(runs, sha, artifact.suffix, artifact.data)
    extras_sha = {key: bytes_sha(data) for key, data in artifact.extras.items()}
    for key, data in artifact.extras.items():
        store_verified(extra_path(path, key, extras_sha[key]), extras_sha[key], data)
    # extras keep their names (and lose their bytes): they lie beside the artifact
    result.artifact = replace(
        artifact,
        data=b"",
        extras={k: b"" for k in artifact.extras},
        path=str(path),
        stored_sha=sha,
        extras_sha=extras_sha,
    )
    return result


def keep_here(runs: Path, cache: Path | None, key: str, result: CompileResult) -> bool:
    """Store a finished compile where it was made (a worker, a patch child): its cache entry
    under ``key`` and its artifact under ``runs/artifacts``, so only a path and hashes travel on.
    True if the cache entry was written; a full disk, or a runs folder loop will not write
    through (a link), leaves the bytes in the result, for the sweep's own store to report."""
    stored = False
    with contextlib.suppress(OSError, LoopError), split_once():
        if cache is not None:
            at = Cache(cache)
            entry = at.encoded(key, result)
            stored = entry is not None and at.store_encoded(key, *entry)
        spill(runs, result)
    return stored


def extra_path(path: Path, key: str, sha: str) -> Path:
    """Where an extra (a HAR) of the artifact at ``path`` lies: beside it, and named by its own
    hash too, since two compiles may give one HEF from two different HARs."""
    return path.with_name(f"{path.stem}.{sha[:16]}.{key}")


def read_checked(path: Path, sha: str | None) -> bytes:
    """The bytes at ``path`` (never through a link), if their hash starts with ``sha``."""
    try:
        data = read_regular(path)
    except OSError as exc:
        raise StoreFault(f"{for_person(path)}: cannot read: {exc.strerror or exc}") from None
    if not sha:
        return data
    whole = read_whole(path, sha, data)  # a split ONNX artifact joined (loop.store.shared)
    if whole is None:
        raise StoreFault(f"{for_person(path)} does not match its hash {sha[:12]} (swapped or damaged): not used")
    return whole


def materialize(artifact: Artifact) -> Artifact:
    """The artifact with its bytes, read back from where :func:`spill` put them and checked
    against the hashes it had then."""
    if artifact.data or artifact.path is None:
        return artifact
    path = Path(artifact.path)
    return replace(artifact, data=read_checked(path, artifact.sha), extras=_extras(artifact, path))


def _extras(artifact: Artifact, path: Path) -> dict[str, bytes]:
    return {
        k: read_checked(extra_path(path, k, artifact.extras_sha[k]), artifact.extras_sha[k]) for k in artifact.extras
    }


OPENED_BY_PATH = (".hef",)  # artifacts their device reads from a file itself (HailoRT: hailo_create_hef_file)


def checked_file(artifact: Artifact, folder: Path) -> Artifact:
    """A stored artifact its device opens by path (:data:`OPENED_BY_PATH`), linked into ``folder``
    and checked there against its hash a chunk at a time: a HEF of gigabytes is never read whole
    into the device's process, and the file checked is the one the device reads (the link holds
    its inode; one swapped in at the stored path after is not it). Extras as :func:`materialize`."""
    path = Path(artifact.path or "")
    here = folder / f"{artifact.sha[:32]}{artifact.suffix}"
    try:
        _link_or_copy(path, here)
        sha = regular_sha(here)
    except OSError as exc:
        raise StoreFault(f"{for_person(path)}: cannot read: {exc.strerror or exc}") from None
    if not artifact.sha or not sha.startswith(artifact.sha):
        here.unlink(missing_ok=True)
        raise StoreFault(
            f"{for_person(path)} does not match its hash {artifact.sha[:12]} (swapped or damaged): not used"
        )
    return replace(artifact, path=str(here), extras=_extras(artifact, path))


def _link_or_copy(path: Path, here: Path) -> None:
    """``here`` names the regular file at ``path`` (never a link's target): a hard link, or a copy
    made a chunk at a time where the two lie on different filesystems."""
    if here.exists():
        return
    try:
        os.link(path, here, follow_symlinks=False)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        with open_regular(path) as src, open(here, "xb") as dst:
            shutil.copyfileobj(src, dst, CHUNK)


def regular_sha(path: Path) -> str:
    """SHA-256 of a regular file (never through a link), a chunk at a time."""
    with open_regular(path) as f:
        return stream_sha(f)


CHUNK = 1 << 24


def recorded_sha(run: RunRecord) -> str:
    """The hash a ledger run's artifact must match when it is read back: the whole one recorded,
    else (rows from before it was kept) the prefix its file is named by. Never empty, since an
    empty hash would let any file through."""
    sha = run.artifact_sha or Path(run.artifact or "").name.split(".")[0]
    if not sha:
        raise LoopError(f"run {run.id} records no artifact hash to check its artifact against")
    return sha


def load_artifact(path: Path, sha: str | None = None) -> Artifact:
    """Read an artifact file; a file loop cannot read is a one-line user error. With ``sha``
    (a run's artifact, read back from the runs folder) the file must match it and must not be a
    link; without it (``loop check FILE``) the user's own path is read as given."""
    if path.suffix not in BACKEND_BY_SUFFIX:
        raise LoopError(f"{for_person(path)}: not an artifact (expected {', '.join(BACKEND_BY_SUFFIX)})")
    if sha is not None:
        data = read_checked(path, sha)
    else:
        try:
            data = read_regular(path, follow=True)
        except OSError as exc:
            raise LoopError(f"{for_person(path)}: cannot read: {exc.strerror or exc}") from None
        if path.suffix == ".onnx" and len(data) < JOIN_BELOW:  # a runs folder's, its shared tensors beside it
            data = join(data, TensorStore(path.resolve().parent / FOLDER)) or data
    backend = BACKEND_BY_SUFFIX[path.suffix]
    if path.suffix != ".onnx":  # only ONNX carries its layout; a device reads the others' when it opens them
        return Artifact(backend, data, path.suffix, (), ())
    model = _parsed(data, path)
    _self_contained(model, path)
    return Artifact(backend, data, ".onnx", *_layout(model, path))


def stored_artifact(path: Path, sha: str) -> Artifact:
    """A run's artifact as its file, for a device's process to read and check (its layout read
    from the graph): an ONNX artifact stored with its tensors shared is its graph, and a
    generation's candidates go to their race without this process holding their weights.
    Anything else is read whole, as :func:`load_artifact` reads it."""
    try:
        graph = read_regular(path) if path.suffix == ".onnx" and path.stat().st_size < JOIN_BELOW else b""
    except OSError:
        graph = b""
    if not names(graph):
        return load_artifact(path, sha)
    inputs, outputs = _layout(_parsed(graph, path), path)
    return Artifact(BACKEND_BY_SUFFIX[".onnx"], b"", ".onnx", inputs, outputs, path=str(path), stored_sha=sha)


def _parsed(data: bytes, path: Path) -> onnx.ModelProto:
    try:
        return onnx.load_from_string(data)
    except Exception as exc:
        raise LoopError(f"{for_person(path)}: unreadable ONNX artifact: {type(exc).__name__}") from None


def _layout(model: onnx.ModelProto, path: Path) -> tuple[tuple[TensorLayout, ...], tuple[TensorLayout, ...]]:
    meta = {p.key: p.value for p in model.metadata_props}
    if LAYOUT_KEY not in meta:
        raise LoopError(f"{for_person(path)}: no {LAYOUT_KEY} metadata; is it an artifact compiled by loop?")
    layout = json.loads(meta[LAYOUT_KEY])
    return tuple(map(TensorLayout.from_json, layout["inputs"])), tuple(map(TensorLayout.from_json, layout["outputs"]))


def _self_contained(model: onnx.ModelProto, path: Path) -> None:
    """An artifact carries its weights in itself: its hash covers its own bytes only, and ONNX
    Runtime, handed those bytes, would look for a tensor's external file in the working folder."""
    from onnx.external_data_helper import _get_all_tensors, uses_external_data

    held = next((t.name for t in _get_all_tensors(model) if uses_external_data(t)), None)
    if held is not None:
        raise LoopError(
            f"{for_person(path)}: tensor '{for_person(held)}' keeps its data in another file; "
            "an artifact carries its weights in itself"
        )

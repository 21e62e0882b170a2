"""Artifacts on disk: an ONNX artifact carries its I/O layout in its own metadata, so
``loop check runs/artifacts/x.onnx`` needs nothing else; a HEF's layout comes from HailoRT."""
from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import onnx

from loop.compilers.base import Artifact, CompileResult, TensorLayout
from loop.errors import LoopError
from loop.store import store_artifact

LAYOUT_KEY = "loop.layout"
BACKEND_BY_SUFFIX = {".onnx": "onnxruntime", ".hef": "hailo"}
DEVICE_BY_SUFFIX = {".onnx": "onnxruntime", ".hef": "hailort"}


def with_layout(data: bytes, inputs: tuple[TensorLayout, ...], outputs: tuple[TensorLayout, ...]) -> bytes:
    model = onnx.load_from_string(data)
    entry = model.metadata_props.add()
    entry.key = LAYOUT_KEY
    entry.value = json.dumps({"inputs": [asdict(t) for t in inputs], "outputs": [asdict(t) for t in outputs]})
    return model.SerializeToString()


def spill(runs: Path, result: CompileResult) -> CompileResult:
    """Store a finished compile's artifact (and extras) under ``runs/artifacts`` and keep only
    its path in memory."""
    artifact = result.artifact
    if artifact is None or not artifact.data:
        return result
    sha = artifact.sha
    path = store_artifact(runs, sha, artifact.suffix, artifact.data)
    for key, data in artifact.extras.items():
        store_artifact(runs, sha, f".{key}", data)
    # extras keep their names (and lose their bytes): they lie beside the artifact
    result.artifact = replace(artifact, data=b"", extras={k: b"" for k in artifact.extras}, path=str(path),
                              stored_sha=sha)
    return result


def materialize(artifact: Artifact) -> Artifact:
    """The artifact with its bytes, read back from where :func:`spill` put them."""
    if artifact.data or artifact.path is None:
        return artifact
    path = Path(artifact.path)
    extras = {key: path.with_suffix(f".{key}").read_bytes() for key in artifact.extras}
    return replace(artifact, data=path.read_bytes(), extras=extras)


def _layouts(items: list[dict]) -> tuple[TensorLayout, ...]:
    return tuple(TensorLayout(**{**t, "shape": tuple(t["shape"])}) for t in items)


def load_artifact(path: Path) -> Artifact:
    """Read an artifact file; a file loop cannot read is a one-line user error."""
    if path.suffix not in BACKEND_BY_SUFFIX:
        raise LoopError(f"{path}: not an artifact (expected {', '.join(BACKEND_BY_SUFFIX)})")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise LoopError(f"{path}: cannot read: {exc.strerror}") from None
    if path.suffix == ".hef":
        return Artifact("hailo", data, ".hef", (), ())
    try:
        meta = {p.key: p.value for p in onnx.load_from_string(data).metadata_props}
    except Exception as exc:  # noqa: BLE001 - any parse failure means an unreadable artifact
        raise LoopError(f"{path}: unreadable ONNX artifact: {type(exc).__name__}") from None
    if LAYOUT_KEY not in meta:
        raise LoopError(f"{path}: no {LAYOUT_KEY} metadata; is it an artifact compiled by loop?")
    layout = json.loads(meta[LAYOUT_KEY])
    return Artifact("onnxruntime", data, ".onnx", _layouts(layout["inputs"]), _layouts(layout["outputs"]))

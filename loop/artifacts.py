"""Artifacts on disk: an ONNX artifact carries its I/O layout in its own metadata, so
``loop check runs/artifacts/x.onnx`` needs nothing else; a HEF's layout comes from HailoRT."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import onnx

from loop.compilers.base import Artifact, TensorLayout
from loop.errors import LoopError

LAYOUT_KEY = "loop.layout"
BACKEND_BY_SUFFIX = {".onnx": "onnxruntime", ".hef": "hailo"}
DEVICE_BY_SUFFIX = {".onnx": "onnxruntime", ".hef": "hailort"}


def with_layout(data: bytes, inputs: tuple[TensorLayout, ...], outputs: tuple[TensorLayout, ...]) -> bytes:
    model = onnx.load_from_string(data)
    entry = model.metadata_props.add()
    entry.key = LAYOUT_KEY
    entry.value = json.dumps({"inputs": [asdict(t) for t in inputs], "outputs": [asdict(t) for t in outputs]})
    return model.SerializeToString()


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

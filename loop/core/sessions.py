"""The one place ONNX Runtime sessions are made for the host side of loop (calibration,
bias correction, float references); devices make their own for measuring."""

from __future__ import annotations

from typing import Any

import onnx


def session(model: onnx.ModelProto | bytes, threads: int = 0, optimize: bool = False) -> Any:
    """A CPU session, quiet, with ``threads`` intra-op threads (0: ONNX Runtime's default).
    Unoptimized by default, so every tensor of the graph exists to be read."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    data = model if isinstance(model, bytes) else model.SerializeToString()
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])

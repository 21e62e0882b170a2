"""The one place loop makes ONNX Runtime sessions: calibration, bias correction, float
references, the graph compile into an artifact, and the ONNX Runtime device.

Each caller says what it needs; nothing is left to a default that differs between them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # not at run time: a device process opens serialized bytes, and onnx is 0.6 s of its start
    import onnx

Optimization = Literal["none", "basic", "extended", "all"]
CPU = ("CPUExecutionProvider",)


def session(
    model: onnx.ModelProto | bytes | str | os.PathLike[str],
    threads: int = 0,
    optimize: Optimization = "none",
    *,
    providers: Sequence[str] = CPU,
    quiet: bool = True,
    save_to: str | os.PathLike[str] | None = None,
    spin: bool = True,
) -> Any:
    """A session on ``model`` (a proto, serialized bytes or a file path) with ``threads``
    intra-op threads (0: ONNX Runtime's default, every core).

    ``optimize`` is ONNX Runtime's graph optimization level: "none" by default, so every tensor
    of the graph exists to be read. ``quiet`` drops ONNX Runtime's warnings from stderr.
    ``save_to`` writes the optimized graph there (ONNX Runtime's own graph compile). ``spin``
    off: idle intra-op threads sleep instead of spin-waiting (see ``RuntimeOptions.spin``)."""
    import onnxruntime as ort

    levels = {
        "none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.graph_optimization_level = levels[optimize]
    # Without VNNI, ONNX Runtime's u8 x s8 kernels sum byte pairs saturated at int16
    # (vpmaddubsw), so a quantized model computes other values on such a CPU. Its own option
    # rewrites s8 weights to u8 there (exact U8U8 kernels); on a VNNI CPU it changes nothing.
    so.add_session_config_entry("session.x64quantprecision", "1")
    if not spin:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if quiet:
        so.log_severity_level = 3
    if save_to is not None:
        so.optimized_model_filepath = os.fspath(save_to)
    data = model.SerializeToString() if hasattr(model, "SerializeToString") else model  # a proto
    data = data if isinstance(data, bytes) else os.fspath(data)
    return ort.InferenceSession(data, so, providers=list(providers))

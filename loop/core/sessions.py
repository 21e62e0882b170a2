"""The one place loop makes ONNX Runtime sessions: calibration, bias correction, float
references, the graph compile into an artifact, and the ONNX Runtime device.

Each caller says what it needs; nothing is left to a default that differs between them.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # not at run time: a device process opens serialized bytes, and onnx is 0.6 s of its start
    import onnx

Optimization = Literal["none", "basic", "extended", "all"]
CPU = ("CPUExecutionProvider",)
PRECISE_INT8 = "session.x64quantprecision"  # kOrtSessionOptionsAvx2PrecisionMode
SATURATES_ENV = "LOOP_INT8_SATURATES"  # this host's answer to saturating_int8, for child processes


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
    if optimize in ("extended", "all") and save_to is None and saturating_int8():
        # ONNX Runtime's own cure: s8 weights rewritten to u8 as the session loads, exact U8U8
        # kernels. Never on a saved artifact (it would carry the rewrite to every CPU, slower on
        # VNNI ones), never where the CPU sums exactly.
        so.add_session_config_entry(PRECISE_INT8, "1")
    if not spin:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if quiet:
        so.log_severity_level = 3
    if save_to is not None:
        so.optimized_model_filepath = os.fspath(save_to)
    data = model.SerializeToString() if hasattr(model, "SerializeToString") else model  # a proto
    data = data if isinstance(data, bytes) else os.fspath(data)
    return ort.InferenceSession(data, so, providers=list(providers))


@functools.cache
def saturating_int8() -> bool:
    """Whether ONNX Runtime's fused integer kernels on this CPU sum u8 x s8 byte pairs saturated at
    int16 (``vpmaddubsw``, x86 without VNNI: ONNX Runtime's quantization docs, U8S8 and
    reduce_range): 255 x 127 twice is 64,770, read as 32,767. So a quantized model computes other
    values there. Asked of the kernels, with a fused QDQ MatMul of eight such pairs: a CPU's flags
    may not say (an emulator presents other flags than it runs). Once per process tree: the answer
    is left in ``SATURATES_ENV`` for the children (a device child then never imports onnx for it)."""
    known = os.environ.get(SATURATES_ENV)
    if known in ("0", "1"):
        return known == "1"
    found = _probe()
    os.environ[SATURATES_ENV] = "1" if found else "0"
    return found


PROBE_PAIRS = 8  # u8 255 x s8 127, eight times over: 259,080 exact, 131,068 where pairs saturate


def int8_probe() -> tuple[bytes, dict[str, Any]]:
    """A fused QDQ MatMul of ``PROBE_PAIRS`` products of 255 x 127, serialized, and its feed."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    k = PROBE_PAIRS
    consts = [
        numpy_helper.from_array(np.full((k, 1), 127, np.int8), "w"),
        numpy_helper.from_array(np.array(1.0, np.float32), "s"),
        numpy_helper.from_array(np.array(0, np.uint8), "zx"),
        numpy_helper.from_array(np.array(0, np.int8), "zw"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "zx"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "s", "zx"], ["xd"]),
        helper.make_node("DequantizeLinear", ["w", "s", "zw"], ["wd"]),
        helper.make_node("MatMul", ["xd", "wd"], ["y"]),
    ]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in (("x", [1, k]), ("y", [1, 1]))]
    graph = helper.make_graph(nodes, "u8s8", io[:1], io[1:], consts)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString(), {"x": np.full((1, k), 255, np.float32)}


def _probe() -> bool:
    import onnxruntime as ort

    data, feed = int8_probe()
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    got = ort.InferenceSession(data, so, providers=list(CPU)).run(None, feed)[0]
    return float(got.reshape(-1)[0]) != 255 * 127 * PROBE_PAIRS

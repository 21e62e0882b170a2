"""The one place loop makes ONNX Runtime sessions: calibration, bias correction, float
references, the graph compile into an artifact, and the ONNX Runtime device.

Each caller says what it needs; nothing is left to a default that differs between them.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
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
    consume: bool = False,
) -> Any:
    """A session on ``model`` (a proto, serialized bytes or a file path) with ``threads``
    intra-op threads (0: ONNX Runtime's default, every core).

    ``optimize`` is ONNX Runtime's graph optimization level: "none" by default, so every tensor
    of the graph exists to be read. ``quiet`` drops ONNX Runtime's warnings from stderr.
    ``save_to`` writes the optimized graph there (ONNX Runtime's own graph compile). ``spin``
    off: idle intra-op threads sleep instead of spin-waiting (see ``RuntimeOptions.spin``).
    ``consume``: ``model`` (a proto) is not used after, so its large tensors are handed to ONNX
    Runtime as they are and taken out of it, rather than serialized with it (0.5 s and a copy
    of the weights at 268 MB); ONNX Runtime still writes them into a graph it saves."""
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
    if isinstance(model, bytes):
        return ort.InferenceSession(model, so, providers=list(providers))
    if isinstance(model, (str, os.PathLike)):  # a file, its external data beside it
        return ort.InferenceSession(os.fspath(model), so, providers=list(providers))
    from loop.core.modelfile import tensor_bytes

    kept = _given_from_files(model, so) + (_handed_over(model, so) if consume else [])
    if tensor_bytes(model) < PROTO_LIMIT:
        made = ort.InferenceSession(model.SerializeToString(), so, providers=list(providers))
        made._loop_initializers = kept  # ONNX Runtime reads them in place, for the session's life
        return made
    with _spilled(model) as path:
        return ort.InferenceSession(os.fspath(path), so, providers=list(providers))


PROTO_LIMIT = 3 << 29  # 1.5 GiB of tensors: past it a proto goes as a file, protobuf stopping at 2 GiB
SPILL_FROM = 1 << 16  # a tensor that goes to the data file, the rest staying in the graph


def _given_from_files(model: onnx.ModelProto, so: Any) -> list[Any]:
    """Each external tensor of ``model`` that knows its folder (``loop.core.modelfile.load_model``
    with ``data`` False), mapped from its file and handed to the session by ONNX Runtime's
    ``add_external_initializers``, which uses the memory given instead of reading the tensor: no
    copy of the weights in this process. The values handed, which must outlive the session."""
    import numpy as np
    import onnxruntime as ort

    from loop.core.modelfile import knows_folder, tensor_array

    names, values = [], []
    for t in model.graph.initializer:
        if t.data_location == t.EXTERNAL and knows_folder(t):
            names.append(t.name)
            values.append(ort.OrtValue.ortvalue_from_numpy(np.asarray(tensor_array(t))))
    if names:
        so.add_external_initializers(names, values)
    return values


def _handed_over(model: onnx.ModelProto, so: Any) -> list[Any]:
    """Each inline tensor of ``model`` of ``SPILL_FROM`` bytes or more whose type numpy holds,
    taken out of the proto and handed to the session as an array (``add_external_initializers``).
    The values handed, which must outlive the session."""
    import numpy as np
    import onnxruntime as ort
    from onnx import helper

    names, values = [], []
    for t in model.graph.initializer:
        if not t.HasField("raw_data") or len(t.raw_data) < SPILL_FROM:
            continue
        try:
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type))
        except (KeyError, TypeError, ValueError):
            continue
        raw = t.raw_data
        # numpy's own kinds only (bfloat16 and float8 are ml_dtypes', which ONNX Runtime refuses
        # as arrays), each value its own bytes (packed 4-bit is not): the rest stays inline
        if dtype.kind not in "biuf" or dtype.itemsize * math.prod(t.dims) != len(raw):
            continue
        names.append(t.name)
        values.append(ort.OrtValue.ortvalue_from_numpy(np.frombuffer(raw, dtype).reshape(tuple(t.dims))))
        t.ClearField("raw_data")
        t.data_location = t.EXTERNAL
        t.external_data.add(key="location", value="handed-to-the-session")  # never read: ONNX Runtime has it
    if names:
        so.add_external_initializers(names, values)
    return values


@contextlib.contextmanager
def _spilled(model: onnx.ModelProto) -> Iterator[Path]:
    """``model`` written to a scratch folder with its large tensors in a data file beside it, for
    the while; the proto is given its tensors back after, so no copy of the model is ever made."""
    from onnx import TensorProto

    from loop.core.leftovers import scratch

    moved: list[tuple[TensorProto, int, int]] = []
    with scratch("spill") as tmp, open(Path(tmp) / "model.data", "wb") as data:
        try:
            for t in model.graph.initializer:
                if t.HasField("raw_data") and t.ByteSize() >= SPILL_FROM:
                    offset = data.tell()
                    data.write(t.raw_data)
                    moved.append((t, offset, data.tell() - offset))
                    t.ClearField("raw_data")
                    t.data_location = TensorProto.EXTERNAL
                    for key, value in (
                        ("location", "model.data"),
                        ("offset", str(offset)),
                        ("length", str(moved[-1][2])),
                    ):
                        t.external_data.add(key=key, value=value)
            data.flush()
            (Path(tmp) / "model.onnx").write_bytes(model.SerializeToString())
            yield Path(tmp) / "model.onnx"
        finally:
            with open(Path(tmp) / "model.data", "rb") as back:
                for t, offset, length in moved:
                    back.seek(offset)
                    t.raw_data = back.read(length)
                    del t.external_data[:]
                    t.ClearField("data_location")


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

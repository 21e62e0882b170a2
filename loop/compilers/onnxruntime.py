"""The embedded compiler: ONNX Runtime static QDQ quantization, bias correction, graph compile.

It is real quantization with real rounding, so kernel hashes, scales and confounds are real.
Bias correction (on by default) re-derives every quantized layer's bias against the
activation ranges, as the Dataflow Compiler does; that is what makes a forced range move
more than a scale.
"""
from __future__ import annotations

import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import onnx
# Imported here, not on use: an isolated compile forks from a worker that has imported this
# module, so every compile after the first skips these imports.
import onnxruntime as ort
from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, calibrate, quantize_static

from loop.compilers.base import Artifact, CompileOptions, Compiler, LayerPrint, Quantized
from loop.artifacts import with_layout
from loop.compilers import boundary, qdq

CALIBRATE = {"minmax": "MinMax", "entropy": "Entropy", "percentile": "Percentile",
             "distribution": "Distribution"}


class OnnxRuntimeCompiler(Compiler):
    name = "onnxruntime"

    @classmethod
    def available(cls) -> tuple[bool, str]:
        from loop.backends import importable
        ok, why = importable("onnxruntime")
        return ok, why or "embedded"

    def describe(self) -> dict[str, str]:
        return {"compiler": self.name, "onnxruntime": ort.__version__, "onnx": onnx.__version__,
                "numpy": np.__version__}

    def optimize(self, model: bytes, calibration: np.ndarray, options: CompileOptions) -> Quantized:
        quantized = _quantize(model, calibration, options)
        if options.bias_correction:
            correct_biases(onnx.load_from_string(model), quantized, calibration, options.threads)
        return Quantized(self.name, quantized.SerializeToString(),
                         info={"overrides": {o.tensor: [o.lo, o.hi] for o in options.overrides}})

    def fingerprint(self, quantized: Quantized) -> list[LayerPrint]:
        return qdq.fingerprint(onnx.load_from_string(quantized.data))

    def compile(self, quantized: Quantized, options: CompileOptions) -> Artifact:
        model = onnx.load_from_string(quantized.data)
        inputs, outputs = boundary.strip(model) if options.io == "uint8" else boundary.float_io(model)
        data = with_layout(_graph_compile(model, options.threads), inputs, outputs)
        return Artifact(self.name, data, ".onnx", inputs, outputs)


class _Reader:
    """Calibration frames for ONNX Runtime's CalibrationDataReader protocol."""

    def __init__(self, name: str, frames: np.ndarray) -> None:
        self._frames: Iterator[np.ndarray] = iter(frames)
        self._name = name

    def get_next(self) -> dict[str, np.ndarray] | None:
        frame = next(self._frames, None)
        return None if frame is None else {self._name: frame[None].astype(np.float32)}


@contextmanager
def _calibration_threads(threads: int) -> Iterator[None]:
    """Give quantize_static's calibration session ``threads`` intra-op threads.

    quantize_static offers no knob for it and builds that session with default options,
    which take every core: two compiles side by side (``--jobs 2`` on two cores) then halve
    each other. The method is replaced for the duration of one call, in this process only
    (compiles run one at a time in their own process); without the method (another ORT
    version), nothing is changed."""
    original = getattr(calibrate.CalibraterBase, "create_inference_session", None)
    if not threads or original is None:
        yield
        return

    def create_inference_session(self: Any) -> None:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.intra_op_num_threads = threads
        self.infer_session = ort.InferenceSession(self.augmented_model_path, sess_options=so,
                                                  providers=self.execution_providers)

    calibrate.CalibraterBase.create_inference_session = create_inference_session
    try:
        yield
    finally:
        calibrate.CalibraterBase.create_inference_session = original


def _quantize(model: bytes, calibration: np.ndarray, options: CompileOptions) -> onnx.ModelProto:
    float_model = onnx.load_from_string(model)
    overrides: dict[str, Any] = {
        o.tensor: [{"rmin": np.float32(o.lo), "rmax": np.float32(o.hi)}] for o in options.overrides}
    with tempfile.TemporaryDirectory(prefix="loop-q-") as tmp:
        src, dst = Path(tmp) / "float.onnx", Path(tmp) / "qdq.onnx"
        src.write_bytes(model)
        with _calibration_threads(options.threads):
            quantize_static(
                str(src), str(dst), _Reader(float_model.graph.input[0].name, calibration),
                quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                per_channel=options.per_channel,
                calibrate_method=getattr(CalibrationMethod, CALIBRATE[options.calibration_method]),
                extra_options={"TensorQuantOverrides": overrides} if overrides else {})
        return onnx.load(str(dst))


def _session(model: onnx.ModelProto, threads: int, optimize: bool = False) -> Any:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _expose(model: onnx.ModelProto, names: list[str]) -> onnx.ModelProto:
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    present = {o.name for o in exposed.graph.output}
    exposed.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n) for n in names if n not in present)
    return exposed


def _run_all(model: onnx.ModelProto, names: list[str], frames: np.ndarray, threads: int) -> list[np.ndarray]:
    """One session, every named tensor, summed per channel over all frames (axis 1)."""
    session = _session(_expose(model, names), threads)
    feed_name = model.graph.input[0].name
    sums: list[np.ndarray] = []
    for frame in frames:
        outs = session.run(names, {feed_name: frame[None].astype(np.float32)})
        for i, out in enumerate(outs):
            axes = tuple(a for a in range(out.ndim) if a != 1) if out.ndim > 1 else (0,)
            mean = out.astype(np.float64).mean(axis=axes)
            sums[i:i + 1] = [sums[i] + mean] if i < len(sums) else [mean]
    return [s / len(frames) for s in sums]


def correct_biases(float_model: onnx.ModelProto, quantized: onnx.ModelProto, calibration: np.ndarray,
                   threads: int = 0) -> None:
    """Subtract from each quantized layer's bias the per-channel mean of (quantized output -
    float output) over the calibration frames. One run of each model collects every layer."""
    g = qdq.QdqGraph(quantized)
    pairs = []
    for node in g.layers():
        _, dq = g.out_q(node.output[0])
        bias = g.dq_param(node.input[2]) if len(node.input) > 2 else None
        float_name = g.float_out_name(node.output[0])
        if dq is not None and bias is not None and float_name is not None:
            pairs.append((dq.output[0], float_name, bias))
    if not pairs:
        return
    q_means = _run_all(quantized, [p[0] for p in pairs], calibration, threads)
    f_means = _run_all(float_model, [p[1] for p in pairs], calibration, threads)
    for (_, _, bias), qm, fm in zip(pairs, q_means, f_means):
        ints, scale = g.required(bias.values), g.required(bias.scale)
        corrected = ints.astype(np.float64) * scale - (qm - fm)
        g.set_array(bias.values, np.round(corrected / scale).astype(ints.dtype))


def _graph_compile(model: onnx.ModelProto, threads: int) -> bytes:
    """ONNX Runtime's graph optimization at the extended level, which stays portable:
    hardware-specific layouts are applied by the session that loads the artifact."""
    with tempfile.TemporaryDirectory(prefix="loop-c-") as tmp:
        out = Path(tmp) / "artifact.onnx"
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        so.optimized_model_filepath = str(out)
        so.intra_op_num_threads = threads
        so.log_severity_level = 3
        ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        return out.read_bytes()

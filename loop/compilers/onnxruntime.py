"""The embedded compiler: ONNX Runtime static QDQ quantization, bias correction, graph compile.

It is real quantization with real rounding, so kernel hashes, scales and confounds are real.
Bias correction (on by default) re-derives every quantized layer's bias against the
activation ranges, as the Dataflow Compiler does; that is what makes a forced range move
more than a scale.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx

# Imported here, not on use: an isolated compile forks from a worker that has imported this
# module, so every compile after the first skips these imports.
import onnxruntime as ort
from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

from loop.author.frames import Frames, count, feed
from loop.compilers import boundary, calibration, qdq, qdq_rescale, qdq_weights
from loop.compilers.base import Compiler, share_said
from loop.compilers.bias import correction as bias_correction
from loop.compilers.bias import zeros
from loop.core.errors import LoopError
from loop.core.facts import CompileFacts
from loop.core.leftovers import scratch
from loop.core.modelfile import as_file, load_model, own_name, self_contained, write_model
from loop.core.sessions import session
from loop.core.vocab import Artifact, CompileOptions, LayerPrint, Quantized, Rescale
from loop.judge.noise import TensorNoise
from loop.judge.structure import analyse
from loop.store.artifacts import with_layout

# 2: float kernels in fingerprints, held-out bias correction (issue 32); 3: the guard recorded;
# 4: grids wider than 8 bits recorded (issue 36); 5: the guard on four folds, clear of their spread (issue 42);
# 6: integer-only kernel and bias hashes in fingerprints (issue 43); 7: weights weighed, INT4 kernels (issue 44)
REVISION = "7"


class OnnxRuntimeCompiler(Compiler):
    name = "onnxruntime"
    prints_from_artifact = True  # the fingerprint reads the QDQ model the artifact is compiled from
    patches_warm = True  # a scale patch, its fingerprint and graph compile: tens of milliseconds

    def __init__(self) -> None:
        self._sources: dict[bytes | str, qdq.FloatSource] = {}

    @classmethod
    def available(cls) -> tuple[bool, str]:
        from loop.core.registry import importable

        ok, why = importable("onnxruntime")
        return ok, why or "embedded"

    def describe(self) -> dict[str, str]:
        return {
            "compiler": self.name,
            "onnxruntime": ort.__version__,
            "onnx": onnx.__version__,
            "numpy": np.__version__,
            # what loop itself does around the quantizer (bias correction, fingerprints): a new
            # revision keys the compile cache afresh, so no artifact of older code is reused
            "loop_compile": REVISION,
        }

    def optimize(self, model: bytes | Path, calibration: Frames, options: CompileOptions) -> Quantized:
        """Quantized from the model's file (bytes are written to one first); the Quantized's
        ``source`` names the float model as it was given: its bytes, or its file's path."""
        with as_file(model) as path:
            quantized = self._optimize(path, calibration, options)
        return replace(quantized, source=model if isinstance(model, bytes) else str(path))

    def _optimize(self, path: Path, calibration: Frames, options: CompileOptions) -> Quantized:
        info: dict[str, Any] = {}  # CompileFacts' fields, as found
        # its tensors mapped from their files where it has external data: this process never
        # holds a copy of the float weights (quantize_static reads the file itself)
        float_model = load_model(path, data=False)
        with scratch("q") as tmp:  # named by this pid, so a killed compile's folder is cleared later
            if options.bias_correction:
                # The Dataflow Compiler gives every layer a bias; a zero one here lets bias
                # correction reach layers exported without (FPN's, a conv before a BatchNorm).
                given = zeros.add_zero_biases(float_model)
                if given:
                    info["zero_bias_added"] = tuple(given)
                    path = _biased(path, Path(tmp))
                    float_model = load_model(path, data=False)
            quantized = self._quantized(path, float_model, calibration, options, info)
        return quantized

    def _quantized(
        self,
        path: Path,
        float_model: onnx.ModelProto,
        calibration: Frames,
        options: CompileOptions,
        info: dict[str, Any],
    ) -> Quantized:
        if options.weights_4bit_share is not None:
            chosen, info["weights_4bit_share"] = qdq_weights.share_layers(
                float_model, analyse(float_model), options.weights_4bit_share, options.weight_bits
            )
            options = options.model_copy(update={"weight_bits": (*options.weight_bits, *chosen)})
        quantized = _quantize(path, calibration, options, float_model)
        info["weights"] = qdq_weights.weighed(quantized)
        apart = qdq_weights.held_apart(quantized, options.weight_bits)
        if apart:
            info["weights"]["held_apart"] = apart
        info["overrides"], warnings = qdq.used_ranges(quantized, options.overrides)
        said = [share_said(info.get("weights_4bit_share")), qdq_weights.apart_line(apart, options.weight_bits)]
        warnings += [line for line in said if line]
        info["removed_clamps"] = qdq.removed_clamps(float_model, quantized)
        info["wide_grids"] = qdq.wide_grids(quantized)
        if options.bias_correction:
            feeds = calibration_feeds(float_model, calibration)
            correction = bias_correction.correct(
                float_model,
                quantized,
                feeds,
                options.threads,
                guard=options.bias_correction_guard,
                given=options.bias_guard_given,
            )
            info["bias_correction"] = correction.to_dict()
        if warnings:
            info["warnings"] = tuple(warnings)
        return Quantized(self.name, quantized.SerializeToString(), info=CompileFacts(**info))

    def rescale(self, quantized: Quantized, edits: Sequence[Rescale]) -> Quantized:
        """The QDQ model's scale initializers multiplied (:mod:`loop.compilers.qdq_rescale`)."""
        model = _fresh(quantized)
        done = qdq_rescale.rescale(model, edits)
        info = replace(quantized.info, rescaled=done)
        # left parsed: the fingerprint and compile that follow read it, and nothing serializes it
        return Quantized(self.name, b"", info, {}, quantized.source, quantized.prints, parsed=model)

    def fingerprint(self, quantized: Quantized) -> list[LayerPrint]:
        return qdq.fingerprint(_parsed(quantized), self._float_source(quantized.source), quantized.prints)

    def _float_source(self, source: bytes | str) -> qdq.FloatSource | None:
        """The float model read once per compiler for every patch of one base (a patch child's
        compiler lives across them): keyed by its bytes or its file's path, two at most."""
        if not source:
            return None
        if source not in self._sources:
            self._sources[source] = qdq.FloatSource(load_model(source, data=False))
            while len(self._sources) > 2:
                self._sources.pop(next(iter(self._sources)))
        return self._sources[source]

    def noise(self, quantized: Quantized, frames: Frames) -> list[TensorNoise]:
        """By ``qdq_loss_debug`` on the QDQ model before the boundary strip and graph compile
        (:mod:`loop.compilers.qdq_noise`), against the float model as the quantizer was given it."""
        from loop.compilers import qdq_noise

        source = load_model(quantized.source)
        return qdq_noise.analyse(_fresh(quantized), source, calibration_feeds(source, frames))

    def compile(self, quantized: Quantized, options: CompileOptions) -> Artifact:
        model = _parsed(quantized, take=True)
        inputs, outputs = boundary.strip(model) if options.io == "uint8" else boundary.float_io(model)
        with_layout(model, inputs, outputs)  # ONNX Runtime keeps a model's metadata in the graph it saves
        data = _graph_compile(model, options.threads)
        return Artifact(self.name, data, ".onnx", inputs, outputs)


def _parsed(quantized: Quantized, take: bool = False) -> onnx.ModelProto:
    """The quantized model as a proto, to read: its parsed form where a stage left one. ``take``:
    the caller changes it (compile, the last stage), and the Quantized keeps only its bytes."""
    model = quantized.parsed
    if model is None:
        if not quantized.data:
            raise LoopError("this quantized model was taken by its compile already: nothing is left to read")
        return onnx.load_from_string(quantized.data)
    if take:
        quantized.parsed = None
    return model


def _fresh(quantized: Quantized) -> onnx.ModelProto:
    """A copy of the quantized model the caller may change."""
    if quantized.parsed is None:
        return _parsed(quantized)
    model = onnx.ModelProto()
    model.CopyFrom(quantized.parsed)
    return model


def _biased(path: Path, folder: Path) -> Path:
    """The model at ``path`` with its zero biases, written in ``folder`` (its tensors beside it
    where it has external data)."""
    model = load_model(path)
    zeros.add_zero_biases(model)
    return write_model(model, folder, not self_contained(path), "biased")[0]


def _quantize(
    model: bytes | Path, calibration_frames: Frames, options: CompileOptions, float_model: onnx.ModelProto | None = None
) -> onnx.ModelProto:
    """ONNX Runtime's ``quantize_static`` of ``model`` (``float_model``: it, read already); one
    with its weights beside it goes in external data, and so does what the quantizer writes."""
    # named by this pid: a killed compile's folder is cleared later
    with as_file(model) as shared, own_name(shared) as src, scratch("q") as tmp:
        float_model = float_model if float_model is not None else load_model(src)
        dst = Path(tmp) / "qdq.onnx"
        with calibration.threads(options.threads), calibration.method_options(options):
            quantize_static(
                str(src),
                str(dst),
                calibration.Reader(calibration_feeds(float_model, calibration_frames)),
                quant_format=QuantFormat.QDQ,
                activation_type=QuantType.QUInt8,
                weight_type=QuantType.QInt8,
                per_channel=options.per_channel,
                calibrate_method=calibration.method(options.calibration_method),
                extra_options=_extra_options(tensor_overrides(options), options),
                nodes_to_exclude=[p.layer for p in options.precisions if p.bits == 32],
                use_external_data_format=not self_contained(src),
            )
        return onnx.load(str(dst))


def tensor_overrides(options: CompileOptions) -> dict[str, list[dict[str, Any]]]:
    """ONNX Runtime's ``TensorQuantOverrides``: a forced range and a 16-bit grid on one tensor
    merge into one entry (the quantizer reads one per tensor). A 16-bit type makes the quantizer
    move the model to opset 21, whose Q/DQ take 16-bit integers (docs/onnxruntime.md)."""
    found: dict[str, dict[str, Any]] = {}
    for o in options.overrides:
        found.setdefault(o.tensor, {}).update(rmin=np.float32(o.lo), rmax=np.float32(o.hi))
    for p in options.precisions:
        if p.bits == 16:
            found.setdefault(p.tensor, {})["quant_type"] = QuantType.QUInt16
    for w in options.weight_bits:  # a kernel's width: INT4 is stored two to a byte (docs/onnxruntime.md)
        found.setdefault(w.tensor, {})["quant_type"] = WEIGHT_TYPES[w.bits]
    return {tensor: [entry] for tensor, entry in found.items()}


WEIGHT_TYPES = {4: QuantType.QInt4, 8: QuantType.QInt8, 16: QuantType.QInt16}


def _extra_options(overrides: dict[str, Any], options: CompileOptions) -> dict[str, Any]:
    extra: dict[str, Any] = {"TensorQuantOverrides": overrides} if overrides else {}
    if not options.int32_bias_weight_adjust:
        extra["QDQDisableWeightAdjustForInt32Bias"] = True
    return extra


def calibration_feeds(model: onnx.ModelProto, frames: Frames) -> list[dict[str, np.ndarray]]:
    """One feed per calibration frame, every input by name (floats as float32; integer and
    boolean inputs keep their type)."""
    inits = {t.name for t in model.graph.initializer}
    names = [v.name for v in model.graph.input if v.name not in inits]
    as_fed = lambda v: v.astype(np.float32) if np.issubdtype(v.dtype, np.floating) else v  # noqa: E731
    return [{k: as_fed(v) for k, v in feed(frames, j, names).items()} for j in range(count(frames))]


def _graph_compile(model: onnx.ModelProto, threads: int) -> bytes:
    """ONNX Runtime's graph optimization at the extended level, which stays portable:
    hardware-specific layouts are applied by the session that loads the artifact."""
    with scratch("c") as tmp:
        out = Path(tmp) / "artifact.onnx"
        session(model, threads, "extended", save_to=out, consume=True)
        return out.read_bytes()

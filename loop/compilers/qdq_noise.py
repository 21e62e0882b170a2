"""Per-tensor quantization noise of a QDQ model, by ONNX Runtime's own ``qdq_loss_debug``.

Three models run on the same frames, each augmented by ``modify_model_output_intermediate_tensors``
and run as ``collect_activations`` runs them (one session each, one frame at a time): the float
model, the QDQ model, and the QDQ model *isolated* (every node other than a QuantizeLinear or
DequantizeLinear reads its activation inputs from the float model's values, so a tensor carries
only its own layer's quantization: the kernel's and the tensor's own grid).
``create_activation_matching`` pairs each quantized tensor's value before and after its Q/DQ with
the float model's, and ``compute_activation_error`` measures them:

* accumulated SNR = ``xmodel_err`` of the QDQ model against the float one;
* local SNR = ``xmodel_err`` of the isolated model against the float one.

``qdq_err`` (the Q/DQ pair alone, given the QDQ model's own inputs) is not either: it leaves out the
kernel's rounding, and it measures a grid against values upstream noise has already moved, so a
layer fed garbage looks fine. The figures are summed frame by frame as energies
(``compute_activation_error`` with energy functions in place of its SNR), so frames never have to
be held all at once; the SNR is then ``compute_signal_to_quantization_noice_ratio``'s, to float
rounding.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnxruntime import InferenceSession
from onnxruntime.quantization.qdq_loss_debug import (
    compute_activation_error,
    compute_weight_error,
    create_activation_matching,
    create_weight_matching,
    modify_model_output_intermediate_tensors,
)
from onnxruntime.quantization.quant_utils import (
    DEQUANT_OP_NAME,
    QUANT_INPUT_SUFFIX,
    QUANT_OP_NAME,
    TENSOR_NAME_QUANT_SUFFIX,
)

from loop.core.leftovers import scratch
from loop.core.sessions import session
from loop.judge.noise import TensorNoise, producers, snr_db
from loop.judge.weights import bits_of

Feed = dict[str, np.ndarray]
SAVED = "_ReshapedSavedOutput"  # qdq_loss_debug's suffix on each saved tensor's output
FED = "__loop_float"  # the isolated model's inputs: float values of the tensors its nodes read


def analyse(
    qdq: onnx.ModelProto, source: onnx.ModelProto, feeds: Sequence[Feed], threads: int = 0
) -> list[TensorNoise]:
    """Every quantized tensor of ``qdq`` (quantized from float ``source``) on ``feeds``, in graph order."""
    with scratch("noise") as tmp:
        folder = Path(tmp)
        float_path, qdq_path = folder / "float.onnx", folder / "qdq.onnx"
        onnx.save(source, float_path)
        onnx.save(qdq, qdq_path)
        floats, float_aug = _augment(float_path, folder / "float_aug.onnx")
        iso, fed = isolated(qdq, floats)
        _, iso_aug = _augment(_saved(iso, folder / "iso.onnx"), folder / "iso_aug.onnx")
        _, qdq_aug = _augment(qdq_path, folder / "qdq_aug.onnx")
        sessions = _Sessions(float_aug, qdq_aug, iso_aug, threads)
        energy = _Energies()
        for feed in feeds:  # one frame at a time: a frame's activations are freed before the next's
            sessions.run(feed, fed, energy)
        weights = _weight_snrs(create_weight_matching(str(float_path), str(qdq_path)))
    return _figures(qdq, source, energy, weights)


class _Energies:
    """Signal and noise energies per tensor, accumulated over chunks of frames."""

    def __init__(self) -> None:
        self.signal: dict[str, float] = defaultdict(float)
        self.noise: dict[str, dict[str, float]] = {"accumulated": defaultdict(float), "local": defaultdict(float)}

    def add(self, kind: str, matching: dict[str, dict[str, Sequence[np.ndarray]]]) -> None:
        # qdq_err is not used: each pair goes in without its values before the Q/DQ, so it costs nothing
        matched = {k: {**v, "pre_qdq": []} for k, v in matching.items() if v.get("float")}
        for name, err in compute_activation_error(matched, err_func=_noise_energy).items():
            self.noise[kind][name] += err["xmodel_err"]
        if kind == "accumulated":  # the float values' energy, once per frame
            for name, match in matched.items():
                self.signal[name] += sum(_energy(a) for a in match["float"])

    def snr(self, kind: str, name: str) -> float:
        return snr_db(self.signal[name], self.noise[kind][name])


def _weight_snrs(matching: dict[str, dict[str, np.ndarray]]) -> dict[str, float]:
    """compute_weight_error's SNR per kernel; a scalar constant (a LayerNorm's epsilon) comes back
    from create_weight_matching as a numpy scalar, which that function cannot concatenate."""
    return compute_weight_error({k: {s: np.atleast_1d(a) for s, a in m.items()} for k, m in matching.items()})


def _noise_energy(x: Sequence[np.ndarray], y: Sequence[np.ndarray]) -> float:
    """``compute_activation_error``'s err_func, as the energy of the difference (0 for the unused qdq_err)."""
    return float(sum(_energy(a - b) for a, b in zip(x, y, strict=True))) if len(x) else 0.0


def _energy(x: np.ndarray) -> float:
    # BLAS's dot in the tensor's own type: a 400k-value tensor's energy to 3e-7 (1e-6 dB), 14x faster
    # than squares summed in float64, which was a sixth of the analysis
    v = np.ascontiguousarray(x).reshape(-1)
    return float(np.dot(v, v)) if v.dtype.kind == "f" else float(np.sum(np.square(v, dtype=np.float64)))


class _Sessions:
    """The three augmented models (float, QDQ, isolated), each opened once. ``collect_activations``
    opens a session per call and keeps every frame's activations; on a 320 px detector that is a
    fresh 100 MB or more per frame, and the page faults cost several times the inference. Its loop
    is kept here as it is (``run(None, feed)``, outputs paired by the ``_ReshapedSavedOutput`` suffix)."""

    def __init__(self, float_aug: Path, qdq_aug: Path, iso_aug: Path, threads: int) -> None:
        # as collect_activations' own default (no graph optimization, so every tensor exists),
        # with the compile's threads and ONNX Runtime's warnings left out
        self.float, self.qdq, self.iso = (session(p, threads, "none") for p in (float_aug, qdq_aug, iso_aug))

    def run(self, feed: Feed, fed: dict[str, str], energy: _Energies) -> None:
        floats = _activations(self.float, feed)
        energy.add("accumulated", create_activation_matching(_activations(self.qdq, feed), floats))
        alone = _activations(self.iso, {**feed, **{name + FED: floats[name][0] for name in fed}})
        energy.add("local", create_activation_matching(alone, floats))


def _activations(opened: InferenceSession, feed: Feed) -> dict[str, list[np.ndarray]]:
    """``collect_activations``' result for one frame, from an open session."""
    names = [o.name for o in opened.get_outputs()]
    return {n[: -len(SAVED)]: [v] for n, v in zip(names, opened.run(None, feed), strict=True) if n.endswith(SAVED)}


def _augment(path: Path, out: Path) -> tuple[dict[str, int], Path]:
    """The model at ``path`` with every float tensor an output (qdq_loss_debug), without the
    isolated model's own feeds; and the saved tensors' element types by name."""
    modify_model_output_intermediate_tensors(str(path), str(out))
    model = onnx.load(str(out))
    keep = [o for o in model.graph.output if FED not in o.name]
    if len(keep) < len(model.graph.output):
        del model.graph.output[:]
        model.graph.output.extend(keep)
        onnx.save(model, str(out))
    saved = {o.name[: -len(SAVED)]: o.type.tensor_type.elem_type for o in keep if o.name.endswith(SAVED)}
    return saved, out


def _saved(model: onnx.ModelProto, path: Path) -> Path:
    onnx.save(model, str(path))
    return path


def float_name(tensor: str) -> str:
    """The float model's name of a tensor the QDQ model quantizes (a graph output is renamed)."""
    return tensor[: -len(QUANT_INPUT_SUFFIX)] if tensor.endswith(QUANT_INPUT_SUFFIX) else tensor


def isolated(qdq: onnx.ModelProto, floats: dict[str, int]) -> tuple[onnx.ModelProto, dict[str, str]]:
    """``qdq`` with each node (but Q and DQ) reading its float activation inputs from the float
    model: a dequantized activation, or an activation left unquantized, becomes the float model's
    value of it, fed flat (as collect_activations gives it) and reshaped to the tensor's shape here.
    Weights keep their Q/DQ. Returns the model and, for each fed tensor, its name in ``qdq``."""
    model = onnx.ModelProto()
    model.CopyFrom(qdq)
    graph = model.graph
    graph_inputs = {v.name for v in graph.input}
    made_by = {out: node for node in graph.node for out in node.output}
    from_float = {
        n.output[0]: made_by[n.input[0]].input[0]
        for n in graph.node
        if n.op_type == DEQUANT_OP_NAME and n.input[0] in made_by and made_by[n.input[0]].op_type == QUANT_OP_NAME
    }
    fed: dict[str, str] = {}  # float name -> the tensor in qdq that has its shape
    nodes: list[onnx.NodeProto] = []
    for node in graph.node:
        if node.op_type not in (QUANT_OP_NAME, DEQUANT_OP_NAME):
            for j, name in enumerate(node.input):
                own = from_float.get(name, name if name in made_by else None)
                if own is None or float_name(own) not in floats:
                    continue
                value = float_name(own)
                if own in graph_inputs:
                    node.input[j] = own
                    continue
                if value not in fed:
                    fed[value] = own
                    nodes += _unflatten(value, own)
                node.input[j] = value + FED + "_value"
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    graph.input.extend(helper.make_tensor_value_info(name + FED, floats[name], [None]) for name in fed)
    return model, fed


def _unflatten(name: str, like: str) -> list[onnx.NodeProto]:
    shape = name + FED + "_shape"
    return [
        helper.make_node("Shape", [like], [shape], name=shape),
        helper.make_node("Reshape", [name + FED, shape], [name + FED + "_value"], name=name + FED + "_value"),
    ]


def _bits(qdq: onnx.ModelProto) -> dict[str, int]:
    """Each quantized tensor's grid width, from its QuantizeLinear's zero point (uint8 when it has none)."""
    inits = {t.name: t for t in qdq.graph.initializer}
    found: dict[str, int] = {}
    for node in qdq.graph.node:
        if node.op_type == QUANT_OP_NAME:
            zp = inits.get(node.input[2]) if len(node.input) > 2 else None
            found[float_name(node.input[0])] = bits_of(zp.data_type) if zp is not None else 8
    return found


def _kernels(qdq: onnx.ModelProto) -> dict[str, str]:
    """Each quantized tensor made by a layer with a symmetric quantized kernel (its second input):
    the kernel's float name. A constant with a nonzero zero point is left out: create_weight_matching
    subtracts the zero point in the stored integer type (onnxruntime 1.32's ``_run_dequantize_linear``),
    so a uint8 constant wraps around and its SNR would be garbage."""
    graph = qdq.graph
    inits = {t.name: t for t in graph.initializer}
    symmetric = {
        n.output[0]: n.input[0]
        for n in graph.node
        if n.op_type == DEQUANT_OP_NAME
        and n.input[0] in inits
        and (len(n.input) < 3 or not np.any(numpy_helper.to_array(inits[n.input[2]])))
    }
    found: dict[str, str] = {}
    for node in graph.node:
        kernel = symmetric.get(node.input[1]) if len(node.input) > 1 else None
        if kernel and kernel.endswith(TENSOR_NAME_QUANT_SUFFIX):
            found[float_name(node.output[0])] = kernel[: -len(TENSOR_NAME_QUANT_SUFFIX)]
    return found


def _figures(
    qdq: onnx.ModelProto, source: onnx.ModelProto, energy: _Energies, weights: dict[str, float]
) -> list[TensorNoise]:
    tensors = sorted(energy.noise["accumulated"])
    named, bits, kernels = producers(source, tensors), _bits(qdq), _kernels(qdq)
    found = [
        TensorNoise(
            layer=named[t].layer,
            op=named[t].op,
            tensor=t,
            index=named[t].index,
            accumulated_snr_db=energy.snr("accumulated", t),
            local_snr_db=energy.snr("local", t),
            weight_snr_db=weights.get(kernels.get(t, "")),
            bits=bits.get(t),
        )
        for t in tensors
    ]
    return sorted(found, key=lambda t: (t.index, t.tensor))

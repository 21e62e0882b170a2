"""Model zoo: small torchvision networks exported to ONNX, and a torch-free layer classifier.

``python benchmarks/zoo_export.py --out DIR [--only NAME,...] [--kinds] [--no-export]``

Every network is built with random weights (no pretrained weights can be downloaded here), at a
small resolution so quantize/compile runs stay short, with *settled* BatchNorm: the model runs
a few seeded random batches in train mode under ``torch.no_grad()`` so the BN running
statistics describe real activations, then goes to eval mode and is exported with BN folded
into the convolutions (opset 17, static batch 1, weights embedded, named nodes). Each file is
then checked with ``onnx.checker``, run in ONNX Runtime on the CPU, and compared with torch.

``efficientnet_b0`` stands in for EfficientNet-Lite0 (not in torchvision): it has SiLU and
squeeze-excite where Lite0 has ReLU6 and none. ``squeezenet1_1`` and ``vit`` have no BatchNorm,
so settling leaves them as initialised.

torch and torchvision (the optional ``zoo`` extra) are imported only inside the export
functions: ``layer_kinds`` and ``--no-export`` need only onnx and onnxruntime.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

if TYPE_CHECKING:
    import torch

OPSET = 17
SEED = 0
SETTLE_STEPS = 10
SETTLE_BATCH = 8


@dataclass(frozen=True)
class Entry:
    """A zoo member: how to build it (a zero-argument factory) and its NCHW input shape."""

    build: Callable[[], torch.nn.Module]
    shape: tuple[int, int, int, int]


@dataclass
class Row:
    """One line of the summary table."""

    name: str
    shape: tuple[int, ...]
    params: int
    nodes: int
    size: int
    ort_ok: bool
    diff: float | None
    exporter: str
    notes: str


# ---------------------------------------------------------------- the networks (torch, lazily)


def _tv(name: str, **kwargs: Any) -> Callable[[], torch.nn.Module]:
    """A factory for a torchvision classifier with random weights."""

    def build() -> torch.nn.Module:
        import torchvision

        return getattr(torchvision.models, name)(weights=None, **kwargs)

    return build


def _lraspp() -> torch.nn.Module:
    from torchvision.models.segmentation import lraspp_mobilenet_v3_large

    return lraspp_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=21)


def _resnet18_fpn() -> torch.nn.Module:
    # Built by hand rather than with resnet_fpn_backbone: that one swaps in FrozenBatchNorm2d,
    # whose statistics are fixed buffers and so could not be settled.
    import torchvision
    from torchvision.models.detection.backbone_utils import BackboneWithFPN

    body = torchvision.models.resnet18(weights=None)
    layers = {f"layer{i}": str(i - 1) for i in range(1, 5)}
    return BackboneWithFPN(body, layers, [64, 128, 256, 512], out_channels=64)


def _vit() -> torch.nn.Module:
    import torch
    from torchvision.models import VisionTransformer

    model = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4, hidden_dim=64, mlp_dim=128)
    # torchvision zero-initialises the head (right for fine-tuning): with random weights the
    # logits would be all zero, a useless output to score. Unit-scale logits instead.
    torch.nn.init.normal_(model.heads.head.weight, std=64**-0.5)
    return model


def _unet() -> torch.nn.Module:
    import torch
    import torch.nn as nn

    def block(cin: int, cout: int) -> nn.Module:
        return nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(),
            nn.Conv2d(cout, cout, 3, padding=1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(),
        )

    def up(cin: int, cout: int, transpose: bool) -> nn.Module:
        # Both ways up appear so the zoo holds ConvTranspose and Resize->Conv layers.
        if transpose:
            return nn.ConvTranspose2d(cin, cout, 2, stride=2)
        return nn.Sequential(nn.Upsample(scale_factor=2.0, mode="nearest"), nn.Conv2d(cin, cout, 1))

    class UNet(nn.Module):
        """Three MaxPool levels down, a bottleneck, three up with Concat skips, 2-class head."""

        def __init__(self, widths: tuple[int, ...] = (16, 32, 64), classes: int = 2) -> None:
            super().__init__()
            chans = (3, *widths)
            self.down = nn.ModuleList(block(chans[i], chans[i + 1]) for i in range(len(widths)))
            self.pool = nn.MaxPool2d(2)
            self.bottom = block(widths[-1], 2 * widths[-1])
            ups = [(2 * w, w, i % 2 == 0) for i, w in enumerate(reversed(widths))]
            self.up = nn.ModuleList(up(cin, cout, t) for cin, cout, t in ups)
            self.fuse = nn.ModuleList(block(2 * w, w) for w in reversed(widths))
            self.head = nn.Conv2d(widths[0], classes, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            skips = []
            for down in self.down:
                x = down(x)
                skips.append(x)
                x = self.pool(x)
            x = self.bottom(x)
            for upper, fuse, skip in zip(self.up, self.fuse, reversed(skips), strict=True):
                x = fuse(torch.cat([upper(x), skip], dim=1))
            return self.head(x)

    return UNet()


ZOO: dict[str, Entry] = {
    "mobilenet_v2": Entry(_tv("mobilenet_v2"), (1, 3, 64, 64)),
    "mobilenet_v3_small": Entry(_tv("mobilenet_v3_small"), (1, 3, 64, 64)),
    "resnet18": Entry(_tv("resnet18"), (1, 3, 64, 64)),
    "squeezenet1_1": Entry(_tv("squeezenet1_1"), (1, 3, 64, 64)),
    "shufflenet_v2_x0_5": Entry(_tv("shufflenet_v2_x0_5"), (1, 3, 64, 64)),
    # Dense-output networks get 96x96 so their stride-32 maps are more than a pixel or two.
    "lraspp": Entry(_lraspp, (1, 3, 96, 96)),
    "resnet18_fpn": Entry(_resnet18_fpn, (1, 3, 96, 96)),
    "unet": Entry(_unet, (1, 3, 64, 64)),
    "vit": Entry(_vit, (1, 3, 32, 32)),
    "efficientnet_b0": Entry(_tv("efficientnet_b0"), (1, 3, 64, 64)),
}


# ---------------------------------------------------------------- export (torch, lazily)


def _frames(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    # Uniform [0, 1), the same distribution as loop's seeded controlled inputs (loop/author/frames.py),
    # so the settled BN statistics match what the tool will feed the model.
    import torch

    return torch.rand(shape, generator=generator)


def settle_batchnorm(model: torch.nn.Module, shape: tuple[int, ...]) -> None:
    """Run seeded random batches in train mode so BN running stats describe real activations."""
    import torch

    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    saved = [m.momentum for m in norms]
    for m in norms:
        # momentum=None keeps an exact running average over the steps, not an EMA still
        # weighted toward the (mean 0, var 1) initial buffers after only ten steps.
        m.reset_running_stats()
        m.momentum = None
    generator = torch.Generator().manual_seed(SEED + 1)
    model.train()
    with torch.no_grad():
        for _ in range(SETTLE_STEPS if norms else 0):
            model(_frames((SETTLE_BATCH, *shape[1:]), generator))
    for m, momentum in zip(norms, saved, strict=True):
        m.momentum = momentum
    model.eval()


def _plain(model: torch.nn.Module, sample: torch.Tensor) -> tuple[torch.nn.Module, list[str]]:
    """Wrap a model whose output is a dict so the ONNX graph has plain outputs; name them."""
    import torch

    with torch.no_grad():
        out = model(sample)
    if not isinstance(out, dict):
        return model, ["output"]
    keys = list(out)

    class Plain(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            result = self.inner(x)
            return tuple(result[k] for k in keys)

    names = ["output"] if len(keys) == 1 else [f"output_{k}" for k in keys]
    return Plain().eval(), names


def _export(model: torch.nn.Module, sample: torch.Tensor, outputs: list[str]) -> tuple[onnx.ModelProto, str]:
    """Export with the legacy (TorchScript) exporter for its /module/path/Op node names; fall
    back to the dynamo exporter where the legacy one fails."""
    import io
    import warnings

    import torch

    buffer = io.BytesIO()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the legacy exporter's deprecation notice
            torch.onnx.export(
                model,
                (sample,),
                buffer,
                dynamo=False,
                opset_version=OPSET,
                input_names=["input"],
                output_names=outputs,
                do_constant_folding=True,
                training=torch.onnx.TrainingMode.EVAL,
            )
        return onnx.load_from_string(buffer.getvalue()), "legacy"
    except Exception as error:
        reason = f"{type(error).__name__}: {error}"
        print(f"  legacy exporter failed ({reason}); trying dynamo", file=sys.stderr)
    program = torch.onnx.export(
        model,
        (sample,),
        dynamo=True,
        opset_version=OPSET,
        input_names=["input"],
        output_names=outputs,
        optimize=True,
        external_data=False,
    )
    return program.model_proto, "dynamo"


def _unshare_identity_weights(model: onnx.ModelProto) -> int:
    """Replace each Identity of an initializer with a copy of that initializer.

    The legacy exporter stores byte-identical tensors once and fans them out through Identity
    nodes; a per-layer edit or fingerprint of one layer's weights would then touch its twins.
    """
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    keep = []
    for node in graph.node:
        if node.op_type == "Identity" and node.input[0] in inits:
            copy = onnx.TensorProto()
            copy.CopyFrom(inits[node.input[0]])
            copy.name = node.output[0]
            graph.initializer.append(copy)
        else:
            keep.append(node)
    removed = len(graph.node) - len(keep)
    del graph.node[:]
    graph.node.extend(keep)
    used = {name for node in graph.node for name in node.input}
    unused = [t for t in graph.initializer if t.name not in used]
    for tensor in unused:
        graph.initializer.remove(tensor)
    return removed


def _fold_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Fold the Shape/Gather/Slice arithmetic the legacy exporter writes for x.size() and
    chunk() (ViT, ShuffleNet, LR-ASPP) into constants: every shape is static here. Only
    constant folding, which keeps node names; onnxscript's full optimize() renames nodes,
    rewrites Flatten and merges equal initializers."""
    import onnx_ir as ir
    import onnxscript.optimizer

    graph = ir.serde.deserialize_model(model)
    onnxscript.optimizer.fold_constants(graph)
    onnxscript.optimizer.remove_unused_nodes(graph)
    return ir.serde.serialize_model(graph)


def export_one(name: str, out: Path, raw: bool = False, size: int | None = None) -> tuple[float, str, int]:
    """Build, settle, export and save one zoo member; return (max |ORT - torch|, exporter,
    Identity nodes removed). ``raw`` keeps the file as the exporter wrote it (shared weights
    behind Identity nodes, shape arithmetic), which is what a user brings to loop."""
    import torch

    entry = ZOO[name]
    if size:  # the same network at another resolution (a cost benchmark wants 224 px)
        entry = dataclasses.replace(entry, shape=(*entry.shape[:2], size, size))
    torch.manual_seed(SEED)  # the random weights
    model = entry.build()
    settle_batchnorm(model, entry.shape)
    sample = _frames(entry.shape, torch.Generator().manual_seed(SEED + 2))
    wrapped, outputs = _plain(model, sample)
    proto, exporter = _export(wrapped, sample, outputs)
    removed = 0
    if not raw:
        removed = _unshare_identity_weights(proto)
        # Shapes first: the folder needs them to turn Shape ops into constants.
        proto = onnx.shape_inference.infer_shapes(proto)
        proto = onnx.shape_inference.infer_shapes(_fold_shapes(proto))
    path = out / f"{name}.onnx"
    onnx.save_model(proto, str(path), save_as_external_data=False)
    with torch.no_grad():
        expected = wrapped(sample)
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = _run_ort(path, sample.numpy())
    diff = max(float(np.abs(g - e.numpy()).max()) for g, e in zip(got, expected, strict=True))
    return diff, exporter, removed


# ---------------------------------------------------------------- checks (no torch)


def _run_ort(path: Path, frame: np.ndarray) -> list[np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # the machine is shared; these graphs are tiny anyway
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: frame})


def _oddities(model: onnx.ModelProto) -> list[str]:
    """Things a consumer of the file may trip on: external data, initializers listed as graph
    inputs, non-static dims, Constant-node weights, one initializer feeding several nodes."""
    graph = model.graph
    inits = {t.name for t in graph.initializer}
    notes = []
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in graph.initializer):
        notes.append("external data")
    if any(i.name in inits for i in graph.input):
        notes.append("initializers in graph.input")
    for value in [*graph.input, *graph.output]:
        if any(not d.HasField("dim_value") for d in value.type.tensor_type.shape.dim):
            notes.append(f"dynamic dim in {value.name}")
    constants = {o for n in graph.node if n.op_type == "Constant" for o in n.output}
    if constants:
        notes.append(f"{len(constants)} Constant nodes")
    weighted = [n for n in graph.node if n.op_type in WEIGHTED]
    if any(set(n.input) & constants for n in weighted):
        notes.append("Constant-node weights")
    # A weight or bias read by two nodes: editing one layer would move the other.
    uses: dict[str, int] = {}
    for node in graph.node:
        for name in set(node.input) & inits:
            uses[name] = uses.get(name, 0) + 1
    shared = {i for n in weighted for i in n.input if uses.get(i, 0) > 1}
    if shared:
        notes.append(f"{len(shared)} shared weights")
    return notes


def audit(name: str, path: Path, diff: float | None, exporter: str) -> Row:
    """Load the saved file, check it, run it in ONNX Runtime, and measure it."""
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    dims = tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim)
    frame = np.random.default_rng(SEED).random(dims, dtype=np.float32)
    try:
        ok = all(np.isfinite(o).all() for o in _run_ort(path, frame))
    except Exception as error:
        print(f"  {name}: ONNX Runtime failed: {error}", file=sys.stderr)
        ok = False
    params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    notes = ", ".join(_oddities(model))
    size = path.stat().st_size
    return Row(name, dims, params, len(model.graph.node), size, ok, diff, exporter, notes)


# ---------------------------------------------------------------- layer kinds (no torch)

WEIGHTED = ("Conv", "ConvTranspose", "Gemm", "MatMul")
ACTIVATIONS = frozenset(
    {
        "Relu",
        "Clip",
        "HardSwish",
        "HardSigmoid",
        "Sigmoid",
        "Tanh",
        "LeakyRelu",
        "PRelu",
        "Elu",
        "Selu",
        "Celu",
        "Gelu",
        "Softplus",
        "Mish",
        "ThresholdedRelu",
    }
)
GRID_OPS = frozenset(
    {
        "MaxPool",
        "Flatten",
        "Reshape",
        "Slice",
        "Resize",
        "Upsample",
        "Gather",
        "Transpose",
        "Split",
        "Squeeze",
        "Unsqueeze",
        "DepthToSpace",
        "SpaceToDepth",
    }
)
GATES = frozenset({"Sigmoid", "HardSigmoid", "Erf", "Tanh"})
KINDS = ("after_activation", "feeds_add", "feeds_concat", "behind_grid_op", "depthwise", "gemm_matmul", "last")


class _Graph:
    """Producer/consumer lookups over a graph, seeing through Identity nodes."""

    def __init__(self, model: onnx.ModelProto) -> None:
        graph = model.graph
        self.inits = {t.name: t for t in graph.initializer}
        self.producer: dict[str, onnx.NodeProto] = {}
        self.consumers: dict[str, list[onnx.NodeProto]] = {}
        for node in graph.node:
            for name in node.output:
                self.producer[name] = node
            for name in node.input:
                self.consumers.setdefault(name, []).append(node)
        for node in graph.node:  # Constant nodes hold weights the same way initializers do
            if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
                self.inits.setdefault(node.output[0], node.attribute[0].t)

    def source(self, name: str) -> str:
        node = self.producer.get(name)
        while node is not None and node.op_type == "Identity":
            name = node.input[0]
            node = self.producer.get(name)
        return name

    def users(self, name: str) -> list[onnx.NodeProto]:
        found = []
        for node in self.consumers.get(name, []):
            found.extend(self.users(node.output[0]) if node.op_type == "Identity" else [node])
        return found

    def is_const(self, name: str) -> bool:
        return self.source(name) in self.inits

    def strip(self, name: str, ops: tuple[str, ...]) -> str:
        """Walk back through ops of these types that only scale or shift by a constant."""
        name = self.source(name)
        node = self.producer.get(name)
        while node is not None and node.op_type in ops and len(node.input) == 2:
            live = [i for i in node.input if not self.is_const(i)]
            if len(live) != 1:
                break
            name = self.source(live[0])
            node = self.producer.get(name)
        return name

    def operands(self, name: str, depth: int = 2) -> set[str]:
        """The non-constant factors of a tree of Mul nodes ending in this tensor."""
        name = self.source(name)
        node = self.producer.get(name)
        if depth == 0 or node is None or node.op_type != "Mul":
            return {name}
        live = [i for i in node.input if not self.is_const(i)]
        return set().union(*(self.operands(i, depth - 1) for i in live))

    def is_self_gated(self, name: str) -> bool:
        """An activation spelled out by the exporter as x * gate(x): SiLU (x * Sigmoid(x)),
        GELU (0.5 * x * (1 + Erf(x / sqrt 2))), HardSwish. A squeeze-excite Mul gates x by
        another tensor, so it is not one."""
        node = self.producer.get(self.source(name))
        if node is None or node.op_type != "Mul":
            return False
        factors = self.operands(name)
        for factor in factors:
            gate = self.producer.get(self.strip(factor, ("Add", "Mul", "Div")))
            if gate is not None and gate.op_type in GATES and self.strip(gate.input[0], ("Mul", "Div")) in factors:
                return True
        return False


def _layer_io(g: _Graph, node: onnx.NodeProto) -> tuple[str, str] | None:
    """(data input, weight) of a weighted layer, or None if its weight is not a constant."""
    if node.op_type == "MatMul":
        for data, weight in ((node.input[0], node.input[1]), (node.input[1], node.input[0])):
            if g.is_const(weight) and not g.is_const(data):
                return data, weight
        return None
    return (node.input[0], node.input[1]) if g.is_const(node.input[1]) else None


def _downstream(g: _Graph, output: str) -> set[str]:
    """Op types that read a layer's output, looking past its own bias Add (MatMul + Add(bias)
    is how exporters write a Linear on 3-D input) and then past one activation."""
    users = g.users(output)
    bias = [n for n in users if n.op_type == "Add" and any(g.is_const(i) for i in n.input)]
    if len(users) == 1 and bias:
        users = g.users(bias[0].output[0])
    ops = {n.op_type for n in users}
    for node in users:
        if node.op_type in ACTIVATIONS or g.is_self_gated(node.output[0]):
            ops |= {n.op_type for n in g.users(node.output[0])}
    return ops


def _is_grid(node: onnx.NodeProto | None) -> bool:
    """A grid op, or a ReduceMean that drops the axes it reduces (GlobalAveragePool->Flatten
    written as one op, as ShuffleNet's x.mean([2, 3]) exports)."""
    if node is None:
        return False
    keepdims = next((a.i for a in node.attribute if a.name == "keepdims"), 1)
    return node.op_type in GRID_OPS or (node.op_type == "ReduceMean" and keepdims == 0)


def _is_depthwise(g: _Graph, node: onnx.NodeProto, weight: str) -> bool:
    group = next((a.i for a in node.attribute if a.name == "group"), 1)
    dims = list(g.inits[g.source(weight)].dims)
    return node.op_type == "Conv" and group > 1 and len(dims) > 1 and dims[1] == 1


def layer_kinds(model: onnx.ModelProto) -> dict[str, list[str]]:
    """Classify weighted layers (Conv, ConvTranspose, Gemm, and MatMul whose weight is an
    initializer or a Constant node) by node name into kinds; a layer may have several.

    after_activation  its data input is produced by an activation (Relu, Clip, HardSwish,
                      Sigmoid, ..., or SiLU/GELU spelled out as x * gate(x))
    feeds_add         its output, possibly through its own bias Add and one activation,
                      feeds an Add (a residual or a merge)
    feeds_concat      the same, into a Concat
    behind_grid_op    its data input is produced by a grid op (MaxPool, Flatten, Reshape,
                      Slice, Resize, Gather, Transpose, Split, Squeeze, ..., or a
                      ReduceMean without keepdims)
    depthwise         a Conv with group == input channels > 1
    gemm_matmul       a Gemm or MatMul
    last              the last weighted layer in graph order
    Nameless nodes are named by their first output. Every kind is a key, empty or not.
    """
    g = _Graph(model)
    kinds: dict[str, list[str]] = {k: [] for k in KINDS}
    last = None
    for node in model.graph.node:
        io = _layer_io(g, node) if node.op_type in WEIGHTED else None
        if io is None:
            continue
        data, weight = io
        name = node.name or node.output[0]
        last = name
        before = g.producer.get(g.source(data))
        after = _downstream(g, node.output[0])
        tests = {
            "after_activation": (before is not None and before.op_type in ACTIVATIONS) or g.is_self_gated(data),
            "feeds_add": "Add" in after,
            "feeds_concat": "Concat" in after,
            "behind_grid_op": _is_grid(before),
            "depthwise": _is_depthwise(g, node, weight),
            "gemm_matmul": node.op_type in ("Gemm", "MatMul"),
        }
        for kind, hit in tests.items():
            if hit:
                kinds[kind].append(name)
    if last is not None:
        kinds["last"].append(last)
    return kinds


# ---------------------------------------------------------------- the command


def _table(rows: list[Row]) -> str:
    head = (
        f"{'model':<20} {'input':<16} {'params':>10} {'nodes':>6} {'size':>9} {'ORT':>4} "
        f"{'|ORT-torch|':>11}  exporter  notes"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        diff = "-" if r.diff is None else f"{r.diff:.1e}"
        lines.append(
            f"{r.name:<20} {'x'.join(map(str, r.shape)):<16} {r.params:>10,} {r.nodes:>6} "
            f"{r.size / 1e6:>7.2f}MB {'ok' if r.ort_ok else 'FAIL':>4} {diff:>11}  "
            f"{r.exporter:<8}  {r.notes}"
        )
    return "\n".join(lines)


def _print_kinds(name: str, model: onnx.ModelProto) -> None:
    kinds = layer_kinds(model)
    print(f"{name}:")
    for kind in KINDS:
        found = kinds[kind]
        example = found[0] if found else "-"
        print(f"  {kind:<17} {len(found):>3}  {example}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--out", type=Path, required=True, help="folder for one .onnx per model")
    parser.add_argument("--only", default="", help="comma-separated names (default: all)")
    parser.add_argument("--kinds", action="store_true", help="print the layer kinds per model")
    parser.add_argument(
        "--raw", action="store_true", help="keep each file as the exporter wrote it (no unsharing, no folding)"
    )
    parser.add_argument("--size", type=int, default=None, help="input height and width (default: each model's own)")
    parser.add_argument(
        "--no-export", action="store_true", help="check the .onnx files already in --out (no torch needed)"
    )
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(ZOO)
    unknown = sorted(set(names) - set(ZOO))
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(ZOO)}")
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.no_export:
        import torch

        torch.set_num_threads(1)  # the machine is shared; one core each is enough here
    rows, failed = [], []
    for name in names:
        path = args.out / f"{name}.onnx"
        diff, exporter = None, "-"
        try:
            if not args.no_export:
                print(f"exporting {name}", file=sys.stderr)
                diff, exporter, removed = export_one(name, args.out, args.raw, args.size)
                if removed:
                    print(f"  unshared {removed} Identity-fanned initializers", file=sys.stderr)
            rows.append(audit(name, path, diff, exporter))
        except Exception as error:
            failed.append(name)
            print(f"  {name} FAILED: {type(error).__name__}: {error}", file=sys.stderr)
    print(_table(rows))
    if args.kinds:
        for row in rows:
            _print_kinds(row.name, onnx.load(str(args.out / f"{row.name}.onnx")))
    for row in rows:  # a content hash per file, so a re-export can be checked for determinism
        digest = hashlib.sha256((args.out / f"{row.name}.onnx").read_bytes()).hexdigest()[:16]
        print(f"sha256 {row.name} {digest}", file=sys.stderr)
    return 1 if failed or not all(r.ort_ok for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

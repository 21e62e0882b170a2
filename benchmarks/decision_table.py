"""How often a generation's race ranks a real 5 % and 10 % difference right.

squeezenet1_1 at 64 px (``benchmarks/zoo_export.py``; pass its path), compiled by ``loop``'s own
compiler (``io: float32``). Slower twins are made by hanging a real extra computation on the
artifact's output (a MatMul on the input, times 0, added to the output: the same outputs, more
work). The narrowest twin's extra nodes alone cost several % here, so two more are sized by
measurement to run about 5 % and 10 % slower than it. True ratios are measured first, long
(target +-0.5 %). Then 20 generations, each a race as a study runs it
(``loop.measure.rounds.race``, target +-3 %, budget 120 s) of the reference, a candidate
identical to it, and the three twins. Per pair, over the 20:

- **right**: the ratios are in the true order;
- **told apart**: the intervals (widened by the A/A floor, as ``best``/``pareto`` use them) do
  not overlap, in the true order (what ``pareto`` would act on);
- **wrong and told apart**: do not overlap in the wrong order (must be 0);
- for the identical candidate against the reference: how often its interval missed 1.0.

Run: ``python benchmarks/decision_table.py squeezenet1_1.onnx [--generations 20]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from loop.author.frames import seeded
from loop.author.sweepfile import MeasureSpec
from loop.compilers.base import run_compile
from loop.compilers.onnxruntime import OnnxRuntimeCompiler
from loop.core.registry import make_device
from loop.core.vocab import Artifact, CompileOptions
from loop.measure.rounds import Race, race
from loop.measure.stats import widened

SPEC = MeasureSpec(warmup=10, threads=1)


def compiled(model_path: Path) -> Artifact:
    model = onnx.load(str(model_path))
    shape = tuple(d.dim_value or 1 for d in model.graph.input[0].type.tensor_type.shape.dim)
    result = run_compile(
        OnnxRuntimeCompiler(),
        model.SerializeToString(),
        seeded(shape, 16, 0),
        CompileOptions(bias_correction=False, io="float32"),
    )
    assert result.ok and result.artifact is not None, result.error
    return result.artifact


def slower(artifact: Artifact, width: int, depth: int = 1) -> Artifact:
    """The artifact plus ``depth`` MatMuls of ``width`` on its input, added to its output x 0."""
    model = onnx.load_from_string(artifact.data)
    g, x, y = model.graph, artifact.inputs[0].name, artifact.outputs[0].name
    size = int(np.prod(artifact.inputs[0].shape))
    rng = np.random.default_rng(0)
    g.initializer.extend(
        [
            numpy_helper.from_array(np.array([1, size], np.int64), "extra_shape"),
            numpy_helper.from_array(rng.standard_normal((size, width)).astype(np.float32) / size, "extra_w0"),
            *[
                numpy_helper.from_array(rng.standard_normal((width, width)).astype(np.float32) / width, f"extra_w{k}")
                for k in range(1, depth)
            ],
            numpy_helper.from_array(np.array(0.0, np.float32), "extra_zero"),
        ]
    )
    producer = next(n for n in g.node if y in n.output)
    producer.output[list(producer.output).index(y)] = "extra_before"
    nodes = [helper.make_node("Reshape", [x, "extra_shape"], ["extra_v0"])]
    nodes += [helper.make_node("MatMul", [f"extra_v{k}", f"extra_w{k}"], [f"extra_v{k + 1}"]) for k in range(depth)]
    nodes += [
        helper.make_node("ReduceSum", [f"extra_v{depth}"], ["extra_sum"], keepdims=0),
        helper.make_node("Mul", ["extra_sum", "extra_zero"], ["extra_nil"]),
        helper.make_node("Add", ["extra_before", "extra_nil"], [y]),
    ]
    g.node.extend(nodes)
    assert g.output[0].type.tensor_type.elem_type == TensorProto.FLOAT
    return dataclasses.replace(artifact, data=model.SerializeToString())


def true_ratio(device: Any, a: Artifact, b: Artifact, pct: float = 0.5, budget_s: float = 60) -> tuple[float, ...]:
    found = race(device, [a, b], SPEC, target_pct=pct, budget_s=budget_s)
    return found.ratios[1]  # type: ignore[return-value]


def sized(device: object, ref: Artifact, a: Artifact, target: float) -> tuple[Artifact, float]:
    """A twin of ``ref`` running ``target`` as fast as ``a`` (the narrowest twin: the extra
    nodes alone cost several % here): widths by bisection on measured ratios."""
    lo, hi = 1, 256
    best: tuple[Artifact, float] = (a, 1.0)
    for _ in range(8):
        width = (lo + hi) // 2
        twin = slower(ref, width)
        ratio = true_ratio(device, a, twin, 0.5, 20)[0]
        if abs(ratio - target) < abs(best[1] - target):
            best = (twin, ratio)
        lo, hi = (width, hi) if ratio > target else (lo, width)
    return best


def told(r: Race, i: int, j: int) -> tuple[float, float, float]:
    return widened(r.ratios[i], r.floor_pct)  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("model", type=Path)
    parser.add_argument("--generations", type=int, default=20)
    args = parser.parse_args()
    device = make_device("onnxruntime")
    ref = compiled(args.model)
    narrow = slower(ref, 1)
    (b5, r5), (b10, r10) = sized(device, ref, narrow, 0.95), sized(device, ref, narrow, 0.90)
    truth = {1: 1.0, **{i: true_ratio(device, ref, twin)[0] for i, twin in ((2, narrow), (3, b5), (4, b10))}}
    print(f"twins sized at {r5:.4f} and {r10:.4f} of the narrowest; all measured long against the reference:")
    print(f"  narrowest {truth[2]:.4f}, twin 5 {truth[3]:.4f}, twin 10 {truth[4]:.4f}")
    pairs = {
        f"{100 * (1 - truth[3] / truth[2]):.1f} % (narrowest vs twin 5)": (2, 3),
        f"{100 * (1 - truth[4] / truth[2]):.1f} % (narrowest vs twin 10)": (2, 4),
        f"{100 * (1 - truth[4] / truth[3]):.1f} % (twin 5 vs twin 10)": (3, 4),
    }
    tally = {k: [0, 0, 0] for k in pairs}
    missed, walls, rounds = 0, [], []
    for g in range(args.generations):
        t0 = time.perf_counter()
        r = race(device, [ref, ref, narrow, b5, b10], SPEC, target_pct=3.0, budget_s=120)
        walls.append(time.perf_counter() - t0)
        rounds.append(r.rounds)
        same = told(r, 1, 1)
        missed += not (same[1] <= 1.0 <= same[2])
        for name, (i, j) in pairs.items():
            fast, slow = (i, j) if truth[i] > truth[j] else (j, i)
            f, s = told(r, fast, fast), told(r, slow, slow)
            tally[name][0] += f[0] > s[0]
            tally[name][1] += f[1] > s[2]
            tally[name][2] += s[1] > f[2]
        print(f"generation {g}: {r.rounds} rounds, {walls[-1]:.1f} s, floor +-{r.floor_pct:.2f}%")
    n = args.generations
    print(f"\nover {n} generations ({statistics.median(rounds)} rounds, {statistics.median(walls):.1f} s median):")
    print(f"identical candidate's interval missed 1.0: {missed} of {n}")
    for name, (right, apart, wrong) in tally.items():
        print(f"{name}: right {right}/{n}, told apart {apart}/{n}, wrong and told apart {wrong}/{n}")


if __name__ == "__main__":
    main()

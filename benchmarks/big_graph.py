"""Big bases: how long ``loop layers`` and reading a sweep file take as a base grows.

Each base is a chain authored here, one input of [1, 8] through ``n`` nodes:

* ``add-relu``: Add (a shared initializer) then Relu, repeated; no quantized layer;
* ``matmul-relu``: MatMul (a shared weight) then Relu, so every other node is a layer whose
  removed activation is followed;
* ``constant-add``: a Constant node feeding each Add (an export's way of writing weights),
  so half the nodes are rewritten into initializers when the base is read;
* ``relu``: Relu after Relu, one chain of removed activations sharing one grid.

For each it times, in this process, what ``loop layers BASE`` does (load, analyse, the
table) and what ``loop sweep`` does before it writes anything (``spec.parse`` of a sweep
file over the base, backends checked), each from a cold base cache.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from loop.author import graphs
from loop.author.sweepfile import parse
from loop.judge.structure import describe
from loop.report import layers_table

SHAPES = ("add-relu", "matmul-relu", "constant-add", "relu")
TINY = ["--sizes", "400"]
SWEEP = """\
sweep: big
base: {base}
variants:
  - name: base
"""


def _step(shape: str, i: int, x: str) -> list[onnx.NodeProto]:
    """Two nodes of the chain ``shape``, reading ``x`` and writing ``r{i}``."""
    make = helper.make_node
    if shape == "add-relu":
        return [make("Add", [x, "c"], [f"a{i}"], name=f"add{i}"), make("Relu", [f"a{i}"], [f"r{i}"], name=f"relu{i}")]
    if shape == "matmul-relu":
        return [make("MatMul", [x, "w"], [f"a{i}"], name=f"mm{i}"), make("Relu", [f"a{i}"], [f"r{i}"], name=f"relu{i}")]
    if shape == "constant-add":
        value = numpy_helper.from_array(np.full((1, 8), 0.5, np.float32))
        return [make("Constant", [], [f"k{i}"], value=value), make("Add", [x, f"k{i}"], [f"r{i}"])]
    return [make("Relu", [x], [f"a{i}"]), make("Relu", [f"a{i}"], [f"r{i}"])]


def chain(shape: str, nodes: int) -> onnx.ModelProto:
    """A chain of ``nodes`` nodes (rounded down to even) of the given shape."""
    body: list[onnx.NodeProto] = []
    x = "x"
    for i in range(nodes // 2):
        body += _step(shape, i, x)
        x = f"r{i}"
    weights = [
        numpy_helper.from_array(np.full((1, 8), 0.5, np.float32), "c"),
        numpy_helper.from_array(np.eye(8, dtype=np.float32), "w"),
    ]
    graph = helper.make_graph(
        body,
        f"{shape}_{nodes}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 8])],
        weights,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def timed(call: Callable[[], object]) -> float:
    graphs._load.cache_clear()  # each figure reads the base from disk, as a fresh process does
    t0 = time.perf_counter()
    call()
    return time.perf_counter() - t0


def layers(base: Path) -> None:
    layers_table(describe(graphs.load(base, {}).structure))


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--sizes", type=int, nargs="+", default=[5000, 10000, 20000, 100000])
    ap.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    args = ap.parse_args(argv)
    rows = []
    print(f"{'base':<14}{'nodes':>8}{'loop layers s':>15}{'sweep read s':>14}{'us/node':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shapes:
            for n in args.sizes:
                base = Path(tmp) / f"{shape}_{n}.onnx"
                onnx.save(chain(shape, n), str(base))
                sweep = Path(tmp) / f"{shape}_{n}.yaml"
                sweep.write_text(SWEEP.format(base=base.name))
                t_layers = timed(lambda base=base: layers(base))
                t_sweep = timed(lambda sweep=sweep: parse(sweep, check_backends=True))
                per_node = 1e6 * max(t_layers, t_sweep) / n
                print(f"{shape:<14}{n:>8}{t_layers:>15.2f}{t_sweep:>14.2f}{per_node:>9.0f}", flush=True)
                rows.append({"base": shape, "nodes": n, "layers_s": t_layers, "sweep_read_s": t_sweep})
    return {"rows": rows}

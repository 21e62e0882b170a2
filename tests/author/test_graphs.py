"""Reading a base: the work grows with the number of nodes, not with its square.

A 100,000-node base once kept ``loop layers`` and a sweep busy for minutes: the graph was
searched once per node (a consumer map rebuilt per layer, nodes removed one at a time, a
shared grid walked from every tensor of a chain). No time is asserted: the work is counted,
as the Python and builtin calls a read makes (the same on every host), and a sequence searched
by a builtin (``list.remove``, ``.index``, ``.count``) must be searched no more often for a
bigger graph.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from loop.author import graphs
from loop.author.sweepfile import parse
from loop.judge.structure import describe

SMALL, LARGE = 1000, 4000
# Work per node gives 4 calls for each one at a quarter of the size (fewer, with the fixed
# costs of a read); work per node that grows with the graph gives about 16.
MAX_RATIO = 5.0
SEARCHES = ("remove", "index", "count")  # builtins that scan a sequence: each is work per item
HASHED = (set, frozenset, dict)  # ... except where the sequence is hashed


def chain(shape: str, nodes: int) -> onnx.ModelProto:
    """``nodes`` nodes in one chain over a [1, 8] input; see ``step`` for each shape."""
    body: list[onnx.NodeProto] = []
    x = "x"
    for i in range(nodes // 2):
        body += step(shape, i, x)
        x = f"r{i}"
    weights = [
        numpy_helper.from_array(np.full((1, 8), 0.5, np.float32), "c"),
        numpy_helper.from_array(np.eye(8, dtype=np.float32), "w"),
    ]
    graph = helper.make_graph(
        body,
        shape,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 8])],
        weights,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def step(shape: str, i: int, x: str) -> list[onnx.NodeProto]:
    make = helper.make_node
    if shape == "matmul-relu":  # a layer every other node, its removed Relu followed
        return [make("MatMul", [x, "w"], [f"a{i}"], name=f"mm{i}"), make("Relu", [f"a{i}"], [f"r{i}"], name=f"r{i}")]
    if shape == "constant-add":  # Constant nodes, rewritten into initializers as the base is read
        value = numpy_helper.from_array(np.full((1, 8), 0.5, np.float32))
        return [make("Constant", [], [f"k{i}"], value=value), make("Add", [x, f"k{i}"], [f"r{i}"])]
    if shape == "relu":  # one grid shared down the whole chain
        return [make("Relu", [x], [f"a{i}"]), make("Relu", [f"a{i}"], [f"r{i}"])]
    return [make("Add", [x, "c"], [f"a{i}"], name=f"add{i}"), make("Relu", [f"a{i}"], [f"r{i}"], name=f"relu{i}")]


def counted(read: Callable[[], object]) -> tuple[int, int]:
    """The calls ``read`` makes (Python and builtin), and how many of them search a sequence."""
    calls = searches = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal calls, searches
        if event in ("call", "c_call"):
            calls += 1
        if event == "c_call" and arg.__name__ in SEARCHES and not isinstance(getattr(arg, "__self__", None), HASHED):
            searches += 1

    graphs._load.cache_clear()  # read from disk each time, as a new process would
    sys.setprofile(profile)
    try:
        read()
    finally:
        sys.setprofile(None)
    return calls, searches


def work(tmp_path: Path, shape: str, read: Callable[[Path], object]) -> dict[int, tuple[int, int]]:
    """The calls and searches of ``read`` on a chain of SMALL and of LARGE nodes."""
    out = {}
    for n in (SMALL, LARGE):
        base = tmp_path / f"{shape}_{n}.onnx"
        onnx.save(chain(shape, n), str(base))
        out[n] = counted(lambda base=base: read(base))
    return out


def assert_linear(counts: dict[int, tuple[int, int]]) -> None:
    (small, small_searches), (large, large_searches) = counts[SMALL], counts[LARGE]
    assert large / small < MAX_RATIO, counts
    assert large_searches == small_searches, counts


def layers(base: Path) -> None:
    describe(graphs.load(base, {}).structure)


@pytest.mark.parametrize("shape", ["matmul-relu", "constant-add", "relu"])
def test_loop_layers_work_grows_with_the_nodes(tmp_path: Path, shape: str):
    assert_linear(work(tmp_path, shape, layers))


def test_reading_a_sweep_grows_with_the_base_nodes(tmp_path: Path):
    def read(base: Path) -> None:
        sweep = base.with_suffix(".yaml")
        sweep.write_text(f"sweep: big\nbase: {base.name}\nvariants:\n  - name: base\n")
        parse(sweep, check_backends=True)

    for shape in ("matmul-relu", "constant-add", "relu"):
        assert_linear(work(tmp_path, shape, read))


def test_a_chain_reads_as_before(tmp_path: Path):
    """The faster read gives the same layers, grids and clamps on each chain."""
    base = tmp_path / "mm.onnx"
    onnx.save(chain("matmul-relu", 6), str(base))
    rows = describe(graphs.load(base, {}).structure)
    assert [(r["layer"], r["in_tensor"], r["out_tensor"], r["out_bounds"]) for r in rows] == [
        ("mm0", "x", "r0", [0.0, None]),
        ("mm1", "r0", "r1", [0.0, None]),
        ("mm2", "r1", "r2", [0.0, None]),
    ]
    onnx.save(chain("relu", 6), str(base))
    structure = graphs.load(base, {}).structure
    assert structure.node_names == ("Relu_0", "Relu_1", "Relu_2", "Relu_3", "Relu_4", "Relu_5")
    onnx.save(chain("constant-add", 6), str(base))
    loaded = graphs.load(base, {})
    assert loaded.structure.node_names == ("Add_1", "Add_3", "Add_5") and "3 Constant nodes" in loaded.notes[0]

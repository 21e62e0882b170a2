"""A base ONNX Runtime cannot run is refused when the sweep file is read: one line naming the
sweep file, the ``base`` field and the model, and nothing written. Local functions are inlined."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from authored import FAST_MEASURE
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from loop.author.graphs import load
from loop.cli import main

X, Y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in ("x", "y"))


def model(nodes: list[onnx.NodeProto], opsets: dict[str, int], functions=(), inits=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", [X], [Y], list(inits))
    imports = [helper.make_opsetid(d, v) for d, v in opsets.items()]
    return helper.make_model(graph, opset_imports=imports, functions=list(functions))


def relu(domain_version: int = 17) -> onnx.ModelProto:
    return model([helper.make_node("Relu", ["x"], ["y"], name="act")], {"": domain_version})


UNRUNNABLE = {
    "opset 99": (relu(99), "opset 99 of domain 'ai.onnx' is newer than the installed ONNX Runtime"),
    "ml opset 99": (
        model([helper.make_node("Relu", ["x"], ["y"])], {"": 17, "ai.onnx.ml": 99}),
        "opset 99 of domain 'ai.onnx.ml' is newer",
    ),
    "unknown domain": (
        model([helper.make_node("Foo", ["x"], ["y"], name="foo", domain="com.example")], {"": 17, "com.example": 1}),
        "node 'foo' (Foo) is of domain 'com.example', which the installed ONNX Runtime",
    ),
    "unknown op of a known domain": (
        model(
            [helper.make_node("NoSuch", ["x"], ["y"], name="n", domain="com.microsoft")], {"": 17, "com.microsoft": 1}
        ),
        "node 'n' is op 'NoSuch', which the installed ONNX Runtime",
    ),
}


def sweep_over(tmp_path: Path, base: onnx.ModelProto) -> Path:
    onnx.save(base, str(tmp_path / "base.onnx"))
    path = tmp_path / "sweep.yaml"
    path.write_text(f"sweep: s\nbase: base.onnx\n{FAST_MEASURE}\nvariants:\n  - name: base\n")
    return path


@pytest.mark.parametrize("case", sorted(UNRUNNABLE))
def test_a_base_the_runtime_cannot_run_is_one_line_up_front(tmp_path: Path, case: str):
    base, why = UNRUNNABLE[case]
    runs = tmp_path / "runs"
    result = CliRunner().invoke(main, ["sweep", str(sweep_over(tmp_path, base)), "--runs", str(runs), "--quiet"])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith(f"loop: {tmp_path / 'sweep.yaml'}:2: base: ") and "base.onnx" in lines[0]
    assert why in lines[0] and not runs.exists()
    layers = CliRunner().invoke(main, ["layers", str(tmp_path / "base.onnx")])
    assert layers.exit_code == 2 and why in layers.output


def matmul_function(body_domain: str = "") -> onnx.FunctionProto:
    """``Linear(a, w) = Relu(MatMul(a, w))`` as a local function (``body_domain`` for its Relu)."""
    nodes = [
        helper.make_node("MatMul", ["a", "w"], ["t"]),
        helper.make_node("Relu" if not body_domain else "Odd", ["t"], ["b"], domain=body_domain),
    ]
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(body_domain, 1)] if body_domain else [])
    return helper.make_function("com.local", "Linear", ["a", "w"], ["b"], nodes, opsets)


def with_function(function: onnx.FunctionProto) -> onnx.ModelProto:
    weight = numpy_helper.from_array(np.eye(4, dtype=np.float32), "w")
    call = helper.make_node("Linear", ["x", "w"], ["y"], name="linear", domain="com.local")
    return model([call], {"": 17, "com.local": 1}, [function], [weight])


def test_local_functions_are_inlined_so_their_layers_are_seen(tmp_path: Path):
    path = tmp_path / "f.onnx"
    onnx.save(with_function(matmul_function()), str(path))
    base = load(path, {})
    assert [(lp.op, lp.weight) for lp in base.structure.layers] == [("MatMul", "w")]
    assert "1 local function(s) inlined by ONNX" in base.notes
    assert not onnx.load(str(base.path)).functions


def test_what_a_function_leaves_after_inlining_is_checked_too(tmp_path: Path):
    run = sweep_over(tmp_path, with_function(matmul_function(body_domain="com.example")))
    result = CliRunner().invoke(main, ["sweep", str(run), "--runs", str(tmp_path / "runs"), "--quiet"])
    assert (
        result.exit_code == 2 and "is of domain 'com.example'" in result.output and len(result.output.splitlines()) == 1
    )
    assert not (tmp_path / "runs").exists()

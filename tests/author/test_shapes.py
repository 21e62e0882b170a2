"""Exports made static and runnable: input shapes given, output shapes resolved, opsets
upgraded, control flow refused where it hides layers, non-float inputs fed their value."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from authored import FAST_MEASURE, dynamic_detector, exported_classifier
from onnx import TensorProto, helper, numpy_helper
from sweeps import _sweep_runs

from loop.author.graphs import load, load_onnx, parse_input_shapes
from loop.author.sweepfile import parse
from loop.core.errors import LoopError


def _saved(tmp_path: Path, model: onnx.ModelProto, name: str = "m.onnx") -> Path:
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def _dims(value: onnx.ValueInfoProto) -> list[int]:
    return [d.dim_value for d in value.type.tensor_type.shape.dim]


def test_a_dynamic_input_is_refused_naming_the_key(tmp_path: Path) -> None:
    path = _saved(tmp_path, dynamic_detector())
    with pytest.raises(LoopError) as err:
        load_onnx(path)
    text = str(err.value)
    assert "input 'images' has dynamic dimensions [batch, 3, H, W]" in text
    assert "input_shapes: {images: [1, 3, ?, ?]}" in text and "--input-shape images=1,3,?,?" in text


def test_given_input_shapes_fix_the_input_and_resolve_a_computed_output(tmp_path: Path) -> None:
    notes: list[str] = []
    model = load_onnx(_saved(tmp_path, dynamic_detector()), notes, {"images": [1, 3, 8, 10]})
    assert _dims(model.graph.input[0]) == [1, 3, 8, 10]
    assert _dims(model.graph.output[0]) == [1, 6, 80]  # 'anchors' = H x W
    assert any("fixed to [1, 3, 8, 10] (input_shapes)" in n for n in notes)
    assert any("output 'boxes': [1, 6, anchors] resolved to [1, 6, 80]" in n for n in notes)


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"pixels": [1, 3, 8, 8]}, "has no input 'pixels' (its inputs: images)"),
        ({"images": [1, 3, 8]}, "gives 'images' 3 dimensions"),
        ({"images": [1, 4, 8, 8]}, "dimension 1 as 4; m.onnx fixes it at 3"),
    ],
)
def test_input_shapes_that_do_not_fit_are_refused(tmp_path: Path, given: dict, message: str) -> None:
    with pytest.raises(LoopError, match="input_shapes") as err:
        load_onnx(_saved(tmp_path, dynamic_detector()), None, given)
    assert message in str(err.value)


def test_a_dynamic_batch_alone_is_still_fixed_to_one(tmp_path: Path) -> None:
    notes: list[str] = []
    model = load_onnx(_saved(tmp_path, exported_classifier()), notes)
    assert _dims(model.graph.input[0]) == [1, 3, 16, 16]
    assert "input 'pixels': dynamic batch dimension fixed to 1" in notes


def test_an_opset_below_13_is_converted_and_says_so(tmp_path: Path) -> None:
    model = exported_classifier()
    model.opset_import[0].version = 11
    notes: list[str] = []
    loaded = load_onnx(_saved(tmp_path, model), notes)
    assert loaded.opset_import[0].version == 13
    assert "opset 11 converted to 13 by ONNX's version converter" in notes


def test_layers_command_shapes_parse() -> None:
    assert parse_input_shapes(["x=1,3,32,48", "y=1,4"]) == {"x": [1, 3, 32, 48], "y": [1, 4]}
    for bad in ("x", "x=1,a", "=1,2", "x=0,3"):
        with pytest.raises(LoopError, match="NAME=D,D"):
            parse_input_shapes([bad])


def _if_model(inner_op: str) -> onnx.ModelProto:
    """An If whose branches hold ``inner_op`` (Conv: a layer; Add: plain arithmetic)."""
    w = numpy_helper.from_array(np.ones((2, 2, 1, 1), np.float32), "w")

    def branch(name: str) -> onnx.GraphProto:
        node = (
            helper.make_node("Conv", ["x", "w"], [f"{name}_y"], name=f"{name}_conv")
            if inner_op == "Conv"
            else helper.make_node("Add", ["x", "x"], [f"{name}_y"], name=f"{name}_add")
        )
        out = helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, [1, 2, 4, 4])
        return helper.make_graph([node], name, [], [out])

    nodes = [helper.make_node("If", ["flag"], ["y"], name="branch", then_branch=branch("a"), else_branch=branch("b"))]
    graph = helper.make_graph(
        nodes,
        "cf",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])],
        [w, numpy_helper.from_array(np.array(True), "flag")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_control_flow_over_layers_is_refused_naming_the_node(tmp_path: Path) -> None:
    with pytest.raises(LoopError, match="node 'branch' is an If whose body holds Conv layers"):
        load_onnx(_saved(tmp_path, _if_model("Conv")))
    load_onnx(_saved(tmp_path, _if_model("Add"), "plain.onnx"))  # no layer inside: fine


def _int_input_model() -> onnx.ModelProto:
    """A conv scaled by an int64 input ``gain`` of shape [1] (cast to float), as a voice
    model's sample rate or a detector's class count is fed."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Cast", ["gain"], ["g"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("Mul", ["c", "g"], ["y"], name="mul"),
    ]
    graph = helper.make_graph(
        nodes,
        "gain",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8]),
            helper.make_tensor_value_info("gain", TensorProto.INT64, [1]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        [
            numpy_helper.from_array(rng.normal(0, 0.3, (4, 3, 3, 3)).astype(np.float32), "w"),
            numpy_helper.from_array(rng.normal(0, 0.1, 4).astype(np.float32), "b"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _int_sweep(tmp_path: Path, inputs: str) -> Path:
    _saved(tmp_path, _int_input_model(), "gain.onnx")
    path = tmp_path / "gain.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            sweep: gain
            base: gain.onnx
            calibration: {{count: 4}}
            {inputs}
            {FAST_MEASURE}
            variants:
              - name: base
              - {{name: w, perturb: [{{op: scale_weights, layer: conv, factor: 1.1}}]}}
            """
        )
    )
    return path


def test_an_integer_input_without_a_value_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(LoopError) as err:
        parse(_int_sweep(tmp_path, "inputs: {count: 2}"))
    assert "input 'gain' is int64, and seeded frames are floats" in str(err.value)
    assert str(err.value).startswith(f"{tmp_path / 'gain.yaml'}:4: inputs.constants:")


def test_an_integer_input_beside_float_data_is_told_both_ways_to_be_fed(tmp_path: Path) -> None:
    with pytest.raises(LoopError) as err:
        parse(_int_sweep(tmp_path, "inputs: {count: 2}"))
    assert str(err.value).endswith(
        "give its value as inputs: {constants: {gain: VALUE}} if it is a setting; if it is data (token or byte "
        "ids), give its frames from a file, an .npz keyed by input name (x, gain): calibration: {path: FRAMES.npz} "
        "and inputs: {path: FRAMES.npz}"
    )


def _byte_model() -> onnx.ModelProto:
    """Byte ids (int64) looked up in an embedding, then a MatMul layer: the ids are the data."""
    rng = np.random.default_rng(0)
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["table", "ids"], ["e"], name="embed"),
            helper.make_node("MatMul", ["e", "w"], ["y"], name="head"),
        ],
        "bytes",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 3])],
        [
            numpy_helper.from_array(rng.normal(0, 1, (256, 4)).astype(np.float32), "table"),
            numpy_helper.from_array(rng.normal(0, 0.3, (4, 3)).astype(np.float32), "w"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_an_integer_input_that_is_the_data_is_told_to_come_from_a_file(tmp_path: Path) -> None:
    _saved(tmp_path, _byte_model(), "bytes.onnx")
    path = tmp_path / "bytes.yaml"
    head = "sweep: bytes\nbase: bytes.onnx\n"
    path.write_text(f"{head}inputs: {{path: ids.npy}}\nvariants:\n  - name: base\n")
    np.save(tmp_path / "ids.npy", np.random.default_rng(1).integers(0, 256, (4, 8)))
    with pytest.raises(LoopError) as err:
        parse(path)
    assert str(err.value) == (
        f"{path}:2: calibration.path: input 'ids' is int64, the model's data (it has no float input), and seeded "
        "frames are floats: give its frames from a file, an .npy: calibration: {path: FRAMES.npy}"
    )
    path.write_text(f"{head}calibration: {{path: ids.npy}}\ninputs: {{path: ids.npy}}\nvariants:\n  - name: base\n")
    assert parse(path).calibration.path == "ids.npy"  # what the line says works


def test_constants_must_name_an_integer_input(tmp_path: Path) -> None:
    with pytest.raises(LoopError, match="'x' is a floating-point input"):
        parse(_int_sweep(tmp_path, "inputs: {count: 2, constants: {x: 1, gain: 2}}"))


def test_an_integer_input_is_fed_its_constant_in_calibration_and_scoring(tmp_path: Path) -> None:
    runs = _sweep_runs(_int_sweep(tmp_path, "inputs: {count: 2, constants: {gain: 3}}"), tmp_path / "runs")
    assert {v: r["status"] for v, r in runs.items()} == {"base": "ok", "w": "ok"}
    assert runs["w"]["verdict"] == "clean" and runs["base"]["scores"]["snr_db"] > 20
    base = load(tmp_path / "gain.onnx", {})
    assert base.dtypes == {"gain": "int64"}


def test_a_dynamic_export_sweeps_with_input_shapes(tmp_path: Path) -> None:
    _saved(tmp_path, dynamic_detector(opset=12), "det.onnx")
    path = tmp_path / "det.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            sweep: det
            base: det.onnx
            input_shapes: {{images: [1, 3, 12, 16]}}
            calibration: {{count: 4}}
            inputs: {{count: 2}}
            compile: {{per_channel: true}}
            {FAST_MEASURE}
            variants:
              - name: base
              - {{name: out, perturb: [{{op: force_range_out, layer: head, range: [-4, 4]}}]}}
            """
        )
    )
    runs = _sweep_runs(path, tmp_path / "runs")
    assert [r["status"] for r in runs.values()] == ["ok", "ok"]
    assert runs["base"]["measure"]["bytes_out"] == 6 * 12 * 16  # uint8, the resolved [1, 6, 192]
    assert runs["base"]["scores"]["snr_db"] > 20
    notes = load(tmp_path / "det.onnx", {}, {"images": [1, 3, 12, 16]}).notes
    assert "opset 12 converted to 13 by ONNX's version converter" in notes


def test_a_missing_input_shape_points_at_the_base_line(tmp_path: Path) -> None:
    _saved(tmp_path, dynamic_detector(), "det.onnx")
    path = tmp_path / "det.yaml"
    path.write_text("sweep: det\nbase: det.onnx\nvariants:\n  - name: base\n")
    with pytest.raises(LoopError) as err:
        parse(path)
    assert str(err.value).startswith(f"{path}:2: input_shapes: det.onnx: input 'images' has dynamic dimensions")

"""Memory as a resource: how many compiles fit, and a sweep that cannot fit one refuses first."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from loop.core.errors import LoopError
from loop.flow import budget as budget_mod
from loop.flow.budget import Budget, budget

GB = 10**9


def test_the_cores_are_cut_to_what_memory_holds() -> None:
    weights = 1 * GB
    one = Budget(weights, None).compile_bytes
    beside = Budget(weights, None).parent_bytes
    assert Budget(weights, beside + 3 * one + 1).jobs(None, 8) == 3
    assert Budget(weights, beside + 30 * one).jobs(None, 2) == 2  # never more than the cores
    assert Budget(weights, None).jobs(None, 2) == 2  # memory not known here: the cores
    assert Budget(weights, beside + one).jobs(5, 2) == 5  # asked is asked


def test_a_sweep_that_cannot_fit_one_compile_refuses_naming_both_figures() -> None:
    small = Budget(8 * GB, 20 * GB)
    with pytest.raises(LoopError) as refused:
        small.jobs(1, 2)
    line = str(refused.value)
    assert "\n" not in line and "8.00 GB of weights" in line and "20.0 GB is available" in line
    assert f"{small.compile_bytes / 1e9:.1f} GB" in line


def test_weights_are_read_from_the_file_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget weighs an external-data model from its dims: the data file is never opened."""
    tensor = numpy_helper.from_array(np.zeros((1,), np.float32), "w")
    tensor.ClearField("raw_data")
    del tensor.dims[:]
    tensor.dims.extend([1024, 1024])
    for key, value in (("location", "w.data"), ("offset", "0"), ("length", str(4 << 20))):
        tensor.external_data.add(key=key, value=value)
    tensor.data_location = TensorProto.EXTERNAL
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1024])
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [x], [], [tensor])
    onnx.save(helper.make_model(graph), str(tmp_path / "m.onnx"))
    (tmp_path / "w.data").mkdir()  # a folder no read can open: a read of the data would fail
    monkeypatch.setattr(budget_mod.memory, "available_bytes", lambda: 123)  # the host's figure moves between reads
    found = budget(tmp_path / "m.onnx")
    assert found.weight_bytes == 4 * 1024 * 1024 and found.available == 123
    assert budget(tmp_path / "m.onnx", local=False).available is None


def test_the_default_jobs_of_a_sweep_come_from_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from loop.author.sweepfile import parse
    from loop.flow.sweep import SweepOptions, run_sweep

    recipe = Path(__file__).parents[2] / "graphs" / "two_conv.yaml"
    sweep = tmp_path / "s.yaml"
    sweep.write_text(f"sweep: s\nbase: {recipe}\nvariants:\n  - name: base\n")
    monkeypatch.setattr(budget_mod.memory, "available_bytes", lambda: 10_000)
    with pytest.raises(LoopError, match="not enough memory for one compile"):
        run_sweep(parse(sweep), tmp_path / "runs", SweepOptions(progress=False))
    assert not (tmp_path / "runs").exists()  # refused before anything is written

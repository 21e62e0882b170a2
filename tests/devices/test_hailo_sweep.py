"""A whole sweep with ``backend: hailo``, without Hailo's software: the compiler runs against
a FAKE ``hailo_sdk_client`` (tests/compilers/hailo_fakes.py) and the device is the LOOPBACK
shim (tests/devices/loopback), a C test double of the shim's ABI, not HailoRT. It shows the
flow and the ledger are the same as on ONNX Runtime; it shows nothing about silicon."""
from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from loop.ledger import Ledger, run_json
from loop.spec import parse
from loop.sweep import SweepOptions, run_sweep

FAKE_SDK = Path(__file__).resolve().parents[1] / "fake_sdk"
LOOPBACK_HEF = "LOOPBACK 4 4 3 4 4 2\n"  # the loopback's "HEF": input 4x4x3, output 4x4x2, as the fake HN says


def fake_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Put the FAKE hailo_sdk_client on the import path of this process and of the isolated
    compile children it starts."""
    monkeypatch.setenv("LOOP_FAKE_HEF", LOOPBACK_HEF)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FAKE_SDK), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.syspath_prepend(str(FAKE_SDK))
    monkeypatch.delitem(sys.modules, "hailo_sdk_client", raising=False)


def conv_model(path: Path) -> None:
    w = np.random.default_rng(0).normal(0, 0.3, (2, 3, 1, 1)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="Conv_0")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.zeros(2, np.float32), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def test_hailo_sweep_through_fake_compiler_and_loopback(tmp_path, monkeypatch, loopback_shim_lib):
    fake_sdk(monkeypatch)
    monkeypatch.setenv("LOOP_HAILORT_SHIM", str(loopback_shim_lib))
    conv_model(tmp_path / "net.onnx")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(textwrap.dedent("""\
        sweep: hailo-flow
        base: net.onnx
        backend: hailo
        devices: [hailort, hailo-emulator]
        calibration: {count: 4}
        inputs: {count: 2}
        compile: {hw_arch: hailo10h, optimization_level: 0, model_script: ["performance_param(compiler_optimization_level=max)"]}
        measure: {warmup: 2, frames: 20, repeats: 2, depth: [1, 64], ttfo_repeats: 1, latency_frames: 3, min_duration_s: 0}
        variants:
          - name: base
          - name: scale
            perturb: [{op: force_range_out, layer: Conv_0, range: [0.0, 4.0]}]
        """))
    result = run_sweep(parse(sweep), tmp_path / "runs", SweepOptions(jobs=1, progress=False))
    ledger = Ledger(tmp_path / "runs" / "ledger.sqlite")
    runs = {o.variant: run_json(ledger.get(o.run_id)) for o in result.outcomes}
    base, scale = runs["base"], runs["scale"]
    assert base["status"] == "ok", base["error"]
    assert set(base["stages"]) >= {"parse_s", "optimize_s", "compile_s"}
    m = base["measure"]
    assert m["bytes_in"] == 4 * 4 * 3 and m["bytes_out"] == 4 * 4 * 2 and m["ttfo_ms"] > 0
    assert [d["depth"] for d in m["by_depth"]][-1] <= 32  # capped at the loopback's async queue size
    assert "hailo-emulator" in base["scores"]["devices"]
    assert base["verdict"] == "reference" and base["layers"]
    # The fake's parameters never move, so an honest audit calls the perturbation a miss.
    assert scale["verdict"] == "no-effect"
    record = json.loads(ledger.get(scale["id"])["record"])
    script = record["info"]["model_script"]
    assert "force_range_out=[0.0, 4.0]" in script and "performance_param(compiler_optimization_level=max)" in script
    assert Path(base["artifact"]).suffix == ".hef" and Path(base["artifact"]).with_suffix(".har").exists()
    assert Path(base["artifact"]).read_text() == LOOPBACK_HEF

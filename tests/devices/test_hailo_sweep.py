"""A whole sweep with ``backend: hailo``, without Hailo's software: the compiler runs against
a FAKE ``hailo_sdk_client`` (tests/compilers/hailo_fakes.py) and the device is the LOOPBACK
shim (tests/devices/loopback), a C test double of the shim's ABI, not HailoRT. It shows the
flow and the ledger are the same as on ONNX Runtime; it shows nothing about silicon."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from loop.flow.sweep import SweepOptions, run_sweep
from loop.spec.sweepfile import parse
from loop.store.ledger import Ledger

FAKE_SDK = Path(__file__).resolve().parents[1] / "fake_sdk"
LOOPBACK_HEF = "LOOPBACK 4 4 3 4 4 2\n"  # the loopback's "HEF": input 4x4x3, output 4x4x2, as the fake HN says


def fake_sdk(monkeypatch: pytest.MonkeyPatch, hef: str = LOOPBACK_HEF) -> None:
    """Put the FAKE hailo_sdk_client on the import path of this process and of the isolated
    compile children it starts; ``hef`` is what its compile returns."""
    from joblib.externals.loky import get_reusable_executor

    get_reusable_executor().shutdown(wait=True)  # compile workers outlive a test: give them this environment
    monkeypatch.setenv("LOOP_FAKE_HEF", hef)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FAKE_SDK), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.syspath_prepend(str(FAKE_SDK))
    for name in ("hailo_sdk_client", "hailo_sdk_client.hailo_archive", "hailo_sdk_client.hailo_archive.hailo_archive"):
        monkeypatch.delitem(sys.modules, name, raising=False)  # restored to absent afterwards


def conv_model(path: Path) -> None:
    w = np.random.default_rng(0).normal(0, 0.3, (2, 3, 1, 1)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="Conv_0")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.zeros(2, np.float32), "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def test_hailo_sweep_through_fake_compiler_and_loopback(tmp_path, monkeypatch, loopback_shim_lib):
    fake_sdk(monkeypatch)
    monkeypatch.setenv("LOOP_HAILORT_SHIM", str(loopback_shim_lib))
    conv_model(tmp_path / "net.onnx")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        textwrap.dedent("""\
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
        """)
    )
    result = run_sweep(parse(sweep), tmp_path / "runs", SweepOptions(jobs=1, progress=False))
    ledger = Ledger(tmp_path / "runs" / "ledger.sqlite")
    runs = {o.variant: ledger.record(o.run_id).to_json() for o in result.outcomes}
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
    info = ledger.record(scale["id"]).info
    script = info["model_script"]
    assert "force_range_out=[0.0, 4.0]" in script and "performance_param(compiler_optimization_level=max)" in script
    hef = Path(base["artifact"])
    assert hef.suffix == ".hef" and len(list(hef.parent.glob(f"{hef.stem}.*.har"))) == 2  # one HEF, two HARs
    assert Path(base["artifact"]).read_text() == LOOPBACK_HEF
    assert info["layout_source"] == "shim"  # the loopback read its "HEF" (loop_hrt_hef_layout)


def test_hailo_sweep_on_a_multi_input_model_opens_without_latency(tmp_path, monkeypatch, shim_over_fake_hailort):
    """Issue 12: with devices: [hailort], a model with several physical inputs opens without the latency
    flag and the record says why. The device is the REAL shim over a FAKE HailoRT
    (tests/devices/fake_hailort), which refuses latency for such a model as HailoRT's configure does."""
    fake_sdk(monkeypatch, "FAKEHEF in=4x4x3 out=4x4x2 planes=2\n")
    monkeypatch.setenv("LOOP_HAILORT_SHIM", str(shim_over_fake_hailort))
    monkeypatch.setenv("HAILORT_LOGGER_PATH", str(tmp_path))
    conv_model(tmp_path / "net.onnx")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        textwrap.dedent("""\
        sweep: hailo-latency
        base: net.onnx
        backend: hailo
        devices: [hailort]
        calibration: {count: 4}
        inputs: {count: 2}
        compile: {hw_arch: hailo10h, optimization_level: 0}
        measure: {warmup: 1, frames: 8, repeats: 1, depth: [1, 4], ttfo_repeats: 1, latency_frames: 2}
        variants:
          - name: base
          - name: asked
            measure: {hw_latency: true}
        """)
    )
    result = run_sweep(parse(sweep), tmp_path / "runs", SweepOptions(jobs=1, progress=False))
    ledger = Ledger(tmp_path / "runs" / "ledger.sqlite")
    runs = {o.variant: ledger.record(o.run_id).to_json() for o in result.outcomes}
    base, asked = runs["base"], runs["asked"]
    assert base["status"] == "ok" and asked["status"] == "ok", (base["error"], asked["error"])
    assert base["measure"]["hw_latency_ms"] is None and asked["measure"]["hw_latency_ms"] is None
    assert any("off unless measure.hw_latency is true" in n for n in base["measure"]["notes"])
    assert any("configure refused it (status 6" in n for n in asked["measure"]["notes"])
    assert ledger.record(base["id"]).info["layout_source"] == "shim"  # read from the HEF, not guessed from the HN

"""``loop fit MODEL`` (issue 44): a model's weights at bf16, int8 and int4 against the device's
memory, read from the file alone. Run as a user runs it, in a child process: the seed's 24 GB
model is weighed by a process that never reads its weights, on a machine that need not hold them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from authored import weighed_model
from onnx import TensorProto, helper
from real_hef import REAL_HEF
from report_records import ledger, run

from loop import api
from loop.core.facts import CompileFacts

GiB8 = 8 * 2**30
# The seed's Pixal3D checkpoints, 24.045 GB at bf16: three bf16 kernels of 50,000 x 80,150
ROWS, COLS, LAYERS = 50_000, 80_150, 3


def fit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loop.cli", "fit", *args], capture_output=True, text=True)


def seed_model(folder: Path) -> tuple[Path, Path]:
    """The model, and its weights as external data in a sparse file: its size set, nothing written."""
    each = ROWS * COLS * 2
    kernels = []
    for i in range(LAYERS):
        kernel = TensorProto(name=f"w{i}", dims=[ROWS, COLS], data_type=TensorProto.BFLOAT16)
        kernel.data_location = TensorProto.EXTERNAL
        for key, value in (("location", "weights.bin"), ("offset", str(i * each)), ("length", str(each))):
            kernel.external_data.add(key=key, value=value)
        kernels.append(kernel)
    nodes = [helper.make_node("MatMul", ["x", f"w{i}"], [f"y{i}"], name=f"mm{i}") for i in range(LAYERS)]
    outputs = [helper.make_tensor_value_info(f"y{i}", TensorProto.BFLOAT16, [1, COLS]) for i in range(LAYERS)]
    x = helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [1, ROWS])
    graph = helper.make_graph(nodes, "pixal3d", [x], outputs, kernels)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path, data = folder / "pixal3d.onnx", folder / "weights.bin"
    path.write_bytes(model.SerializeToString())
    with data.open("wb") as file:
        file.truncate(each * LAYERS)
    if data.stat().st_blocks * 512 > 2**20:
        data.unlink()
        pytest.skip("this filesystem allocated the sparse file")
    onnx.checker.check_model(str(path))  # a model ONNX accepts, its external data in place
    return path, data


def test_the_seeds_checkpoints_fit_at_four_bits_and_not_at_bf16(tmp_path: Path) -> None:
    path, data = seed_model(tmp_path)
    done = fit(str(path))
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines() if line.startswith("  ")}
    assert "24,045,000,000 B" in rows["bf16"] and "24.045 GB" in rows["bf16"] and "does not fit" in rows["bf16"]
    assert "12,022,500,000 B" in rows["int8"] and "does not fit" in rows["int8"]
    assert "6,011,250,000 B" in rows["int4"] and "6.011 GB" in rows["int4"] and ": fits" in rows["int4"]
    assert "8,589,934,592 B (8 GiB)" in done.stdout and "hailo10h-usb-1.5a" in done.stdout
    assert data.stat().st_blocks == 0  # nothing was written to the weights
    data.unlink()
    data.mkdir()  # a location no read can open: weighing never opens the weights at all
    again = fit(str(path), "--json")
    assert again.returncode == 0, again.stderr
    at = json.loads(again.stdout)["precisions"]
    assert {k: (v["bytes"], v["fits"]) for k, v in at.items()} == {
        "bf16": (24_045_000_000, False),
        "int8": (12_022_500_000, False),
        "int4": (6_011_250_000, True),
    }


def test_json_is_one_object_of_the_promised_shape(tmp_path: Path) -> None:
    path = tmp_path / "small.onnx"
    onnx.save(weighed_model(), str(path))
    done = fit(str(path), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["device"], report["device_bytes"], report["weights"]) == ("hailo10h", GiB8, 240)
    assert report["link"]["name"] == "hailo10h-usb-1.5a"
    assert set(report["precisions"]) == {"bf16", "int8", "int4"}
    for entry in (*report["precisions"].values(), report["as_stored"]):
        assert set(entry) == {"bytes", "fits", "load_ms"} and entry["fits"] is True and entry["load_ms"] > 0
    assert {k: v["bytes"] for k, v in report["precisions"].items()} == {"bf16": 480, "int8": 240, "int4": 120}
    assert report["as_stored"]["bytes"] == 225 * 4 + 6 * 2 + 9  # float32, float16 and int8, as the file holds them
    assert report["weights_by_type"] == {"float16": 6, "float32": 225, "int8": 9}
    assert report["as_compiled"] is None and report["run"] is None
    assert api.fit(path).to_json() == report  # the API is the same call


def test_the_real_hef_is_weighed_as_compiled() -> None:
    done = fit(str(REAL_HEF), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["precisions"] == {} and report["weights"] is None and report["as_stored"] is None
    assert report["as_compiled"]["bytes"] == 3_503_356 and report["as_compiled"]["fits"] is True
    assert "refuses hailo8p HEFs" in report["refused"]  # a Hailo-8 family HEF: fits by size, not by architecture
    text = fit(str(REAL_HEF)).stdout
    assert "bf16, int8 and int4 do not apply" in text and "3,503,356 B" in text


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("bad.onnx", b"not an onnx model", "unreadable ONNX model"),
        ("empty.onnx", b"", "no graph"),
        ("bad.hef", b"not a model at all", "not a HEF"),
    ],
)
def test_a_malformed_model_is_one_line_and_exit_2(tmp_path: Path, name: str, content: bytes, said: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    done = fit(str(path))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and str(path) in done.stderr and said in done.stderr
    missing = fit(str(tmp_path / "none.onnx"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "none.onnx" in missing.stderr


def test_a_runs_recorded_mix_stands_beside_the_precisions(tmp_path: Path) -> None:
    path = tmp_path / "small.onnx"
    onnx.save(weighed_model(), str(path))
    weights = {"bytes": 130, "weights_by_bits": {"4": 200, "8": 30, "16": 9}}
    ledger(tmp_path / "runs", [run("w4", 100.0, 150_528, compiled=CompileFacts(weights=weights))])
    done = fit(str(path), "--run", "1", "--runs", str(tmp_path / "runs"), "--json")
    assert done.returncode == 0, done.stderr
    mine = json.loads(done.stdout)["run"]
    assert (mine["id"], mine["bytes"], mine["fits"], mine["weights_by_bits"]) == (
        1,
        130,
        True,
        weights["weights_by_bits"],
    )
    text = fit(str(path), "--run", "1", "--runs", str(tmp_path / "runs")).stdout
    assert "200 at 4 bits, 30 at 8 bits, 9 at 16 bits" in text
    absent = fit(str(path), "--run", "7", "--runs", str(tmp_path / "runs"))
    assert absent.returncode == 2 and "no run 7" in absent.stderr


def test_another_link_and_device_are_named(tmp_path: Path) -> None:
    path = tmp_path / "small.onnx"
    onnx.save(weighed_model(), str(path))
    report = json.loads(fit(str(path), "--link", "100MB/s", "--device", "hailo8", "--json").stdout)
    assert report["link"]["name"] == "100MB/s" and report["device_bytes"] is None
    assert report["precisions"]["int8"] == {"bytes": 240, "fits": None, "load_ms": pytest.approx(240 / 100e6 * 1e3)}
    unknown = fit(str(path), "--device", "hailo99")
    assert unknown.returncode == 2 and "unknown device 'hailo99'" in unknown.stderr

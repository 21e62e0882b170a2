"""``loop inspect FILE.hef`` and ``loop.api.inspect``: a HEF read with no device and no Hailo software (issue 33).

Run as a user runs it, in a child process: a damaged file is one line on stderr and exit 2, never a
traceback. The figures themselves are tests/hailort/test_hef.py's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from real_hef import REAL_HEF

from loop import api


def inspect(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loop.cli", "inspect", *args], capture_output=True, text=True)


def test_json_reports_the_group_streams_and_size() -> None:
    done = inspect(str(REAL_HEF), "--json", "--device", "hailo10h")
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    (group,) = info["groups"]
    assert (info["size"], group["name"]) == (3_503_356, "arcface_mobilefacenet")
    assert [(s["name"], s["shape"], s["order"], s["dtype"]) for s in group["inputs"] + group["outputs"]] == [
        ("arcface_mobilefacenet/input_layer1", [112, 112, 3], "NHWC", "uint8"),
        ("arcface_mobilefacenet/fc1", [1, 1, 512], "NC", "uint8"),
    ]
    assert group["outputs"][0]["zero_point"] == 144.0 and info["fit"]["fits"] is True
    assert api.inspect(REAL_HEF, "hailo10h").to_json() == info  # the API is the same call


@pytest.mark.parametrize(
    ("content", "said"),
    [(b"not a model at all", "not a HEF"), (b"\x01HEF\x00\x00\x00\x01\x00\x00\x00\x10", "truncated")],
)
def test_a_file_that_is_no_hef_is_one_line_and_exit_2(tmp_path: Path, content: bytes, said: str) -> None:
    path = tmp_path / "model.hef"
    path.write_bytes(content)
    done = inspect(str(path))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and str(path) in done.stderr and said in done.stderr
    assert "Traceback" not in done.stderr


def test_the_device_defaults_to_the_chip_the_sweep_compiles_for(tmp_path: Path) -> None:
    import onnx
    from authored import pooled_two_conv

    onnx.save(pooled_two_conv(), str(tmp_path / "net.onnx"))
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("sweep: s\nbase: net.onnx\nbackend: hailo\ncompile: {hw_arch: hailo8}\nvariants: [{name: base}]\n")
    done = inspect(str(REAL_HEF), "--json", "--sweep", str(sweep))
    assert done.returncode == 0, done.stderr
    fit = json.loads(done.stdout)["fit"]
    assert fit["device"] == "hailo8" and fit["architecture_ok"] is True  # the file is a hailo8p HEF
    given = inspect(str(REAL_HEF), "--json", "--sweep", str(sweep), "--device", "hailo10h")
    assert json.loads(given.stdout)["fit"]["device"] == "hailo10h"  # --device wins
    sweep.write_text("sweep: s\nbase: net.onnx\nvariants: [{name: base}]\n")  # the default backend
    assert json.loads(inspect(str(REAL_HEF), "--json", "--sweep", str(sweep)).stdout).get("fit") is None

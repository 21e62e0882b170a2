"""``loop link fit|predict`` and ``loop report`` as a user meets them, on sweeps run here."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from loop.cli import main

# A frame ladder through a slow simulated link: each rung's rate is the link's, not compute's.
LADDER = """\
sweep: ladder
base: tiny.yaml
calibration: {count: 4}
inputs: {count: 2}
devices: ["link-sim:2MB/s+2ms"]
measure: {warmup: 1, frames: 6, repeats: 2, ttfo_repeats: 1, latency_frames: 3, min_duration_s: 0, depth: [1, 4]}
variants:
  - {name: s32, params: {height: 32, width: 32}}
  - {name: s64, params: {height: 64, width: 64}}
  - {name: s96, params: {height: 96, width: 96}}
"""


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def ladder_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from authored import TWO_CONV_RECIPE

    folder = tmp_path_factory.mktemp("ladder")
    (folder / "tiny.yaml").write_text(TWO_CONV_RECIPE)
    (folder / "ladder.yaml").write_text(LADDER)
    runs = folder / "runs"
    code, _, err = cli("sweep", str(folder / "ladder.yaml"), "--runs", str(runs), "--jobs", "1")
    assert code == 0, err
    return runs


def test_a_link_fitted_from_a_ladder_recovers_the_simulated_link(ladder_runs: Path):
    code, out, err = cli("link", "fit", "--runs", str(ladder_runs), "--sweep", "ladder", "--name", "sim", "--json")
    assert code == 0, err
    model = json.loads(out)
    # waits dominate a 2 MB/s link, and load only lengthens a wait: the fit is near 2 MB/s, never far above
    assert 1.6 < model["bandwidth_mb_s"] < 2.1
    assert (ladder_runs / "links" / "sim.json").is_file()


def test_predict_names_the_bound_on_a_fitted_and_a_shipped_link(ladder_runs: Path):
    cli("link", "fit", "--runs", str(ladder_runs), "--sweep", "ladder", "--name", "sim")
    code, out, err = cli("link", "predict", "3", "--runs", str(ladder_runs), "--link", "sim", "--json")
    assert code == 0, err
    p = json.loads(out)
    assert p["bound"] == "link" and p["compute_basis"] == "compute_ms recorded by the device"
    code, out, _ = cli("link", "predict", "3", "--runs", str(ladder_runs), "--link", "hailo10h-usb-1.5a")
    assert code == 0 and "on hailo10h-usb-1.5a" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (("link", "predict", "1", "--link", "nowhere"), "unknown link 'nowhere'"),
        (("link", "fit", "--sweep", "missing", "--name", "x"), "no runs of sweep 'missing'"),
        (("link", "fit", "--sweep", "ladder", "--name", "hailo10h-usb-1.5a"), "not a shipped name"),
    ],
)
def test_link_errors_are_one_line(ladder_runs: Path, args, message):
    code, _, err = cli(*args, "--runs", str(ladder_runs))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_the_report_is_one_self_contained_file(ladder_runs: Path, tmp_path: Path):
    pytest.importorskip("matplotlib")
    target = tmp_path / "r.html"
    code, out, err = cli("report", "--runs", str(ladder_runs), "-o", str(target))
    assert code == 0, err and out.strip() == str(target)
    page = target.read_text()
    assert page.count("<svg") >= 5 and "Link ladder" in page and "Depth ladder" in page
    assert not re.search(r"(src|href)=[\"']?(https?:|//)", page) and "<script" not in page  # nothing fetched


def test_the_report_without_matplotlib_says_how_to_install(ladder_runs: Path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    code, _, err = cli("report", "--runs", str(ladder_runs))
    assert code == 2 and "pip install 'loop[report]'" in err and len(err.strip().splitlines()) == 1


ONE_BY_ONE = Path(__file__).resolve().parents[1] / "graphs" / "link_1x1.yaml"  # a network of its own
NETWORKS = """\
sweep: networks
base: tiny.yaml
calibration: {count: 4}
inputs: {count: 2}
devices: ["link-sim:2MB/s+2ms"]
measure: {warmup: 1, frames: 6, repeats: 2, ttfo_repeats: 1, latency_frames: 3, min_duration_s: 0}
variants:
  - {name: small, params: {height: 32, width: 32}}
  - {name: other, base: ONE_BY_ONE, params: {height: 64, width: 64}}
"""


def test_networks_side_by_side_are_no_link_ladder(ladder_runs: Path):
    folder = ladder_runs.parent
    (folder / "networks.yaml").write_text(NETWORKS.replace("ONE_BY_ONE", str(ONE_BY_ONE)))
    code, _, err = cli("sweep", str(folder / "networks.yaml"), "--runs", str(ladder_runs), "--jobs", "1")
    assert code == 0, err
    code, _, err = cli("link", "fit", "--runs", str(ladder_runs), "--sweep", "networks", "--name", "nets")
    assert code != 0 and "holds 2 networks (other, small), not one network at several frame sizes" in err
    assert not (ladder_runs / "links" / "nets.json").exists()
    page = folder / "networks.html"
    code, _, err = cli("report", "--runs", str(ladder_runs), "--sweep", "networks", "-o", str(page))
    assert code == 0, err
    assert "Link ladder" not in page.read_text() and 'id="rungs"' not in page.read_text()

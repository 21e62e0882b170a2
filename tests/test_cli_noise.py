"""``loop noise SWEEP --variant NAME``: one line per quantized layer, worst first; ``--json`` for
scripts; a bad variant or a backend without the analysis is one line and exit 2; a run in
``--runs`` quantized otherwise than now is said in one line (issue 36); the variant printed is
measured first (issue 42: tests/judge/test_falls.py). The figures themselves are
tests/judge/test_noise.py's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from loop.author.sweepfile import parse
from loop.cli import main
from loop.flow.sweep import SweepOptions, run_sweep

GRAPHS = Path(__file__).parents[1] / "graphs"
MEASURE = "measure: {warmup: 1, frames: 5, repeats: 1, ttfo_repeats: 1, latency_frames: 2, min_duration_s: 0}"


def noise(*args: str) -> object:
    return CliRunner().invoke(main, ["noise", *args])


def test_one_line_per_layer_worst_first_and_json_parses(tmp_path: Path) -> None:
    sweep, runs = str(GRAPHS / "variants.yaml"), str(tmp_path / "runs")
    text = noise(sweep, "--variant", "base", "--runs", runs)
    assert text.exit_code == 0, text.output
    measured, base, nothing, *lines = text.stdout.splitlines()
    assert text.stderr.startswith("loop noise: step 0 (as quantized): ")  # each step as it is scored
    # the base meets the target as quantized: measured, nothing widened, nothing to paste
    assert measured == "measured on the 8 scoring frames, widened until 25 dB (default):"
    assert base.startswith("  step 0  as quantized: ") and base.endswith(", reference  <- meets the target")
    assert nothing == "it meets the target as it is: nothing to widen"
    # by the accumulated SNR lost at each (conv1's from the input's grid, conv2's from conv1's); the
    # input's grid reads nothing quantized and comes last; nothing falls 6 dB, so no region is named
    assert [line.split()[0] for line in lines] == ["conv1", "conv2", "input"]
    assert all(" local " in line and " accumulated " in line for line in lines)
    assert [" falls " in line for line in lines] == [True, True, False]
    done = noise(sweep, "--variant", "base", "--json", "--runs", runs)
    assert done.exit_code == 0, done.output
    found = json.loads(done.stdout)
    assert [row["layer"] for row in found["layers"]] == ["conv1", "conv2", "input"]
    assert found["falls"] == [] and found["sixteen_bits"][0] == "{op: precision, layer: conv1, bits: 16}"
    assert (found["variant"], found["frames"]) == ("base", 8)
    widening = found["widening"]
    assert (widening["met"], widening["chosen"], widening["variant"]) == (0, 0, [])
    assert [s["verdict"] for s in widening["steps"]] == ["reference"]


def test_a_bad_variant_is_one_line_naming_the_file_and_field() -> None:
    done = noise(str(GRAPHS / "variants.yaml"), "--variant", "nope")
    assert done.exit_code == 2
    (line,) = done.output.splitlines()
    assert line.startswith("loop: ") and "variants.yaml: variants: no variant named 'nope'" in line


def test_a_backend_without_the_analysis_says_so_in_one_line(tmp_path: Path) -> None:
    shutil.copy(GRAPHS / "two_conv.yaml", tmp_path)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("sweep: s\nbase: two_conv.yaml\nbackend: hailo\nvariants: [{name: base}]\n")
    done = noise(str(sweep), "--variant", "base")
    assert done.exit_code == 2
    (line,) = done.output.splitlines()
    assert "sweep.yaml: backend: the hailo compiler has no per-layer noise analysis" in line


def test_a_run_quantized_otherwise_is_one_line(tmp_path: Path) -> None:
    shutil.copy(GRAPHS / "two_conv.yaml", tmp_path)
    sweep, runs = tmp_path / "sweep.yaml", tmp_path / "runs"
    head = "sweep: s\nbase: two_conv.yaml\ninputs: {count: 4}\n" + MEASURE + "\n"
    sweep.write_text(head + "calibration: {count: 16}\nvariants: [{name: base}]\n")
    run_sweep(parse(sweep), runs, SweepOptions(jobs=1, progress=False))
    same = noise(str(sweep), "--variant", "base", "--runs", str(runs))
    assert same.exit_code == 0 and not same.stdout.startswith("note:")
    sweep.write_text(head + "calibration: {count: 4}\nvariants: [{name: base}]\n")  # other biases now
    moved = noise(str(sweep), "--variant", "base", "--runs", str(runs))
    assert moved.exit_code == 0
    assert moved.stdout.startswith("note: run 1 of base in ") and "bias_sha" in moved.stdout.splitlines()[0]


def test_plot_is_one_svg_in_graph_order(tmp_path: Path) -> None:
    out = tmp_path / "noise.svg"
    done = noise(str(GRAPHS / "variants.yaml"), "--variant", "base", "--plot", str(out), "--runs", str(tmp_path / "r"))
    assert done.exit_code == 0, done.output
    text = out.read_text()
    assert text.startswith("<svg") and all(f'id="{gid}' in text for gid in ("local", "accumulated", "floor"))
    assert text.index(">input<") < text.index(">conv1<") < text.index(">conv2<")  # graph order, not worst first

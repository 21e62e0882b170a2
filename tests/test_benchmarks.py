"""benchmarks/ cannot rot unseen: every kept benchmark runs whole at its tiny size through
benchmarks/run.py, all of them in one process, and each writes its figures as JSON. The checks are
the figures' keys and values a run of any size must have (counts, verdicts, positive rates), never
a figure itself: those are benchmarks/README.md's, measured at full size on a named machine."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
HELPERS = {"run", "bench_data"}  # the entry point, and the data the benchmarks make


def _module(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"benchmarks_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    found = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(found)
    return found


KEPT: dict[str, str] = _module("run").KEPT


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """``run.py all --tiny``: every kept benchmark, one process, each file read back by name."""
    out = tmp_path_factory.mktemp("figures")
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "run.py"), "all", "--tiny", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=out,
    )
    found = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    assert found, done.stdout[-2000:] + done.stderr[-2000:]
    return found


def test_every_script_is_a_kept_benchmark_or_a_helper() -> None:
    """A script run.py does not know would never run in CI: a benchmark is kept (and run) or
    retired (deleted, its figures in benchmarks/RETIRED.md)."""
    assert {p.stem for p in BENCHMARKS.glob("*.py")} == set(KEPT) | HELPERS


def test_run_lists_every_kept_benchmark() -> None:
    done = subprocess.run([sys.executable, str(BENCHMARKS / "run.py"), "list"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert [line.split()[0] for line in done.stdout.splitlines()] == list(KEPT)


def test_the_squeezenet_benchmarks_author_is_torchvisions_shape() -> None:
    """bench_data authors squeezenet1_1 without torch: torchvision's parameter count."""
    model = _module("bench_data").squeezenet1_1(64)
    assert sum(int(np.prod(t.dims)) for t in model.graph.initializer) == 1_235_496  # torchvision's


def _positive(*values: float) -> bool:
    return all(math.isfinite(v) and v > 0 for v in values)


def _compile_jobs(f: dict[str, Any]) -> None:
    assert f["first_compiles"] == f["variants"] and f["rerun_compiles"] == 0
    assert _positive(f["jobs1_threads1_s"], f["jobs1_threads2_s"], f["jobs2_threads1_s"], f["rerun_s"])
    assert _positive(f["speedup_jobs2"], f["rerun_share"], f["isolation"]["in_process_s"])


def _big_graph(f: dict[str, Any]) -> None:
    assert {r["base"] for r in f["rows"]} == {"add-relu", "matmul-relu", "constant-add", "relu"}
    assert all(_positive(r["layers_s"], r["sweep_read_s"]) for r in f["rows"])


def _sweep_memory(f: dict[str, Any]) -> None:
    assert f["runs"] == f["variants"] and f["failed"] == 0
    assert _positive(f["parent_peak_mb"], f["wall_s"])


def _big_model(f: dict[str, Any]) -> None:
    (size,) = f["sizes"]
    runs = size["loop"]["runs"]
    assert set(runs) == {"base", "weights", "grid", "grid2", "four"}
    assert all(r["status"] == "ok" for r in runs.values()), runs
    assert runs["grid"]["verdict"] == runs["grid2"]["verdict"] == "clean"
    assert _positive(size["peer"]["quantize_s"], size["peer"]["tree_pss_bytes"], size["loop"]["tree_pss_bytes"])
    assert _positive(size["loop"]["parent_peak_bytes"], runs["base"]["compile_peak_bytes"])


def _harness_overhead(f: dict[str, Any]) -> None:
    (model,) = f["models"]
    assert len(model["ratios"]) == len(model["control"]) == 2
    assert _positive(model["ratio_median"], model["control_median"], model["loop_fps_median"], model["bare_fps_median"])
    assert set(f["verdict"]) >= {"large_ok", "floor_ok", "lowest_single_ratio"}


def _calls(summary: dict[str, int]) -> int:
    return sum(summary[k] for k in ("noise", "faster", "slower", "undecided"))


def _noise_floor(f: dict[str, Any]) -> None:
    assert _calls(f["aa"]) == _calls(f["detect_20%"]) == 1
    assert _positive(f["aa"]["median_ratio"], f["aa"]["wall_s_per_compare"], f["detect_20%"]["median_ratio"])
    done = f["done_1"]
    assert len(done["sessions_fps"]) == 2 and _positive(*done["sessions_fps"])
    for basis in ("ledger", "interleaved"):
        assert (_calls(done[basis]["same"]), _calls(done[basis]["bigger"])) == (1, 2)


def _link_model(f: dict[str, Any]) -> None:
    rows = [r for section in f["paced"] for r in section["rows"]]
    assert {r["network"] for r in rows} == {"two_conv"} and len(rows) == 12  # 2 settings x 2 sources x 3 depths
    assert all(_positive(r["predicted_fps"], r["measured_fps"]) for r in rows)
    assert all(_positive(s["fitted"]["bandwidth_mb_s"]) for s in f["paced"])
    assert _positive(f["paces_ms"]["two_conv"]) and math.isfinite(f["worst_paced_error_pct"])


def _score_intervals(f: dict[str, Any]) -> None:
    rows = f["squeezenet"]
    assert set(rows) == {"4", "8"}
    for row in rows.values():  # a percentile bootstrap's interval need not hold its estimate
        low, high = row["ci95"]
        assert math.isfinite(row["snr_db"]) and math.isfinite(low) and low <= high
        assert row["verdicts"] == ["clean"] and len(row["moved_snr_db"]) == len(row["moved_paired_ci95"]) == 1


def _noise_cost(f: dict[str, Any]) -> None:
    (row,) = f["sweeps"]
    assert row["variant"] == "base" and row["tensors"] > 0
    assert _positive(row["compile_s"], row["noise_s"], row["analysis_s"], row["noise_ratio"])


def _weights_4bit(f: dict[str, Any]) -> None:
    rows = f["variants"]
    assert all(r["status"] == "ok" for r in rows.values()), rows
    base, four = rows["8 bits"], rows["every kernel at 4 bits"]
    assert base["verdict"] == "reference" and four["verdict"] == "clean"
    assert 0.45 < four["x_8bit"] < 0.6 and four["share_4bit"] == 1
    for rule in ("loop's rule", "largest first"):
        share = rows[f"share 0.5, {rule}"]
        assert 0.4 < share["share_4bit"] <= 0.5 and share["weight_bytes"] < base["weight_bytes"]


def _score_only(f: dict[str, Any]) -> None:
    assert all(len(w) == 1 for w in f["walls"].values())
    assert _positive(*f["median"].values(), *f["per_minute"].values(), f["speedup"])


def _scale_only(f: dict[str, Any]) -> None:
    assert f["clean"] == f["candidates"] == 8
    assert _positive(*f["per_minute"].values(), f["limit_per_minute"], f["scale_only_over_full"])


def _report_scale(f: dict[str, Any]) -> None:
    assert f["new"]["rc"] == 0, f["new"]["error"]
    assert f["new"]["peak_mb"] > 0 and f["new"]["html_mb"] >= 0 and "old" not in f


CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "compile_jobs": _compile_jobs,
    "big_graph": _big_graph,
    "sweep_memory": _sweep_memory,
    "big_model": _big_model,
    "harness_overhead": _harness_overhead,
    "noise_floor": _noise_floor,
    "link_model": _link_model,
    "score_intervals": _score_intervals,
    "noise_cost": _noise_cost,
    "weights_4bit": _weights_4bit,
    "score_only": _score_only,
    "scale_only": _scale_only,
    "report_scale": _report_scale,
}


def test_every_kept_benchmark_has_its_checks() -> None:
    assert set(CHECKS) == set(KEPT)


@pytest.mark.parametrize("name", list(KEPT))
def test_the_benchmark_runs_whole_at_its_tiny_size(ran: dict[str, dict[str, Any]], name: str) -> None:
    found = ran.get(name)
    assert found is not None, f"{name} wrote no figures"
    assert "error" not in found, found["error"][-3000:]
    assert found["tiny"] and found["seconds"] > 0 and found["machine"]["cores"]
    CHECKS[name](found["figures"])

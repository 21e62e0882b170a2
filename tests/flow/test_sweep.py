"""The whole flow on the embedded backend: every verdict, the ledger, and a failed variant."""

from dataclasses import replace
from pathlib import Path

import pytest
from authored import FAST_MEASURE
from sweeps import _sweep_runs, runs_of

from loop.author.sweepfile import parse
from loop.flow.sweep import SweepOptions, run_sweep
from loop.store.ledger import Ledger

SWEEP = f"""\
sweep: study
base: tiny.yaml
calibration: {{count: 16}}
inputs: {{count: 4}}
compile: {{bias_correction: BC}}
{FAST_MEASURE}
variants:
  - name: base
  - name: weights
    perturb:
      - {{op: scale_weights, layer: conv1, factor: 1.05}}
  - name: scale
    perturb:
      - {{op: force_range_out, layer: conv1, range: [0.0, 8.0]}}
  - name: missed
    perturb:
      - {{op: force_range_out, layer: conv1, range: [0.0, CALMAX]}}
  - name: calib
    perturb:
      - {{op: calibration, count: 8, seed: 3}}
"""


def sweep(write_sweep, tmp_path: Path, bc: bool, calmax: str = "9.5") -> dict[str, dict]:
    return _sweep_runs(write_sweep(SWEEP.replace("BC", str(bc).lower()).replace("CALMAX", calmax)), tmp_path / "runs")


def test_verdicts_with_bias_correction(write_sweep, tmp_path):
    runs = sweep(write_sweep, tmp_path, True)
    assert runs["base"]["verdict"] == "reference"
    assert runs["weights"]["verdict"] == "clean"
    assert runs["weights"]["kernel_sha"] != runs["base"]["kernel_sha"]
    scale = runs["scale"]
    assert scale["verdict"] == "confounded"
    assert scale["layers"][0]["out_scale"] == pytest.approx(8.0 / 255, rel=1e-6)
    outside = [c for c in scale["changes"] if not c["allowed"]]
    assert outside and all(c["what"] == "bias" for c in outside)
    assert scale["kernel_sha"] == runs["base"]["kernel_sha"]


def test_same_force_is_clean_without_bias_correction(write_sweep, tmp_path):
    runs = sweep(write_sweep, tmp_path, False)
    assert runs["scale"]["verdict"] == "clean"
    assert {c["what"] for c in runs["scale"]["changes"]} <= {"out_scale", "in_scale", "bias-rounding"}
    calib = runs["calib"]
    assert calib["verdict"] == "clean" and calib["kernel_sha"] == runs["base"]["kernel_sha"]
    assert {c["what"] for c in calib["changes"]} <= {"out_scale", "in_scale", "bias-rounding"}
    assert any(c["what"] == "out_scale" for c in calib["changes"])


def test_force_that_lands_nowhere_is_no_effect(write_sweep, tmp_path):
    runs = sweep(write_sweep, tmp_path, False)
    calibrated = runs["base"]["layers"][0]["out_scale"] * 255
    runs = sweep(write_sweep, tmp_path / "again", False, calmax=repr(float(calibrated)))
    assert runs["missed"]["verdict"] == "no-effect", runs["missed"]["changes"]


def test_record_carries_the_three_quantities_and_scores(write_sweep, tmp_path):
    run = sweep(write_sweep, tmp_path, True)["weights"]
    m, s = run["measure"], run["scores"]
    assert m["ttfo_ms"] > 0 and m["rate_fps"]["min"] <= m["rate_fps"]["median"] <= m["rate_fps"]["max"]
    assert m["bytes_in"] == 3 * 8 * 8 and m["bytes_out"] == 4 * 8 * 8
    assert s["deterministic"] is True and s["sensitive"] is True
    assert 0 < s["bytes_differ"] <= s["bytes_total"] == 4 * 4 * 8 * 8
    assert s["snr_db"] > 10 and s["cosine"] > 0.9
    assert Path(run["artifact"]).is_absolute() and Path(run["artifact"]).exists()


def test_an_unmeasured_run_records_its_bytes_per_inference_and_nothing_timed(write_sweep, tmp_path):
    """A run the protocol does not time (score-only here; a study's, whose rounds time its rate) still
    records the bytes its session's layout says cross the bus: the roofline draws a raced rate by them."""
    text = SWEEP.replace("BC", "false").replace("CALMAX", "9.5")
    run = _sweep_runs(write_sweep(text), tmp_path / "runs", score_only=True)["weights"]
    assert "score-only" in run["flags"]
    assert {k: v for k, v in run["measure"].items() if v is not None} == {"bytes_in": 3 * 8 * 8, "bytes_out": 4 * 8 * 8}


def test_failed_variant_is_recorded_and_sweep_goes_on(write_sweep, tmp_path):
    text = SWEEP.replace("BC", "true").replace("CALMAX", "9.5")
    text += "  - name: broken\n    perturb: [{op: add_weight_noise, layer: conv1, std: 0.01}]\n    compile: {timeout_s: 0.001}\n"  # noqa: E501 - a sweep file's line
    result = run_sweep(parse(write_sweep(text)), tmp_path / "runs", SweepOptions(jobs=1, progress=False))
    runs = runs_of(result, tmp_path / "runs")
    assert runs["broken"]["status"] == "failed" and "timeout after 0.001 s" in runs["broken"]["error"]
    assert runs["broken"]["error"] and runs["weights"]["status"] == "ok"
    assert [o.variant for o in result.failed] == ["broken"]


def test_exported_model_as_base(write_sweep, tmp_path, exported_onnx):
    text = f"""\
    sweep: exported
    base: {exported_onnx.name}
    calibration: {{count: 8}}
    inputs: {{count: 2}}
    {FAST_MEASURE}
    variants:
      - name: base
      - name: head
        perturb: [{{op: scale_weights, layer: /classifier/Gemm, factor: 1.1}}]
      - name: wide
        perturb: [{{op: force_range_out, layer: /features/0/Conv, range: [0.0, 9.0]}}]
    """
    spec = parse(write_sweep(text))
    result = run_sweep(spec, tmp_path / "runs", SweepOptions(jobs=1, progress=False))
    runs = runs_of(result, tmp_path / "runs")
    assert [lp["name"] for lp in runs["base"]["layers"]] == ["/features/0/Conv", "/features/1/Conv", "/classifier/Gemm"]
    assert runs["head"]["verdict"] == "clean"
    wide = runs["wide"]
    assert wide["verdict"] == "confounded"
    assert any(c["what"] == "function" and c["layer"] == "/features/0/Conv" for c in wide["changes"])


def test_hanging_compile_times_out_and_the_sweep_goes_on(write_sweep, tmp_path, monkeypatch):
    """A real hang (a compiler that sleeps) in its own process group, killed at the timeout."""
    from loop.author import sweepfile as spec_mod
    from loop.core import registry as backends

    monkeypatch.setitem(backends.COMPILERS, "misbehaving", "compile_fakes:MisbehavingCompiler")
    monkeypatch.setitem(backends.DEFAULT_DEVICES, "misbehaving", ("onnxruntime",))
    monkeypatch.setitem(spec_mod.BACKEND_COMPILE_KEYS, "misbehaving", {"misbehave", "pidfile"})
    text = (
        SWEEP.replace("BC", "true")
        .replace("CALMAX", "9.5")
        .replace("base: tiny.yaml", "base: tiny.yaml\nbackend: misbehaving")
    )
    text += (
        f"  - name: hangs\n    compile: {{misbehave: hang, pidfile: {tmp_path / 'pid'}, timeout_s: 5}}\n"
        "  - name: crashes\n    compile: {misbehave: segv}\n"
    )
    result = run_sweep(parse(write_sweep(text)), tmp_path / "runs", SweepOptions(jobs=2, progress=False))
    runs = runs_of(result, tmp_path / "runs")
    ledger = Ledger(tmp_path / "runs" / "ledger.sqlite")
    assert runs["hangs"]["status"] == "failed" and "timeout after 5" in runs["hangs"]["error"]
    assert runs["crashes"]["status"] == "failed" and "SIGSEGV" in runs["crashes"]["error"]
    assert ledger.record(runs["crashes"]["id"]).stderr_tail
    assert all(runs[v]["status"] == "ok" for v in ("base", "weights", "scale", "calib")), {
        v: (r["status"], r.get("error")) for v, r in runs.items()
    }


def test_fresh_identical_sweep_compiles_nothing(write_sweep, tmp_path):
    path = write_sweep(SWEEP.replace("BC", "true").replace("CALMAX", "9.5"))
    first = run_sweep(parse(path), tmp_path / "runs", SweepOptions(jobs=2, progress=False))
    again = run_sweep(parse(path), tmp_path / "runs", SweepOptions(jobs=2, progress=False, fresh=True))
    ledger = Ledger(tmp_path / "runs" / "ledger.sqlite")
    rows = [ledger.record(o.run_id).to_json() for o in again.outcomes]
    assert len(rows) == len(first.outcomes) and all(r["cache_hit"] for r in rows)
    assert {r["variant"]: r["kernel_sha"] for r in rows} == {
        o.variant: ledger.record(o.run_id).to_json()["kernel_sha"] for o in first.outcomes
    }


def test_compiles_on_a_dask_local_cluster(write_sweep, tmp_path):
    distributed = pytest.importorskip("distributed")
    path = write_sweep(SWEEP.replace("BC", "true").replace("CALMAX", "9.5"))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        result = run_sweep(
            parse(path), tmp_path / "runs", SweepOptions(jobs=2, progress=False, cluster=cluster.scheduler_address)
        )
        info = cluster.scheduler_info
        workers = set((info() if callable(info) else info)["workers"])
    ledger = Ledger(tmp_path / "runs" / "ledger.sqlite")
    rows = {o.variant: ledger.record(o.run_id).to_json() for o in result.outcomes}
    assert {r["compiled_on"] for r in rows.values()} <= workers and not result.failed
    assert rows["scale"]["verdict"] == "confounded" and rows["weights"]["verdict"] == "clean"


def test_measurement_knob_ab_shares_one_compile(tmp_path):
    graphs = Path(__file__).resolve().parents[2] / "graphs"
    spec = parse(graphs / "knob-ab.yaml")
    quick = {"frames": 20, "warmup": 2, "repeats": 2, "min_duration_s": 0.0}
    fast = replace(spec, variants=tuple(replace(v, measure=v.measure.model_copy(update=quick)) for v in spec.variants))
    result = run_sweep(fast, tmp_path / "runs", SweepOptions(jobs=1, progress=False))
    ledger = Ledger(tmp_path / "runs" / "ledger.sqlite")
    runs = [ledger.record(o.run_id).to_json() for o in result.outcomes]
    assert [r["verdict"] for r in runs] == ["reference", "reference"]
    assert [r["cache_hit"] for r in runs] == [False, True] and runs[0]["kernel_sha"] == runs[1]["kernel_sha"]


def test_forced_range_reaches_through_a_pool(write_sweep, tmp_path):
    import onnx
    from authored import pooled_two_conv

    onnx.save(pooled_two_conv(), str(tmp_path / "pooled.onnx"))
    text = f"""\
    sweep: pooled
    base: pooled.onnx
    compile: {{bias_correction: false}}
    calibration: {{count: 8}}
    inputs: {{count: 2}}
    {FAST_MEASURE}
    variants:
      - name: base
      - name: scale
        perturb: [{{op: force_range_out, layer: conv1, range: [0.0, 8.0]}}]
    """
    runs = _sweep_runs(write_sweep(text), tmp_path / "runs")
    assert runs["scale"]["verdict"] == "clean", runs["scale"]["changes"]
    assert any(c["layer"] == "conv2" and c["what"] == "in_scale" for c in runs["scale"]["changes"])


def test_reference_is_the_plain_variant_and_its_failure_leaves_others_unaudited(write_sweep, tmp_path):
    base = SWEEP.replace("BC", "true").replace("CALMAX", "9.5")
    own = base.replace("  - name: base\n", "  - name: per-channel\n    compile: {per_channel: false}\n  - name: base\n")
    runs = _sweep_runs(write_sweep(own), tmp_path / "a")
    assert runs["base"]["verdict"] == "reference" and runs["weights"]["verdict"] == "clean"
    assert runs["per-channel"]["verdict"] == "reference"  # the base under options of its own: its group's
    failing = base.replace("  - name: base\n", "  - name: base\n    compile: {timeout_s: 0.001}\n")
    runs = _sweep_runs(write_sweep(failing, "failing.yaml"), tmp_path / "b")
    assert runs["base"]["status"] == "failed" and "timeout" in runs["base"]["error"]
    assert {runs[v]["verdict"] for v in ("weights", "scale", "missed")} == {"no-reference"}


def test_own_compile_options_are_judged_against_the_base_compiled_with_them(write_sweep, tmp_path):
    """A variant's own compile: gets a real verdict, against a reference the sweep adds (the
    base compiled with the same options), not ``n/a``."""
    base = SWEEP.replace("BC", "true").replace("CALMAX", "9.5")
    own = base + (
        "  - name: pt-weights\n    compile: {per_channel: false}\n"
        "    perturb:\n      - {op: scale_weights, layer: conv1, factor: 1.05}\n"
        "  - name: pt-scale\n    compile: {per_channel: false}\n"
        "    perturb:\n      - {op: force_range_out, layer: conv1, range: [0.0, 8.0]}\n"
    )
    runs = _sweep_runs(write_sweep(own), tmp_path / "runs")
    assert runs["base (per_channel=False)"]["verdict"] == "reference"
    assert runs["pt-weights"]["verdict"] == "clean" and runs["pt-scale"]["verdict"] == "confounded"
    # per-tensor, x1.05 leaves a symmetric kernel's integers as they were: its scale alone moved
    kernel = {c["layer"] for c in runs["pt-weights"]["changes"] if c["what"] in ("kernel", "kernel-scale")}
    assert kernel == {"conv1"}  # judged against the per-tensor base: only what it perturbed moved
    assert runs["weights"]["verdict"] == "clean"  # the sweep's own group, against its own base


def test_an_edited_base_is_a_new_sweep_not_a_resume(write_sweep, recipe, tmp_path):
    path = write_sweep(SWEEP.replace("BC", "true").replace("CALMAX", "9.5"))
    first = _sweep_runs(path, tmp_path / "runs")
    recipe.write_text(recipe.read_text().replace("weight_std: 0.1}", "weight_std: 0.2}", 1))
    from loop.flow.resume import ContentChanged

    with pytest.warns(ContentChanged, match="changed since run .*: measured afresh"):
        second = _sweep_runs(path, tmp_path / "runs")
    assert first["base"]["id"] != second["base"]["id"]
    assert first["base"]["kernel_sha"] != second["base"]["kernel_sha"]


def test_overlap_flags_only_runs_measured_while_compiling(write_sweep, tmp_path):
    path = write_sweep(SWEEP.replace("BC", "true").replace("CALMAX", "9.5"))
    _sweep_runs(path, tmp_path / "runs")
    cached = _sweep_runs(path, tmp_path / "runs", fresh=True, overlap=True)
    assert all(r["cache_hit"] and "host-contended" not in r["flags"] for r in cached.values())


def _plain_sweep(write_sweep) -> Path:
    return write_sweep(SWEEP.replace("BC", "true").replace("CALMAX", "9.5"))


@pytest.mark.parametrize("damage", ["swap", "flip"])
def test_a_damaged_artifact_is_rewritten_never_measured_as_the_variant(write_sweep, tmp_path, damage):
    import hashlib
    import shutil

    from loop.store.files import StoreWarning

    path, runs = _plain_sweep(write_sweep), tmp_path / "runs"
    first = _sweep_runs(path, runs)
    weights = Path(first["weights"]["artifact"])
    if damage == "swap":
        shutil.copy(first["base"]["artifact"], weights)  # base's bytes under weights' name
    else:
        data = bytearray(weights.read_bytes())
        data[len(data) // 2] ^= 0xFF
        weights.write_bytes(bytes(data))
    with pytest.warns(StoreWarning, match="did not match its hash; rewritten"):
        again = _sweep_runs(path, runs, fresh=True)
    assert again["weights"]["status"] == "ok" and again["weights"]["cache_hit"]
    assert again["weights"]["scores"]["bytes_differ"] == first["weights"]["scores"]["bytes_differ"] > 0
    assert hashlib.sha256(weights.read_bytes()).hexdigest()[:32] == weights.stem


def test_a_resumed_reference_whose_artifact_was_swapped_is_not_compared(write_sweep, tmp_path):
    import shutil
    import sqlite3

    from loop.store.files import StoreWarning

    path, runs = _plain_sweep(write_sweep), tmp_path / "runs"
    first = _sweep_runs(path, runs)
    db = sqlite3.connect(runs / "ledger.sqlite")
    db.execute("UPDATE runs SET status='interrupted' WHERE variant='weights'")  # so the resume redoes it
    db.commit()
    db.close()
    shutil.copy(first["weights"]["artifact"], first["base"]["artifact"])  # weights' bytes under base's name
    with pytest.warns(StoreWarning, match="the reference's artifact: .* does not match its hash"):
        again = _sweep_runs(path, runs)
    assert again["weights"]["id"] != first["weights"]["id"] and again["weights"]["verdict"] == "clean"
    assert "bytes_differ" not in again["weights"]["scores"]  # never 0 against its own outputs


def test_a_checksummed_pickle_planted_in_every_cache_file_runs_nothing(write_sweep, tmp_path):
    import hashlib
    import pickle

    from hostile import Planted

    path, runs, marker = _plain_sweep(write_sweep), tmp_path / "runs", tmp_path / "ran"
    first = _sweep_runs(path, runs)
    payload = pickle.dumps(Planted(marker))
    planted = b"loop-cache-1\n" + hashlib.sha256(payload).digest() + payload
    files = list((runs / "cache").iterdir())
    for file in files:
        file.write_bytes(planted)
        (file.parent / (file.name.split(".")[0] + ".pkl")).write_bytes(planted)
    with pytest.warns(UserWarning, match="a miss"):
        again = _sweep_runs(path, runs, fresh=True)
    assert not marker.exists()
    assert all(r["status"] == "ok" and not r["cache_hit"] for r in again.values())
    assert {v: r["kernel_sha"] for v, r in again.items()} == {v: r["kernel_sha"] for v, r in first.items()}


def test_names_stay_names(write_sweep, tmp_path):
    """Slash-bearing and unicode sweep and variant names run, and nothing lands outside runs/."""
    text = (
        _plain_sweep(write_sweep)
        .read_text()
        .replace("sweep: study", "sweep: ../../étude/x")
        .replace("name: weights", "name: ../../poids/..\\évasion")
    )
    runs = tmp_path / "deep" / "runs"
    before = set(tmp_path.rglob("*"))
    result = _sweep_runs(write_sweep(text, "odd.yaml"), runs)
    assert result["../../poids/..\\évasion"]["verdict"] == "clean"
    assert {p for p in set(tmp_path.rglob("*")) - before if runs not in p.parents and p != runs} == {
        tmp_path / "deep",
        tmp_path / "odd.yaml",
    }


def test_verdicts_do_not_depend_on_where_the_reference_is_written(write_sweep, tmp_path):
    first = SWEEP.replace("BC", "true").replace("CALMAX", "9.5")
    last = first.replace("  - name: base\n", "") + "  - name: base\n"
    a = _sweep_runs(write_sweep(first), tmp_path / "a")
    b = _sweep_runs(write_sweep(last, "last.yaml"), tmp_path / "b", jobs=2)
    assert {v: r["verdict"] for v, r in a.items()} == {v: r["verdict"] for v, r in b.items()}
    assert b["scale"]["verdict"] == "confounded" and b["weights"]["verdict"] == "clean"
    for v in a:
        assert a[v]["layers"] == b[v]["layers"], v


def test_no_reference_says_why(write_sweep, tmp_path):
    failing = SWEEP.replace("BC", "true").replace("CALMAX", "9.5")
    failing = failing.replace("  - name: base\n", "  - name: base\n    compile: {timeout_s: 0.001}\n")
    runs_dir = tmp_path / "runs"
    runs = _sweep_runs(write_sweep(failing), runs_dir)
    with Ledger(runs_dir / "ledger.sqlite") as ledger:
        why = ledger.record(runs["weights"]["id"]).judged.no_reference
    assert why.startswith("the reference 'base' failed at stage") and "timeout" in why
    with Ledger(runs_dir / "ledger.sqlite") as ledger:
        weights = next(r for r in ledger.records() if r.variant == "weights")
    assert weights.why_apart == why  # what `loop runs` and the report say

"""The command line as a user meets it: exit codes 0/1/2, one-line errors, pinned JSON keys."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from authored import FAST_MEASURE
from click.testing import CliRunner

from loop.cli import main

SWEEP = f"""\
sweep: cli
base: tiny.yaml
calibration: {{count: 8}}
inputs: {{count: 2}}
{FAST_MEASURE}
variants:
  - name: base
  - name: scale
    perturb:
      - {{op: force_range_out, layer: conv1, range: [0.0, 8.0]}}
"""
# The pinned shape of ``loop runs --json``: every key, in order.
RUN_KEYS = [
    "id",
    "sweep",
    "variant",
    "status",
    "error",
    "stage",
    "generation",
    "onnx_sha",
    "kernel_sha",
    "bias_sha",
    "artifact",
    "backend",
    "device",
    "stages",
    "layers",
    "measure",
    "scores",
    "verdict",
    "flags",
    "changes",
    "compiled_on",
    "cache_hit",
    "perturb",
    "warnings",
    "no_reference",  # added: why a no-reference run had none (None for every other run)
    "weight_bytes",  # added (issue 44): the weights at their compiled precision, None where not recorded
]


def invoke(*args: str) -> "object":
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def swept(write_sweep, tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    result = invoke("sweep", str(write_sweep(SWEEP)), "--runs", str(runs), "--jobs", "1", "--quiet")
    assert result.exit_code == 0, result.output
    assert "confounded" in result.output and "Recorded, not used in comparisons" in result.output
    return runs


def test_runs_as_json_lines_and_csv_say_the_same(swept: Path):
    import csv
    import io

    whole = json.loads(invoke("runs", "--runs", str(swept), "--json").output)
    lines = [json.loads(x) for x in invoke("runs", "--runs", str(swept), "--format", "jsonl").output.splitlines()]
    assert lines == whole
    rows = list(csv.DictReader(io.StringIO(invoke("runs", "--runs", str(swept), "--format", "csv").output)))
    assert list(rows[0]) == RUN_KEYS and [r["variant"] for r in rows] == [r["variant"] for r in whole]
    assert json.loads(rows[1]["changes"]) == whole[1]["changes"] and rows[0]["error"] == ""


def test_a_sweep_name_that_matches_nothing_says_so(swept: Path):
    result = invoke("runs", "--runs", str(swept), "--sweep", "nope")
    assert result.exit_code == 2 and "no runs of sweep 'nope'" in result.output and "its sweeps: cli" in result.output


def test_runs_json_keys(swept: Path):
    runs = json.loads(invoke("runs", "--runs", str(swept), "--json").output)
    assert len(runs) == 2 and all(list(r) == RUN_KEYS for r in runs)
    assert set(runs[0]["stages"]) >= {"optimize_s", "compile_s"}
    assert set(runs[0]["layers"][0]) == {
        "name",
        "kernel_sha",
        "bias_sha",
        "kernel_int_sha",
        "bias_int_sha",
        "in_scale",
        "out_scale",
    }
    assert set(runs[0]["measure"]) >= {"ttfo_ms", "rate_fps", "spread_pct", "bytes_in", "bytes_out"}
    assert set(runs[0]["measure"]["rate_fps"]) >= {"median", "min", "max", "ci95", "frames", "repeats"}
    assert list(runs[1]["changes"][0]) == ["layer", "what", "detail", "allowed"]
    assert [(op["op"], op["layer"]) for op in runs[1]["perturb"]] == [("force_range_out", "conv1")]
    assert set(runs[0]["scores"]) >= {"output_mean", "deterministic", "sensitive", "snr_db"}


def test_audit_json(swept: Path):
    audit = json.loads(invoke("audit", "--runs", str(swept), "--json").output)
    assert [a["verdict"] for a in audit] == ["reference", "confounded"]
    assert set(audit[1]) == {"id", "sweep", "variant", "verdict", "changes"}
    assert {"layer", "what", "detail"} <= set(audit[1]["changes"][0])


def test_tables_print(swept: Path):
    assert "confounded" in invoke("runs", "--runs", str(swept)).output
    assert "! conv1 bias" in invoke("audit", "--runs", str(swept)).output


@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda s: s.replace("force_range_out", "force_range_up"), "unknown op"),
        (lambda s: s.replace("[0.0, 8.0]", "[8.0, 0.0]"), "inverted range"),
        (lambda s: s.replace("layer: conv1", "layer: conv7"), "unknown layer"),
        (lambda s: s + "  - name: base\n", "duplicate variant name"),
        (lambda s: s.replace("variants:\n", "variants: [\n"), "malformed YAML"),
    ],
)
def test_bad_input_exit_2_one_line_writes_nothing(write_sweep, tmp_path: Path, edit, words):
    runs = tmp_path / "runs"
    result = invoke("sweep", str(write_sweep(edit(SWEEP))), "--runs", str(runs), "--quiet")
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "sweep.yaml:" in lines[0]
    assert not runs.exists()


def test_failed_variant_exits_1(write_sweep, tmp_path: Path):
    calib = tmp_path / "calib.npy"
    import numpy as np

    np.save(calib, np.zeros((4, 3, 8, 8), np.float32))
    text = SWEEP.replace("calibration: {count: 8}", "calibration: {count: 4, path: calib.npy}")
    text += "  - name: noisy\n    perturb: [{op: add_weight_noise, layer: conv2, std: 0.01}]\n    compile: {timeout_s: 0.001}\n"  # noqa: E501 - a sweep file's line
    result = invoke("sweep", str(write_sweep(text)), "--runs", str(tmp_path / "runs"), "--quiet", "--jobs", "1")
    runs = json.loads(invoke("runs", "--runs", str(tmp_path / "runs"), "--json").output)
    status = {r["variant"]: r["status"] for r in runs}
    assert result.exit_code == 1, result.output
    assert status["noisy"] == "failed" and status["base"] == "ok"


def test_help_and_backends_without_hailo():
    out = subprocess.run([sys.executable, "-m", "loop.cli", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "sweep" in out.stdout
    statuses = json.loads(invoke("backends", "--json").output)
    by_name = {(s["name"], s["kind"]): s for s in statuses}
    assert by_name[("onnxruntime", "compiler")]["available"] is True
    assert set(by_name) >= {("hailo", "compiler"), ("hailort", "device"), ("hailo-emulator", "device")}
    assert all(set(s) == {"name", "kind", "available", "reason"} for s in statuses)
    lacking = [s for s in statuses if ":" in s["name"] and not s["available"]]
    short, every = invoke("backends").output, invoke("backends", "--all").output
    assert "not in this onnxruntime build (" not in short and "loop backends --all lists them" in short
    assert all(s["name"] in every for s in lacking) and len(every.splitlines()) == len(statuses)
    assert len(short.splitlines()) == len(statuses) - len(lacking) + (1 if lacking else 0)


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_bad_input_leaves_an_existing_runs_folder_byte_identical(swept: Path, write_sweep, tmp_path: Path):
    before = _tree(swept)
    for bad in (
        SWEEP.replace("layer: conv1", "layer: conv7"),
        "sweep: [unclosed\n",
        SWEEP.replace("tiny.yaml", "absent.onnx"),
    ):
        result = invoke("sweep", str(write_sweep(bad, "bad.yaml")), "--runs", str(swept), "--quiet")
        assert result.exit_code == 2, result.output
    assert _tree(swept) == before


def test_compare_refuses_a_confounded_run(swept: Path):
    result = invoke("compare", "1", "2", "--runs", str(swept))
    assert result.exit_code == 2 and "confounded" in result.output and "left out of comparisons" in result.output


def test_runs_that_is_a_file_is_a_usage_error(write_sweep, tmp_path: Path):
    (tmp_path / "afile").write_text("x")
    result = invoke("sweep", str(write_sweep(SWEEP)), "--runs", str(tmp_path / "afile"), "--quiet")
    assert result.exit_code == 2 and "cannot open the ledger" in result.output


def test_scorer_may_return_numpy_values(write_sweep, tmp_path: Path, monkeypatch):
    scorer = tmp_path / "my_scorer.py"
    scorer.write_text(
        "import numpy as np\n"
        "def score(outputs, reference, raw):\n"
        "    return {'peak': np.float32(np.max(outputs[0][0])), 'hist': np.bincount(raw[0][0].ravel())[:4]}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    runs = tmp_path / "runs"
    result = invoke(
        "sweep", str(write_sweep(SWEEP)), "--runs", str(runs), "--quiet", "--jobs", "1", "--scorer", "my_scorer:score"
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(invoke("runs", "--runs", str(runs), "--json").output)
    assert isinstance(rows[0]["scores"]["peak"], float) and len(rows[0]["scores"]["hist"]) == 4


def test_unreachable_cluster_is_a_usage_error_and_writes_nothing(write_sweep, tmp_path: Path, monkeypatch):
    pytest.importorskip("distributed")
    monkeypatch.setattr("loop.flow.compile_pool.CONNECT_TIMEOUT_S", 1.0)
    runs = tmp_path / "runs"
    result = invoke("sweep", str(write_sweep(SWEEP)), "--runs", str(runs), "--quiet", "--cluster", "tcp://127.0.0.1:9")
    assert result.exit_code == 2 and "cannot reach the Dask scheduler" in result.output
    assert not runs.exists()


def test_layers_lists_names_and_where_ranges_land(exported_onnx: Path):
    result = invoke("layers", str(exported_onnx), "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [r["layer"] for r in rows] == ["/features/0/Conv", "/features/1/Conv", "/classifier/Gemm"]
    assert rows[0]["out_tensor"] == "b" and rows[0]["out_bounds"] == [0.0, 6.0]
    assert rows[2]["in_tensor"] == "e"  # GlobalAveragePool's output: Flatten shares its grid
    assert invoke("layers", "missing.onnx").exit_code == 2


def test_layers_keeps_layer_names_whole_and_cuts_long_tensor_names(tmp_path: Path):
    """``loop layers`` is where a sweep file's ``layer:`` is copied from: a layer name cut in the
    middle drops what tells it apart (EfficientNet's ``/_blocks.1/``), so only tensors are cut."""
    import onnx
    from authored import exported_classifier

    model = exported_classifier()
    deep = "/encoder" + "/transformer_block_stack" * 6
    inner = {o for n in model.graph.node for o in n.output} - {o.name for o in model.graph.output}
    for node in model.graph.node:
        node.name = deep + node.name
        node.input[:] = [deep + t if t in inner else t for t in node.input]
        node.output[:] = [deep + t if t in inner else t for t in node.output]
    onnx.checker.check_model(model)
    onnx.save(model, str(tmp_path / "deep.onnx"))
    names = [n.name for n in model.graph.node if n.op_type in ("Conv", "Gemm")]
    text = CliRunner().invoke(main, ["layers", str(tmp_path / "deep.onnx")], env={"COLUMNS": "120"}).output
    assert all(name in text for name in names), text
    assert "…" in text  # the tensor columns were cut
    runner = CliRunner()
    rows = json.loads(runner.invoke(main, ["layers", str(tmp_path / "deep.onnx"), "--json"]).output)
    assert [r["layer"] for r in rows] == names


def test_layers_takes_input_shapes_and_shows_the_clamps(tmp_path: Path):
    import onnx
    from authored import clamp_chain_model, dynamic_detector

    onnx.save(dynamic_detector(), str(tmp_path / "det.onnx"))
    refused = invoke("layers", str(tmp_path / "det.onnx"))
    assert refused.exit_code == 2 and len(refused.output.strip().splitlines()) == 1
    assert "--input-shape images=1,3,?,?" in refused.output
    shaped = invoke("layers", str(tmp_path / "det.onnx"), "--input-shape", "images=1,3,16,16", "--json")
    assert shaped.exit_code == 0 and [r["layer"] for r in json.loads(shaped.output)] == ["head"]
    onnx.save(clamp_chain_model("add-clip"), str(tmp_path / "clip.onnx"))
    text = invoke("layers", str(tmp_path / "clip.onnx")).output
    assert "clamp in" in text and "[0, 6]" in text.splitlines()[-1]  # conv2 reads the Clip behind a bias Add


def _flip_record(swept: Path) -> None:
    import sqlite3

    db = sqlite3.connect(swept / "ledger.sqlite")
    db.execute("UPDATE runs SET record=substr(record, 1, 40) WHERE id=2")  # a torn record, as flipped bytes give
    db.commit()
    db.close()


def test_a_corrupt_row_is_listed_as_such_with_the_rest(swept: Path):
    _flip_record(swept)
    table = invoke("runs", "--runs", str(swept))
    assert table.exit_code == 0 and "corrupt" in table.output and "reference" in table.output
    rows = json.loads(invoke("runs", "--runs", str(swept), "--json").output)
    assert [(r["id"], r["status"]) for r in rows] == [(1, "ok"), (2, "corrupt")]
    assert invoke("audit", "--runs", str(swept)).exit_code == 0


@pytest.mark.parametrize("command", [["runs"], ["audit"], ["compare", "1", "2"], ["sweep", "SWEEP", "--quiet"]])
def test_a_damaged_ledger_is_one_line_and_exit_1(swept: Path, write_sweep, command: list[str]):
    path = swept / "ledger.sqlite"
    path.write_bytes(b"\xff" * 16 + path.read_bytes()[16:])
    args = [str(write_sweep(SWEEP)) if a == "SWEEP" else a for a in command]
    result = invoke(*args, "--runs", str(swept))
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1 and "file is not a database" in lines[0], result.output


def test_doctor_names_each_problem_in_one_line_and_repairs(swept: Path):
    clean = invoke("doctor", "--runs", str(swept))
    assert clean.exit_code == 0 and clean.output.strip() == "0 problem(s)"
    _flip_record(swept)
    (swept / "cache" / "planted.pkl").write_bytes(b"\x80\x05planted")
    found = invoke("doctor", "--runs", str(swept))
    lines = found.output.strip().splitlines()
    assert found.exit_code == 1 and len(lines) == 3 and lines[-1] == "2 problem(s)"
    assert lines[0].startswith("run 2: corrupt") and lines[1].startswith("cache/planted.pkl: ")
    fixed = invoke("doctor", "--runs", str(swept), "--repair")
    assert fixed.exit_code == 0 and "2 repaired" in fixed.output
    assert invoke("doctor", "--runs", str(swept)).output.strip() == "0 problem(s)"


def _no_leftovers(runs: Path) -> None:
    """No temporary file, and no empty file but SQLite's own WAL."""
    assert not [p for p in runs.rglob("*.tmp")]
    assert not [p for p in runs.rglob("*") if p.is_file() and p.stat().st_size == 0 and not p.name.endswith("-wal")]


def _statuses(runs: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in json.loads(invoke("runs", "--runs", str(runs), "--json").output):
        out.setdefault(r["variant"], []).append(r["status"])
    return out


def test_a_full_artifacts_disk_fails_each_variant_and_a_resume_completes_them(write_sweep, tmp_path: Path):
    from filesystems import fill, small_filesystem

    runs, sweep = tmp_path / "runs", str(write_sweep(SWEEP))
    with small_filesystem(runs / "artifacts", 64 * 1024) as artifacts:
        filler = fill(artifacts, leave=1024)
        full = invoke("sweep", sweep, "--runs", str(runs), "--quiet", "--jobs", "1")
        assert full.exit_code == 1 and "Traceback" not in full.output
        assert "at store: cannot store the artifact: [Errno 28] No space left on device" in full.output
        assert _statuses(runs) == {"base": ["failed"], "scale": ["failed"]}
        filler.unlink()
        again = invoke("sweep", sweep, "--runs", str(runs), "--quiet", "--jobs", "1")
        assert again.exit_code == 0, again.output
        assert _statuses(runs) == {"base": ["failed", "ok"], "scale": ["failed", "ok"]}
        _no_leftovers(runs)


def test_a_full_ledger_disk_stops_the_sweep_in_one_line_and_a_resume_completes_it(write_sweep, tmp_path: Path):
    from filesystems import fill, small_filesystem

    runs, sweep = tmp_path / "runs", str(write_sweep(SWEEP))
    with small_filesystem(runs, 4 * 2**20):
        filler = fill(runs, leave=60 * 1024)
        full = invoke("sweep", sweep, "--runs", str(runs), "--quiet", "--jobs", "1")
        lines = [line for line in full.output.strip().splitlines() if not line.startswith("loop: warning:")]
        assert full.exit_code == 1 and len(lines) == 1 and "Traceback" not in full.output, full.output
        assert "the disk is full" in lines[0] or "No space left" in lines[0]
        filler.unlink()
        again = invoke("sweep", sweep, "--runs", str(runs), "--quiet", "--jobs", "1")
        assert again.exit_code == 0, again.output
        assert {v: s[-1] for v, s in _statuses(runs).items()} == {"base": "ok", "scale": "ok"}
        _no_leftovers(runs)


def test_compare_json_carries_basis_and_interval(swept: Path):
    fast = ("--rounds", "3", "--round-s", "0.05", "--runs", str(swept), "--json", "--quiet")
    out = json.loads(invoke("compare", "1", "1", *fast).output)
    assert out["basis"] == "interleaved" and out["rounds"] == 3 and out["verdict"] in ("noise", "faster", "slower")
    assert len(out["ci95"]) == 2 and out["noise_floor_pct"] >= 0 and out["ratio"] > 0
    ledger_only = json.loads(invoke("compare", "1", "1", "--from-ledger", *fast).output)
    assert ledger_only["basis"] == "ledger" and ledger_only["verdict"] == "undecided"  # 2 repeats a side
    assert "needs 3 or more" in ledger_only["reason"]
    a_a = json.loads(invoke("compare", "--a-a", "1", "--pairs", "2", *fast).output)
    assert a_a["pairs"] == 2 and 0 <= a_a["false_call_rate"] <= 1 and len(a_a["verdicts"]) == 2
    assert invoke("compare", "1", "--runs", str(swept)).exit_code == 2
    told = invoke("compare", "--a-a", "1", "--pairs", "2", *fast[:-1])  # without --quiet: progress on stderr
    assert "A/A pairs of run 1" in told.stderr and "2/2" in told.stderr and json.loads(told.stdout)["pairs"] == 2
    said = invoke("compare", "1", "1", *fast[:-1])
    assert said.stderr.startswith("loop: re-measuring runs 1 and 1 interleaved, 3 rounds, about 0 s")


def test_compare_refuses_a_swapped_artifact_in_one_line(swept: Path):
    from loop.store.ledger import Ledger

    with Ledger.of_runs(swept, readonly=True, existing=True) as book:
        mine, other = Path(book.record(1).artifact or ""), Path(book.record(2).artifact or "")
    mine.write_bytes(other.read_bytes())  # another variant's artifact under run 1's name
    result = invoke("compare", "1", "1", "--rounds", "2", "--round-s", "0.05", "--runs", str(swept))
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1 and "does not match its hash" in lines[0], result.output


def test_score_only_sweep_has_no_rate_says_why_and_a_measured_rerun_measures(write_sweep, tmp_path: Path):
    runs, path = tmp_path / "runs", write_sweep(SWEEP)
    result = invoke("sweep", str(path), "--runs", str(runs), "--jobs", "1", "--quiet", "--score-only")
    assert result.exit_code == 0, result.output
    rows = json.loads(invoke("runs", "--runs", str(runs), "--json").output)
    assert rows[0]["flags"] == ["score-only"] and rows[1]["flags"][-1] == "score-only"
    assert set(rows[1]["flags"]) <= {"score-only", "below-reference"}  # a range 8x wide: far below, may be said
    assert all(not r["measure"].get("rate_fps") and r["scores"]["snr_db"] is not None for r in rows)
    assert rows[1]["verdict"] == "confounded"  # audited all the same
    table = invoke("runs", "--runs", str(runs)).output
    assert table.count("score-only") >= 4  # in the rate column and among the flags, both runs
    measured = invoke("sweep", str(path), "--runs", str(runs), "--jobs", "1", "--quiet")  # not a resume of it
    assert measured.exit_code == 0 and "resumed" not in measured.output
    later = json.loads(invoke("runs", "--runs", str(runs), "--json").output)[2:]
    assert not any("score-only" in r["flags"] for r in later) and all(
        r["measure"]["rate_fps"]["median"] > 0 for r in later
    )
    assert all(r["cache_hit"] for r in later)


def test_score_only_study_sweep_prints_why_there_is_no_rate(write_sweep, tmp_path: Path):
    runs = tmp_path / "runs"
    text = SWEEP.replace(
        "force_range_out, layer: conv1, range: [0.0, 8.0]", "scale_weights, layer: conv1, factor: 1.05"
    )
    result = invoke("sweep", str(write_sweep(text)), "--runs", str(runs), "--quiet", "--study", "st", "--score-only")
    assert result.exit_code == 0, result.output
    assert "score-only" in result.output
    shown = json.loads(invoke("study", "st", "--runs", str(runs), "--json").output)
    assert shown[0]["why_no_rate"] == "score-only" and shown[0]["rate_ratio"] is None
    refused = invoke("study", "st", "--runs", str(runs), "--best", "rate_ratio")
    assert refused.exit_code == 2 and "measure=True" in refused.output and len(refused.output.splitlines()) == 1


def test_a_sweep_file_naming_an_array_keeps_it_under_runs_and_records_its_hash(write_sweep, tmp_path: Path):
    import numpy as np

    from loop.core.arrays import npy_bytes, ref_of
    from loop.store.arrays import load_array

    a, runs = np.array([0.0, 8.0]), tmp_path / "runs"
    ref = ref_of(a)
    (tmp_path / "range.npy").write_bytes(npy_bytes(a))
    text = SWEEP.replace("range: [0.0, 8.0]", f"range: {{array: {ref['array']}, path: range.npy}}")
    result = invoke("sweep", str(write_sweep(text)), "--runs", str(runs), "--jobs", "1", "--quiet", "--score-only")
    assert result.exit_code == 0, result.output
    rows = json.loads(invoke("runs", "--runs", str(runs), "--json").output)
    assert rows[1]["perturb"][0]["range"] == ref and rows[1]["perturb"][0]["hi"] == 8.0
    (tmp_path / "range.npy").unlink()  # the runs folder holds what its ledger names
    assert np.array_equal(load_array(runs, ref), a)


def test_fit_and_layers_take_what_the_other_takes(recipe: Path, artifact, tmp_path: Path):
    """loop fit weighs a recipe as loop layers reads one; loop layers on a compiled artifact says
    it is quantized already and where its layers are, not that it has none."""
    weighed = invoke("fit", str(recipe), "--json")
    assert weighed.exit_code == 0, weighed.output
    from loop.author.graphs import build_recipe

    built = build_recipe(recipe)
    assert json.loads(weighed.output)["weights"] == sum(int(np.prod(t.dims)) for t in built.graph.initializer)
    compiled = tmp_path / "artifact.onnx"
    compiled.write_bytes(artifact.data)
    said = invoke("layers", str(compiled))
    assert said.exit_code == 0 and "is quantized already (QLinearConv x2)" in said.output, said.output


def test_loop_study_starts_what_it_advises(tmp_path: Path):
    """A study asked for by a name the ledger lacks is one line naming those it holds and how to
    start one; --sweep starts it over a sweep file's base, and its name alone opens it after."""
    runs = str(tmp_path / "runs")
    sweep = str(Path(__file__).resolve().parents[1] / "graphs" / "variants.yaml")
    missing = invoke("study", "s1", "--runs", runs)
    assert missing.exit_code == 2 and "its studies: none" in missing.output and "--sweep FILE" in missing.output
    assert invoke("study", "s1", "--runs", runs, "--sweep", sweep).exit_code == 0
    assert invoke("study", "s1", "--runs", runs).exit_code == 0
    other = invoke("study", "s2", "--runs", runs)
    assert other.exit_code == 2 and "its studies: s1" in other.output


def test_a_study_sweep_refuses_what_a_study_does_not_take(tmp_path: Path) -> None:
    """--study runs the file as a generation here: a cluster, --overlap, --fresh or a stage timeout
    is a usage error before any work, not an option silently dropped."""
    for extra in (["--overlap"], ["--fresh"], ["--stage-timeout", "open=5"], ["--cluster", "tcp://x:1"]):
        done = CliRunner().invoke(main, ["sweep", "any.yaml", "--study", "s", "--runs", str(tmp_path), *extra])
        assert done.exit_code == 2 and "not a cluster, --overlap" in done.output, (extra, done.output)
    assert not list(tmp_path.iterdir())

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from loop.core.errors import LoopError
from loop.core.facts import CompileFacts, Failure, Judgement, Where
from loop.core.kinds import Flag, Stage, Status, Verdict
from loop.core.record import Change, RunRecord, Scores
from loop.core.vocab import LayerPrint
from loop.store.ledger import LEDGER_FILE, SCHEMA_VERSION, Ledger, LedgerWarning, to_row


def test_pragmas_and_schema(tmp_path: Path):
    ledger = Ledger(tmp_path / "l.sqlite")
    db = sqlite3.connect(tmp_path / "l.sqlite")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    ledger.close()


def test_run_lifecycle(tmp_path: Path):
    ledger = Ledger(tmp_path / "l.sqlite")
    run = ledger.begin("s", "key", "v", "spec", "onnxruntime")
    [entry] = ledger.entries("key")
    assert entry.status == Status.RUNNING and entry.pid and entry.host and entry.heartbeat
    assert entry.run.status == "running" and entry.run.backend == "onnxruntime" and entry.corrupt is None
    finished = RunRecord(
        run,
        "s",
        "v",
        Status.OK,
        flags=(Flag.POWER_LIMITED,),
        scores=Scores.from_json({"snr_db": float("inf")}),
        stages={"optimize_s": 1.0},
        verdict=Verdict.CLEAN,
        kernel_sha="abc",
    )
    ledger.finish(run, finished)
    record = ledger.record(run)
    out = record.to_json()
    assert out["status"] == "ok" and out["verdict"] == "clean" and out["flags"] == ["power-limited"]
    assert out["scores"]["snr_db"] == "inf" and out["stages"]["optimize_s"] == 1.0
    assert json.loads(json.dumps(out)) == out  # plain JSON values, enums as their strings
    assert record.scores.snr_db == float("inf") and record.flags == ("power-limited",) and record.measure.rate is None
    assert record.host is None and record.generation is None and ledger.records() == [record]


def test_a_run_comes_back_as_it_went_in(tmp_path: Path):
    """``to_row`` and ``from_row`` are a pair: every field the sweep sets survives the ledger."""
    layer = LayerPrint("conv1", "Conv", "k", "b", (0.5,), (0,), "x", 0.1, 0, "y", 0.2, 3, (1.0, 2.0), (0.01, 0.01))
    sent = RunRecord(
        1,
        "s",
        "v",
        Status.FAILED,
        error="timed out",
        stage=Stage.MEASURE,
        onnx_sha="o",
        kernel_sha="k",
        bias_sha="b",
        artifact="runs/artifacts/abc.onnx",
        backend="onnxruntime",
        device="onnxruntime",
        stages={"author_s": 0.5},
        layers=(layer,),
        verdict=Verdict.CONFOUNDED,
        flags=(Flag.HOST_BUSY, Flag("a-backend-own")),
        changes=(Change("conv1", "kernel", "kernel k -> l", allowed=False),),
        compiled_on="local",
        cache_hit=True,
        perturb=({"op": "scale_weights", "layer": "conv1", "factor": 1.05},),
        calib_sha="c",
        inputs_sha="i",
        options={"io": "uint8"},
        host="here",
        stderr_tail="",
        artifact_sha="abc123",
        notes=("1 Constant nodes made initializers",),
        compiled=CompileFacts(versions={"onnxruntime": "1"}, warnings=("w",), removed_clamps={}, more={"new": 1}),
        where=Where({"host": "here", "worker": None}, {"device_id": "d0"}),
        judged=Judgement("the reference 'base' failed"),
        failure=Failure("Traceback (most recent call last): ...", "the device process died"),
    )
    with Ledger(tmp_path / "l.sqlite") as ledger:
        run_id = ledger.begin("s", "key", "v", "spec", "onnxruntime")
        ledger.finish(run_id, sent)
        back = ledger.record(run_id)
    assert back == sent and back.warnings == ("w",) and back.layers[0].bias == (1.0, 2.0)
    assert isinstance(back.status, Status) and isinstance(back.stage, Stage) and back.flags[1] == "a-backend-own"
    assert not set(to_row(sent)) & {"id", "sweep", "variant", "generation", "backend"}  # begin's, not rewritten


# A run's record as loop wrote it before its facts were typed (issue 51): ``info`` a free dict of
# every key the compile, the run and the sweep put there, side by side. Authored here, not made by
# today's writer, so a reader that moved a key would fail this test rather than agree with itself.
INFO_BEFORE = {
    "quantized_from": "cache",
    "quantized_stages": {"optimize_s": 1.5},
    "host": "compiler-host",
    "peak_bytes": 123_456_789,
    "warnings": ["force_range_out(conv1): asked [0, 6], used [0, 6.02]"],
    "weights": {"weights": 100, "weights_by_bits": {"4": 60, "8": 40}, "bytes": 70, "resident": "yes"},
    "rescaled": [{"layer": "conv1", "factors": [1.05]}],
    "zero_bias_added": ["after_resize"],
    "weights_4bit_share": {"asked": 0.5, "share": 0.6, "layers": ["conv2"]},
    "overrides": {"r0": {"layer": "conv1", "side": "out", "asked": [0, 6], "used": [0, 6.02]}},
    "removed_clamps": {"relu_out": [0.0, None]},
    "wide_grids": {"y": {"node": "conv2", "bits": 16}},
    "bias_correction": {"guard": "kept", "corrected": ["conv1"], "skipped": {}},
    "model_script": "normalization1 = normalization([0], [1])\n",
    "param_keys": ["loop_net/conv1/kernel:0"],
    "param_source": "save_params(TRANSLATED)",
    "hw_arch": "hailo10h",
    "net_name": "loop_net",
    "workdir": "/tmp/loop-hailo-x",
    "optimization_level": {"requested": 2, "effective": 1},
    "activation_bits": {"conv1": 16},
    "layer_bits": {"conv1": [16, 8]},
    "onnx_layers": {"conv1": {"name": "Conv_0"}},
    "onnx_outputs": {"y": "Conv_1"},
    "cut": {"start_nodes": [], "end_nodes": ["Conv_1"]},
    "equalization": {"policy": "enabled", "layers": ["Conv_0"]},
    "kernel_causes": {"Conv_0": "equalization rescaled this kernel"},
    "weights_4bit": {"asked": 0.5, "layers": ["Conv_0"], "share": 0.6},
    "scale_from": {"conv1:out": "qp_out"},
    "hef_residency": {"hef_bytes": 2_000, "device_bytes": 4_000, "resident": "yes", "arithmetic": "fits"},
    "layout_source": "hailo_platform",
    "output_names": {"loop_net/conv2": "y"},
    "runner": {"host": "device-host", "worker": "tcp://10.0.0.2:4000"},
    "device_identity": {"device_id": "0001:01:00.0", "device_path": "/dev/hailo0"},
    "no_reference": "the reference 'base' failed at stage compile: timeout",
    "below_reference": {"snr_db": 3.0, "reference_snr_db": 30.0},
    "quantization_ruined": {"snr_db": 3.0, "threshold_db": 10.0, "try": ["precision: {layer: conv1, bits: 16}"]},
    "traceback": "Traceback (most recent call last): ...",
    "detail": "the device process died",
    "notes": ["1 Constant nodes made initializers"],
    "inputs_sha": "f" * 64,
    "a_newer_loops_key": {"kept": True},
}
RECORD_BEFORE = {
    "options": {"io": "uint8"},
    "versions": {"onnxruntime": "1.20", "loop_compile": "7"},
    "host": "device-host",
    "compiled_on": "local",
    "cache_hit": False,
    "stages": {"optimize_s": 0.0, "compile_s": 0.5},
    "layers": [],
    "measure": {},
    "scores": {"snr_db": 3.0},
    "changes": [],
    "perturb": [],
    "stderr_tail": "",
    "artifact_sha": "abc",
    "info": INFO_BEFORE,
}


def _stored_as(tmp_path: Path, record: dict[str, object]) -> RunRecord:
    """A finished row holding ``record`` as written (by an older loop), read back by this one."""
    with Ledger(tmp_path / "l.sqlite") as ledger:
        run_id = ledger.begin("s", "key", "v", "spec", "onnxruntime")
    db = sqlite3.connect(tmp_path / "l.sqlite")
    db.execute("UPDATE runs SET status='ok', record=? WHERE id=?", (json.dumps(record), run_id))
    db.commit()
    db.close()
    with Ledger(tmp_path / "l.sqlite") as ledger:
        return ledger.record(run_id)


def test_a_row_written_before_the_facts_were_typed_reads_into_them(tmp_path: Path):
    """Every key of an old row's ``info`` lands in its typed place, an unknown one is kept with the
    compile's, and writing the run back gives the same ``info`` and ``versions``."""
    run = _stored_as(tmp_path, RECORD_BEFORE)
    assert run.status == Status.OK, run.error
    old, c = INFO_BEFORE, run.compiled
    assert c.versions == RECORD_BEFORE["versions"] and (c.host, c.peak_bytes) == ("compiler-host", 123_456_789)
    assert (c.quantized_from, c.quantized_stages, c.warnings) == ("cache", {"optimize_s": 1.5}, tuple(old["warnings"]))
    assert (c.weights, c.rescaled, c.zero_bias_added) == (old["weights"], old["rescaled"], ("after_resize",))
    assert (c.weights_4bit_share, c.overrides, c.removed_clamps) == (
        old["weights_4bit_share"],
        old["overrides"],
        old["removed_clamps"],
    )
    assert (c.wide_grids, c.bias_correction, c.bias_guard) == (old["wide_grids"], old["bias_correction"], "kept")
    assert (c.model_script, c.param_keys, c.param_source) == (
        old["model_script"],
        tuple(old["param_keys"]),
        old["param_source"],
    )
    assert (c.hw_arch, c.net_name, c.workdir, c.layout_source) == (
        "hailo10h",
        "loop_net",
        "/tmp/loop-hailo-x",
        "hailo_platform",
    )
    for key in ("optimization_level", "activation_bits", "layer_bits", "onnx_layers", "onnx_outputs", "cut"):
        assert getattr(c, key) == old[key], key
    for key in ("equalization", "kernel_causes", "weights_4bit", "scale_from", "hef_residency", "output_names"):
        assert getattr(c, key) == old[key], key
    assert c.more == {"a_newer_loops_key": {"kept": True}}  # a key this loop does not know: kept, not lost
    assert run.where == Where(old["runner"], old["device_identity"])
    assert run.judged == Judgement(old["no_reference"], old["below_reference"], old["quantization_ruined"])
    assert run.failure == Failure(old["traceback"], old["detail"])
    assert (run.notes, run.inputs_sha) == (tuple(old["notes"]), "f" * 64)
    assert (run.warnings, run.no_reference, run.weight_bytes) == (tuple(old["warnings"]), old["no_reference"], 70)
    assert run.measured_on == "an unnamed device on device-host 0001:01:00.0"  # the runner and the device id
    with Ledger(tmp_path / "l.sqlite") as ledger:  # written back by today's writer: the same facts, where they were
        again = ledger.begin("s", "key", "v", "spec", "onnxruntime")
        ledger.finish(again, replace(run, id=again))
        (text,) = ledger.query("SELECT record FROM runs WHERE id=?", (again,))[0]
        assert ledger.record(again) == replace(run, id=again)
    written = json.loads(text)
    assert written["info"] == INFO_BEFORE and written["versions"] == RECORD_BEFORE["versions"]


@pytest.mark.parametrize(
    ("key", "value"),
    [("warnings", "one line"), ("weights", {"bytes": "70"}), ("hef_residency", {"hef_bytes": 1.5}), ("runner", [1])],
)
def test_an_old_row_of_another_shape_is_corrupt_naming_it(tmp_path: Path, key: str, value: object):
    run = _stored_as(tmp_path, {**RECORD_BEFORE, "info": {**INFO_BEFORE, key: value}})
    assert run.status == Status.CORRUPT and "its record has an unexpected shape (TypeError" in (run.error or "")


def test_newer_schema_is_refused(tmp_path: Path):
    path = tmp_path / "l.sqlite"
    Ledger(path).close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(LoopError, match="newer than this loop knows"):
        Ledger(path)


def test_an_existing_ledger_is_refused_missing(tmp_path: Path):
    with pytest.raises(LoopError, match=f"no ledger at {tmp_path}"):
        Ledger.of_runs(tmp_path, readonly=True, existing=True)
    assert not (tmp_path / LEDGER_FILE).exists()


V1_SCHEMA = """CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    sweep TEXT NOT NULL, sweep_key TEXT NOT NULL, variant TEXT NOT NULL,
    generation INTEGER, status TEXT NOT NULL, error TEXT, stage TEXT,
    pid INTEGER, host TEXT, heartbeat REAL, started REAL, finished REAL,
    spec_sha TEXT, onnx_sha TEXT, calib_sha TEXT, kernel_sha TEXT, bias_sha TEXT,
    backend TEXT, device TEXT, artifact TEXT, verdict TEXT, flags TEXT NOT NULL DEFAULT '[]',
    record TEXT NOT NULL DEFAULT '{}')"""

OPEN_AND_COUNT = """
import sys
from loop.store.ledger import Ledger
Ledger(sys.argv[1]).close()
"""


def test_old_schema_migrates_once_under_concurrent_opens(tmp_path: Path):
    import subprocess
    import sys

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute(V1_SCHEMA)
    db.execute("INSERT INTO runs (sweep, sweep_key, variant, status) VALUES ('s', 'k', 'v', 'ok')")
    db.execute("PRAGMA user_version=1")
    db.commit()
    db.close()
    procs = [
        subprocess.Popen([sys.executable, "-c", OPEN_AND_COUNT, str(path)], stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    errors = [p.communicate()[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, errors
    db = sqlite3.connect(path)
    columns = [r[1] for r in db.execute("PRAGMA table_info(runs)")]
    assert columns.count("compiled_on") == 1 and columns.count("cache_hit") == 1
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert db.execute("SELECT variant, status, cache_hit FROM runs").fetchall() == [("v", "ok", 0)]


def test_network_filesystem_is_detected():
    from loop.store.ledger import filesystem_type

    mounts = "/dev/vda / ext4 rw 0 0\nserver:/export /mnt/shared nfs4 rw 0 0\n"
    assert filesystem_type(Path("/mnt/shared/runs"), mounts) == "nfs4"
    assert filesystem_type(Path("/home/me/runs"), mounts) == "ext4"
    assert filesystem_type(Path("/mnt/sharedother"), mounts) == "ext4"


def test_ledger_on_network_filesystem_warns(tmp_path: Path, monkeypatch):
    import loop.store.ledger as ledger_mod

    monkeypatch.setattr(ledger_mod, "filesystem_type", lambda path, mounts=None: "nfs")
    with pytest.warns(ledger_mod.LedgerWarning, match="network filesystem"):
        Ledger(tmp_path / "l.sqlite").close()


def ledger_with_runs(path: Path, count: int = 3) -> list[int]:
    """A closed ledger of ``count`` ok runs whose records carry a findable marker."""
    with Ledger(path) as ledger:
        ids = [ledger.begin("s", "k", f"v{i}", "spec", "onnxruntime") for i in range(count)]
        for i in ids:
            scores = Scores.from_json({"snr_db": 30.0})
            ledger.finish(
                i,
                RunRecord(
                    i, "s", f"v{i}", Status.OK, scores=scores, compiled=CompileFacts(more={"marker": f"MARK{i:04d}"})
                ),
            )
    return ids


def flip(path: Path, old: bytes, new: bytes) -> None:
    """Replace bytes in place in the file, as a bad disk or a tamperer would."""
    data = path.read_bytes()
    assert data.count(old) == 1 and len(old) == len(new)
    path.write_bytes(data.replace(old, new))


@pytest.mark.parametrize("new", [b"MARK0002#", b'MARK\xff\xfe02"'], ids=["json", "utf8"])
def test_a_row_that_does_not_parse_is_corrupt_and_the_rest_are_listed(tmp_path: Path, new: bytes):
    path = tmp_path / "l.sqlite"
    ledger_with_runs(path)
    flip(path, b'MARK0002"', new)
    with Ledger(path, readonly=True) as ledger:
        assert ledger.integrity() == ["ok"]
        runs = [r.to_json() for r in ledger.records()]
    assert [(r["id"], r["status"]) for r in runs] == [(1, "ok"), (2, "corrupt"), (3, "ok")]
    assert "does not parse" in runs[1]["error"] or "UTF-8" in runs[1]["error"]
    assert runs[1]["variant"] == "v1" and set(runs[1]) == set(runs[0])
    json.dumps(runs)


def test_readers_open_read_only_and_never_migrate(tmp_path: Path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute(V1_SCHEMA)
    db.execute("INSERT INTO runs (sweep, sweep_key, variant, status) VALUES ('s', 'k', 'v', 'ok')")
    db.execute("PRAGMA user_version=1")
    db.commit()
    db.close()
    before = path.read_bytes()
    with pytest.warns(LedgerWarning, match="older than this loop's"), Ledger(path, readonly=True) as ledger:
        [run] = [r.to_json() for r in ledger.records()]
        with pytest.raises(LoopError, match="readonly"):
            ledger.heartbeat([1])
    assert run["status"] == "ok" and run["cache_hit"] is False and run["compiled_on"] is None
    assert path.read_bytes() == before


def test_a_newer_schema_is_refused_read_only_too(tmp_path: Path):
    path = tmp_path / "l.sqlite"
    ledger_with_runs(path, 1)
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(LoopError, match="newer than this loop knows"):
        Ledger(path, readonly=True)


def test_a_read_only_runs_folder_can_be_read(tmp_path: Path):
    from filesystems import read_only

    folder = tmp_path / "runs"
    folder.mkdir()
    ledger_with_runs(folder / "ledger.sqlite")
    assert sorted(p.name for p in folder.iterdir()) == ["ledger.sqlite"]  # no -wal/-shm once closed
    with read_only(folder), Ledger.of_runs(folder, readonly=True, existing=True) as ledger:
        assert [r.status for r in ledger.records()] == ["ok"] * 3
        with pytest.raises(LoopError):
            Ledger(folder / "ledger.sqlite")  # a writer cannot, and says so in one line


@pytest.mark.parametrize(
    "damage, words", [("header", "file is not a database"), ("page", "database disk image is malformed")]
)
def test_a_damaged_file_is_one_ledger_fault(tmp_path: Path, damage: str, words: str):
    from loop.store.ledger import LedgerFault

    path = tmp_path / "l.sqlite"
    ledger_with_runs(path)
    data = bytearray(path.read_bytes())
    if damage == "header":
        data[:16] = b"\xff" * 16
    else:
        page = 4096
        data[page : 2 * page] = b"\xa5" * page  # the runs table's page
    path.write_bytes(bytes(data))
    with pytest.raises(LedgerFault, match=words), Ledger(path, readonly=True) as ledger:
        ledger.records()


@pytest.mark.parametrize("suffix", ["", "-wal"])
def test_a_writer_never_writes_through_a_link_at_the_ledger(tmp_path: Path, suffix: str):
    elsewhere = tmp_path / "elsewhere.sqlite"
    ledger_with_runs(elsewhere, 1)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / f"ledger.sqlite{suffix}").symlink_to(elsewhere)
    before = elsewhere.read_bytes()
    with pytest.raises(LoopError, match="symbolic link"):
        Ledger(tmp_path / "runs" / "ledger.sqlite")
    assert elsewhere.read_bytes() == before


def test_a_huge_error_is_read_back_cut_by_sqlite_and_a_short_one_whole(tmp_path: Path):
    from loop.store.ledger import CUT_MARK, ERROR_CHARS

    ledger = Ledger(tmp_path / "l.sqlite")
    huge, short = ledger.begin("s", "key", "a", "spec", "onnxruntime"), ledger.begin("s", "key", "b", "spec", "x")
    ledger.finish(huge, RunRecord(huge, "s", "a", Status.FAILED, stage=Stage.OPTIMIZE, error="E" * 5_000_000))
    ledger.finish(short, RunRecord(short, "s", "b", Status.FAILED, stage=Stage.OPTIMIZE, error="short"))
    cut = ledger.record(huge).error
    assert cut == "E" * ERROR_CHARS + CUT_MARK and ledger.record(short).error == "short"
    assert [r.error for r in ledger.records()] == [cut, "short"]
    ledger.close()


def test_amend_changes_an_ok_runs_record_and_touches_nothing_else(tmp_path: Path):
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        ok = ledger.begin("s", "key", "ok", "spec", "onnxruntime")
        ruined = Judgement(quantization_ruined={"snr_db": 3.0, "try": ["a"]})
        ledger.finish(ok, RunRecord(ok, "s", "ok", Status.OK, judged=ruined))
        failed = ledger.begin("s", "key", "failed", "spec", "onnxruntime")
        ledger.finish(failed, RunRecord(failed, "s", "failed", Status.FAILED, "boom", "optimize"))
        (finished,) = ledger.query("SELECT finished FROM runs WHERE id=?", (ok,))[0]
        more = {"try": ["b"], "try_measured": True}
        assert ledger.amend(
            ok, lambda run: replace(run, judged=Judgement(None, None, {**ruined.quantization_ruined, **more}))
        )
        assert not ledger.amend(failed, lambda run: replace(run, notes=("never",)))  # only an ok run is amended
        assert ledger.record(ok).judged.quantization_ruined == {"snr_db": 3.0, "try": ["b"], "try_measured": True}
        assert ledger.query("SELECT finished FROM runs WHERE id=?", (ok,))[0][0] == finished
        assert ledger.record(failed).judged == Judgement() and ledger.record(failed).error == "boom"


def test_amend_keeps_what_this_loop_does_not_read(tmp_path: Path):
    """A row a newer loop wrote (a key of its own, a depth's extra figure) keeps them when this loop
    amends its judgement: only the parts the change moved are rewritten."""
    import json

    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        ok = ledger.begin("s", "key", "ok", "spec", "onnxruntime")
        ledger.finish(ok, RunRecord(ok, "s", "ok", Status.OK, judged=Judgement(quantization_ruined={"snr_db": 3.0})))
        (raw,) = ledger.query("SELECT record FROM runs WHERE id=?", (ok,))[0]
        newer = {**json.loads(raw), "newer_loop_key": {"kept": True}}
        with ledger.write() as db:
            db.execute("UPDATE runs SET record=? WHERE id=?", (json.dumps(newer), ok))
        assert ledger.amend(ok, lambda run: replace(run, judged=Judgement(quantization_ruined={"snr_db": 4.0})))
        (raw,) = ledger.query("SELECT record FROM runs WHERE id=?", (ok,))[0]
        assert json.loads(raw)["newer_loop_key"] == {"kept": True}
        assert ledger.record(ok).judged.quantization_ruined == {"snr_db": 4.0}

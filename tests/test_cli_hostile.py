"""Hostile names and files at the command line: what the terminal shows of them is escaped, a
bad link file is one line, and a hostile ledger row is one corrupt run, never a traceback."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner, Result
from onnx import helper, numpy_helper

from loop.cli import main
from loop.core.kinds import Status
from loop.core.record import Measurement, RunRecord
from loop.store.ledger import Ledger

# what a crafted name carries: clear the screen, retitle the terminal, return to the line's
# start, and a right-to-left override that shows "txt<RLO>exe" as "txtexe" reversed
HOSTILE = "\x1b[2J\x1b]0;TITLE\x07\rtxt\u202eexe"
RAW = ("\x1b", "\x07", "\r", "\u202e")


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def assert_escaped(text: str) -> None:
    assert not [c for c in RAW if c in text], repr(text)
    assert "\\x1b[2J" in text and "\\u202e" in text, text


def conv_named(name: str) -> onnx.ModelProto:
    """One quantizable Conv whose node and tensors carry ``name``."""
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), f"{name}.w")
    conv = helper.make_node("Conv", ["x", f"{name}.w"], [f"{name}.out"], name=name)
    graph = helper.make_graph(
        [conv],
        "hostile",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info(f"{name}.out", onnx.TensorProto.FLOAT, [1, 4, 6, 6])],
        [w],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_layers_shows_a_hostile_node_name_escaped(tmp_path: Path) -> None:
    onnx.save(conv_named(HOSTILE), str(tmp_path / "m.onnx"))
    result = invoke("layers", str(tmp_path / "m.onnx"))
    assert result.exit_code == 0, result.output
    assert_escaped(result.output)
    assert json.loads(invoke("layers", str(tmp_path / "m.onnx"), "--json").output)[0]["layer"] == HOSTILE


def ledger_of(runs: Path, sweep: str, variants: list[str]) -> None:
    """Finished runs of ``sweep``, one per variant name, each measured at 500 fps over 1 MB."""
    figures = Measurement.from_dict({"rate_fps": {"median": 500.0}, "bytes_in": 1 << 20, "bytes_out": 0, "depth": 1})
    with Ledger(runs / "ledger.sqlite") as ledger:
        for variant in variants:
            run = ledger.begin(sweep, "key", variant, "spec", "onnxruntime")
            ledger.finish(run, RunRecord(run, sweep, variant, Status.FAILED, error=HOSTILE, measure=figures))


def test_runs_and_audit_show_hostile_names_and_errors_escaped(tmp_path: Path) -> None:
    ledger_of(tmp_path, HOSTILE, [HOSTILE, "plain"])
    for command in (["runs"], ["audit"]):
        result = invoke(*command, "--runs", str(tmp_path))
        assert result.exit_code == 0, result.output
        assert_escaped(result.output)


def test_an_error_line_quoting_a_hostile_name_is_escaped(tmp_path: Path) -> None:
    ledger_of(tmp_path, HOSTILE, ["v"])
    result = invoke("runs", "--runs", str(tmp_path), "--sweep", "other")
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and "no runs of sweep 'other'" in lines[0]
    assert_escaped(result.output)


GOOD_LINK = {"name": "mine", "bandwidth_mb_s": 300.0, "per_transfer_ms": 0.5, "round_trip_ms": 0.9}


@pytest.mark.parametrize(
    "field, value",
    [("bandwidth_mb_s", 0), ("bandwidth_mb_s", "300"), ("per_transfer_ms", -40.0), ("round_trip_ms", float("nan"))],
)
def test_link_predict_with_a_bad_link_file_is_one_line_naming_it(tmp_path: Path, field: str, value: object) -> None:
    ledger_of(tmp_path, "ladder", ["v"])
    (tmp_path / "links").mkdir()
    link = tmp_path / "links" / "mine.json"
    link.write_text(json.dumps({**GOOD_LINK, field: value, "source": "hand", "residuals_pct": {}}))
    result = invoke("link", "predict", "1", "--runs", str(tmp_path), "--link", "mine")
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith(f"loop: {link}: {field}: not a link model"), lines[0]


def test_link_predict_with_a_sound_link_file_predicts(tmp_path: Path) -> None:
    ledger_of(tmp_path, "ladder", ["v"])
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "mine.json").write_text(json.dumps({**GOOD_LINK, "source": "hand", "residuals_pct": {}}))
    result = invoke("link", "predict", "1", "--runs", str(tmp_path), "--link", "mine")
    assert result.exit_code == 0 and result.output.startswith("run 1 on mine: "), result.output


READERS = [
    ["runs"],
    ["runs", "--json"],
    ["audit"],
    ["audit", "--json"],
    ["compare", "2", "1", "--from-ledger"],
    ["report", "-o", "OUT"],
    ["doctor"],
    ["doctor", "--repair"],
]


@pytest.mark.parametrize(
    "column, value",
    [("record", '{"x": ' + "[" * 50_000 + "]" * 50_000 + "}"), ("flags", "[" * 3_000 + "]" * 3_000), ("sweep", b"s")],
    ids=["record-50000-deep", "flags-3000-deep", "sweep-blob"],
)
def test_every_reader_takes_a_hostile_row_as_one_corrupt_run(tmp_path: Path, column: str, value: object) -> None:
    pytest.importorskip("matplotlib")  # loop report's
    ledger_of(tmp_path, "s", ["a", "b", "c"])
    db = sqlite3.connect(tmp_path / "ledger.sqlite")
    db.execute(f"UPDATE runs SET {column}=? WHERE id=2", (value,))
    db.commit()
    db.close()
    for command in READERS:
        result = invoke(*[str(tmp_path / "r.html") if a == "OUT" else a for a in command], "--runs", str(tmp_path))
        assert result.exception is None or isinstance(result.exception, SystemExit), (command, result.exception)
        assert result.exit_code in (0, 1, 2) and "Traceback" not in result.output, (command, result.output)
        if command == ["runs"]:
            assert f"corrupt: its {column}" in result.output
        if command == ["doctor"]:
            assert result.output.startswith(f"run 2: corrupt: its {column}") and result.exit_code == 1
    assert invoke("doctor", "--runs", str(tmp_path)).output.strip() == "0 problem(s)"

"""A race file read back: what a study's rounds write reads as they wrote it; anything else is
one line naming the file."""

import json
from pathlib import Path

import pytest

from loop.core.errors import LoopError
from loop.store.races import read_race

WRITTEN = {  # as loop.api.race_runs writes it: dropped is the round a side left, or None
    "reference_run": 1,
    "runs": {"2": "aa", "3": "bb", "4": "aa"},
    "candidates": [
        {"artifact_sha": "aa", "ratio": 1.01, "low": 0.99, "high": 1.03, "dropped": None},
        {"artifact_sha": "bb", "ratio": 0.8, "low": 0.78, "high": 0.82, "dropped": 4},
    ],
    "rounds": 9,
    "wall_s": 3.2,
    "flags": [],
    "fps": [[1.0]],
    "control": [1.0, 1.0, 1.0],
    "floor_pct": 0.0,
}


def test_what_a_race_writes_reads_back_by_run(tmp_path: Path) -> None:
    path = tmp_path / "s-g0.race.json"
    path.write_text(json.dumps(WRITTEN))
    found = read_race(path)
    assert sorted(found) == [2, 3, 4] and found[4]["ratio"] == 1.01 and found[3]["dropped"] == 4
    assert found[2]["rounds"] == 9 and found[2]["floor_pct"] == 0.0
    assert read_race(tmp_path / "none.race.json") == {}


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"floor_pct": -1.0}, "out of range"),
        ({"floor_pct": float("nan")}, "out of range"),
        ({"candidates": [{"artifact_sha": "aa", "ratio": 1, "low": 1, "high": 1, "dropped": True}]}, "out of range"),
        ({"candidates": [{"artifact_sha": "aa", "ratio": 0, "low": 1, "high": 1}]}, "out of range"),
        ({"runs": [1, 2]}, "not a race"),
    ],
)
def test_anything_else_is_one_line_naming_the_file(tmp_path: Path, change: dict, said: str) -> None:
    path = tmp_path / "s-g0.race.json"
    path.write_text(json.dumps({**WRITTEN, **change}))
    with pytest.raises(LoopError, match=said) as caught:
        read_race(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_a_deep_file_is_unreadable_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "s-g0.race.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(LoopError, match="unreadable"):
        read_race(path)

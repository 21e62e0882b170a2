"""A generation's sweep file: checked in memory, written once, and run as the value checked, which
must be what parsing the written file gives (resume keys on its hash)."""

from pathlib import Path

import numpy as np
import pytest

from loop.author.sweepfile import parse
from loop.core.errors import LoopError
from loop.store.arrays import array_path
from loop.store.generations import prepare, write

SETTINGS = {
    "seed": 3,
    "calibration": {"count": 4},
    "inputs": {"count": 2},
    "compile": {"per_channel": True, "bias_correction": False},
    "measure": {"warmup": 1, "frames": 3, "min_duration_s": 0.0},
}


def _candidates(n: int) -> list[dict]:
    rng = np.random.default_rng(0)
    return [
        {
            "name": f"c{i}",
            "perturb": [
                {"op": "scale_grid", "layer": "conv1", "of": "weights", "factors": np.exp(rng.normal(0, 0.01, 8))},
                {"op": "scale_weights", "layer": "conv2", "factor": 1.0 + 1e-5 * i},
            ],
        }
        for i in range(n)
    ]


def test_the_checked_spec_is_what_the_written_file_parses_to(tmp_path: Path, recipe: Path):
    runs = tmp_path / "runs"
    prepared = prepare(runs, "s-check", recipe, "onnxruntime", _candidates(3), SETTINGS)
    assert not runs.exists()  # a check writes nothing
    spec = write(prepared, "s-g7")
    assert spec.path == runs.resolve() / "generations" / "s-g7.yaml" and spec.name == "s-g7"
    assert spec == parse(spec.path, generated=True)  # the sha included; both know no lines
    assert parse(spec.path).sha == spec.sha
    for sha in prepared.held:
        assert array_path(runs, sha).is_file()


def test_a_refused_generation_names_its_candidate_and_field_and_writes_nothing(tmp_path: Path, recipe: Path):
    """Named as the caller wrote it (the candidate, the field), never by a line of the file loop
    wrote in a scratch folder to find it."""
    runs = tmp_path / "runs"
    bad = _candidates(2)
    bad[1]["perturb"][1]["factor"] = "twice"
    with pytest.raises(LoopError) as caught:
        prepare(runs, "s-check", recipe, "onnxruntime", bad, SETTINGS)
    assert str(caught.value) == "candidate c1: perturb[1].factor: should be a valid number, got 'twice'"
    assert caught.value.file is None and caught.value.line is None
    assert not runs.exists()


def test_an_unknown_layer_is_refused_in_memory(tmp_path: Path, recipe: Path):
    asked = [{"name": "c0", "perturb": [{"op": "scale_grid", "layer": "nope", "of": "weights", "factor": 1.1}]}]
    with pytest.raises(LoopError, match="nope"):
        prepare(tmp_path / "runs", "s-check", recipe, "onnxruntime", asked, SETTINGS)

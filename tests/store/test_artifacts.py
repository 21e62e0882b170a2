"""Artifacts read back from runs/ are checked against the hash they were stored under."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from loop.core.vocab import CompileResult
from loop.store.artifacts import load_artifact, materialize, spill
from loop.store.files import StoreFault


def _spilled(tmp_path: Path, artifact, **extras: bytes) -> CompileResult:
    return spill(tmp_path, CompileResult(ok=True, artifact=replace(artifact, extras=extras)))


def test_spill_then_materialize_round_trips(tmp_path: Path, artifact) -> None:
    result = _spilled(tmp_path, artifact, har=b"har bytes")
    assert result.artifact.data == b"" and Path(result.artifact.path).name == f"{artifact.sha[:32]}.onnx"
    back = materialize(result.artifact)
    assert back.data == artifact.data and back.extras == {"har": b"har bytes"}


@pytest.mark.parametrize("which", ["artifact", "extra"])
def test_a_swapped_file_is_never_used_as_the_variant(tmp_path: Path, artifact, which: str) -> None:
    result = _spilled(tmp_path, artifact, har=b"har bytes")
    path = Path(result.artifact.path)
    [har] = path.parent.glob(f"{path.stem}.*.har")
    (path if which == "artifact" else har).write_bytes(b"another variant's bytes")
    with pytest.raises(StoreFault, match="does not match its hash"):
        materialize(result.artifact)


def test_a_run_artifact_is_loaded_only_if_it_matches(tmp_path: Path, artifact) -> None:
    path = Path(_spilled(tmp_path, artifact).artifact.path)
    assert load_artifact(path, artifact.sha).data == artifact.data
    assert load_artifact(path, path.stem).data == artifact.data  # the name's 32 digits suffice
    other = tmp_path / "other.onnx"
    other.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(other)
    with pytest.raises(StoreFault, match="cannot read"):
        load_artifact(path, artifact.sha)  # a link where an artifact was
    assert load_artifact(path).data == artifact.data  # a user's own path may be a link (loop check)

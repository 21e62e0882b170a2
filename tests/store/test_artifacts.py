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


def _hef(tmp_path: Path) -> CompileResult:
    """A stored artifact its device opens by path: HEF-suffixed bytes (their content is not read)."""
    from loop.core.hashing import bytes_sha
    from loop.core.vocab import Artifact

    data = b"HEF-like bytes " * 1000
    hef = Artifact("hailo", data, ".hef", (), ())
    assert hef.sha == bytes_sha(data)
    return _spilled(tmp_path / "runs", hef, har=b"har bytes")


def test_a_hef_reaches_its_device_as_a_checked_link_never_read_whole(tmp_path: Path) -> None:
    """A stored HEF is linked into the device's folder and checked there a chunk at a time; the
    file checked is the one the device reads, whatever is swapped in at the stored path after."""
    import os

    from loop.store.artifacts import checked_file

    stored = _hef(tmp_path / "a").artifact
    folder = tmp_path / "device"
    folder.mkdir()
    ready = checked_file(stored, folder)
    assert ready.data == b"" and Path(ready.path).parent == folder
    assert os.stat(ready.path).st_ino == os.stat(stored.path).st_ino  # a link, not a copy
    assert ready.extras == {"har": b"har bytes"}
    swapped = Path(stored.path).with_suffix(".new")
    swapped.write_bytes(b"another variant's bytes")
    swapped.replace(stored.path)
    assert Path(ready.path).read_bytes() == b"HEF-like bytes " * 1000
    with pytest.raises(StoreFault, match="does not match its hash"):
        checked_file(stored, tmp_path / "a")  # the swapped file, linked elsewhere: refused
    link = tmp_path / "b" / "link.hef"
    link.parent.mkdir()
    link.symlink_to(ready.path)
    with pytest.raises(StoreFault, match="cannot read"):
        checked_file(replace(stored, path=str(link)), tmp_path / "b")  # never through a link
    fifo = tmp_path / "c" / "fifo.hef"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    with pytest.raises(StoreFault, match="cannot read"):
        checked_file(replace(stored, path=str(fifo)), tmp_path / "c")  # refused at once, never waited on


def test_a_device_job_carries_a_hef_by_path_and_an_onnx_artifact_by_value(tmp_path: Path, artifact) -> None:
    from loop.flow.device_child import DeviceJob
    from loop.flow.runner import with_bytes

    hef = _hef(tmp_path / "h").artifact
    onnx_artifact = _spilled(tmp_path / "o", artifact).artifact
    folder = tmp_path / "device"
    folder.mkdir()
    for stored, by_path in ((hef, True), (onnx_artifact, False)):
        job = DeviceJob("onnxruntime", stored, {}, None, False)  # type: ignore[arg-type]
        ready = with_bytes(job, folder).artifact
        assert (ready.data == b"") is by_path and (Path(ready.path).parent == folder) is by_path
    assert with_bytes(DeviceJob("x", hef, {}, None, False)).artifact.data  # type: ignore[arg-type]  # no folder: bytes

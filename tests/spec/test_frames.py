"""Frame sets hash by content: bytes, dtype, shape, and for several inputs their names."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from loop.spec.frames import frames_sha


def test_input_names_cannot_run_into_each_other() -> None:
    """The old framing joined ``name:hash`` pairs with ``|``: an input named ``a:<hash>|b``
    hashed like two inputs ``a`` and ``b``."""
    x, y = np.zeros((1, 3), np.float32), np.ones((1, 3), np.float32)
    two = frames_sha({"a": x, "b": y})
    assert two != frames_sha({f"a:{frames_sha(x)}|b": y})
    assert two != frames_sha({"a": y, "b": x}) and two == frames_sha({"b": y, "a": x})
    assert frames_sha(x) != frames_sha(x.reshape(3, 1)) != frames_sha(x.astype(np.float64))


def test_a_frame_file_is_used_whole_unless_a_count_is_given(tmp_path):
    """24 stored frames score 24 (a seeded subset only when ``count`` asks, and a note says so)."""
    from loop.spec.author import make_frames, used_note
    from loop.spec.sweepfile import DataSpec

    np.save(tmp_path / "f.npy", np.random.default_rng(0).random((24, 3, 4, 4), dtype=np.float32))
    whole = DataSpec(count=None, path="f.npy")
    assert len(make_frames(whole, (1, 3, 4, 4), tmp_path)) == 24
    assert used_note(whole, (1, 3, 4, 4), tmp_path, "inputs.path", {}) is None
    some = DataSpec(count=8, seed=3, path="f.npy")
    assert len(make_frames(some, (1, 3, 4, 4), tmp_path)) == 8
    assert used_note(some, (1, 3, 4, 4), tmp_path, "inputs.path", {}) == (
        "inputs: 8 of the 24 frames in f.npy used (inputs.count: 8)"
    )


def test_a_sweep_file_without_count_takes_every_stored_frame(tmp_path):
    from loop.spec.sweepfile import parse

    np.save(tmp_path / "f.npy", np.zeros((24, 3, 32, 32), np.float32))
    (tmp_path / "s.yaml").write_text(
        "sweep: s\nbase: %s\ncalibration: {path: f.npy}\ninputs: {path: f.npy}\nvariants:\n  - name: base\n"
        % (Path(__file__).parents[2] / "graphs" / "two_conv.yaml")
    )
    spec = parse(tmp_path / "s.yaml")
    assert spec.calibration.count is None and spec.inputs.count is None

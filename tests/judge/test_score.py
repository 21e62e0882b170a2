"""The outputs' hash covers what the device returned: bytes, dtype and shape of each output."""

from __future__ import annotations

import numpy as np

from loop.judge.score import builtin, output_sha


def test_same_bytes_in_another_dtype_or_shape_is_another_output() -> None:
    q = np.arange(8, dtype=np.uint8)
    assert len({output_sha([[q]]), output_sha([[q.view(np.float32)]]), output_sha([[q.reshape(2, 4)]])}) == 3
    assert output_sha([[q[:4], q[4:]]]) != output_sha([[q[:2], q[2:]]])
    assert output_sha([[q], [q]]) == output_sha([[q.copy()], [q.copy()]])


def test_a_constant_output_is_said_to_measure_nothing() -> None:
    """A dead branch's zeros quantize exactly: SNR inf, which a reader would take as perfect."""
    frames = [[np.zeros((1, 4), np.float32)], [np.zeros((1, 4), np.float32)]]
    scores = builtin(frames, frames, frames, True, None)
    assert scores["snr_db"] == float("inf")
    assert scores["warnings"] == [
        "output 0 of 1 is constant over the scoring frames (every value 0 in all 2): SNR measures nothing"
    ]


def test_a_constant_output_beside_a_live_one_is_named_and_exact_outputs_are_said_so() -> None:
    rng = np.random.default_rng(0)
    live = [rng.random((1, 4)).astype(np.float32) for _ in range(2)]
    reference = [[x, np.full((1, 2), 3.0, np.float32)] for x in live]
    noisy = [[x + 0.01, c] for x, c in reference]
    said = builtin(noisy, noisy, reference, True, None, ("probs", "anchors"))["warnings"]
    assert said == [
        "output 1 ('anchors') of 2 is constant over the scoring frames (every value 3 in all 2): "
        "SNR measures nothing on it"
    ]
    alone = [[x] for x in live]
    exact = builtin(alone, alone, alone, True, None)
    assert exact["snr_db"] == float("inf") and "SNR is inf, not a measure" in exact["warnings"][0]
    assert "warnings" not in builtin([[x + 0.01] for x in live], alone, alone, True, None)

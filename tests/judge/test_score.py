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


def test_top1_agreement_is_read_on_classifier_like_outputs_only() -> None:
    """A vector of scores per frame ([C] or [1, C]) is a classifier's: the share of frames whose winner
    is the float model's. A feature map is not read."""
    from loop.judge.score import top1_agreement

    ref = [[np.array([[0.1, 0.9, 0.0]]), np.ones((1, 2, 4, 4))], [np.array([[0.8, 0.1, 0.1]]), np.ones((1, 2, 4, 4))]]
    kept = [
        [np.array([[0.2, 0.7, 0.1]]), np.zeros((1, 2, 4, 4))],
        [np.array([[0.5, 0.4, 0.1]]), np.zeros((1, 2, 4, 4))],
    ]
    flipped = [[np.array([[0.9, 0.1, 0.0]]), np.zeros((1, 2, 4, 4))], [kept[1][0], np.zeros((1, 2, 4, 4))]]
    assert top1_agreement(kept, ref, ["probs", "map"]) == {"probs": 1.0}
    assert top1_agreement(flipped, ref, ["probs", "map"]) == {"probs": 0.5}

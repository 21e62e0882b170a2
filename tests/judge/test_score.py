"""The outputs' hash covers what the device returned: bytes, dtype and shape of each output."""

from __future__ import annotations

import numpy as np

from loop.judge.score import builtin, flat, output_sha, snr_db


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


def _noisy(frames: int, seed: int, noise: float = 0.1) -> tuple[list, list]:
    """Frames of differing difficulty: each frame's error is its own share of its signal."""
    rng = np.random.default_rng(seed)
    ref = [[rng.standard_normal(64)] for _ in range(frames)]
    hard = rng.uniform(0.3, 3.0, frames)
    return ref, [[r[0] + rng.standard_normal(64) * noise * h] for r, h in zip(ref, hard, strict=True)]


def test_the_snr_carries_a_bootstrap_interval_over_frames() -> None:
    ref, out = _noisy(8, 0)
    scores = builtin(out, out, ref, True, None)
    low, high = scores["snr_db_ci95"]
    assert low < scores["snr_db"] < high
    assert len(scores["frame_energy"]["signal"]) == len(scores["frame_energy"]["noise"]) == 8
    assert builtin(out, out, ref, True, None)["snr_db_ci95"] == [low, high]  # seeded: the same every time
    wide = high - low
    ref, out = _noisy(128, 1)
    low, high = builtin(out, out, ref, True, None)["snr_db_ci95"]
    assert (high - low) < wide / 2  # 16 times the frames: about a quarter of the width
    assert "snr_db_ci95" not in builtin(out[:1], out[:1], ref[:1], True, None)  # one frame: no interval


def test_a_difference_on_the_same_frames_is_resolved_paired() -> None:
    """The same frames scored twice, the second with its error 5% larger in every frame: each
    SNR's own interval spans several dB, the paired one excludes zero."""
    from loop.judge.score import energies, frames_to_resolve, paired_snr, snr_interval

    ref, out = _noisy(8, 2)
    worse = [[r[0] + (o[0] - r[0]) * 1.05] for r, o in zip(ref, out, strict=True)]
    a, b = energies(ref, out), energies(ref, worse)
    diff, (low, high) = paired_snr(a, b)
    assert abs(diff - 20 * np.log10(1.05)) < 1e-9 and 0 < low <= high
    own = snr_interval(a)
    assert own[0] < own[1] - 1.0 and own[0] < snr_db(flat(ref), flat(worse)) < own[1]  # alone: inside the noise
    assert frames_to_resolve(diff, (low, high), 8) is None  # already resolved
    assert frames_to_resolve(0.2, (-0.5, 0.5), 8) == 50  # half width 0.5 at 8 frames: 0.2 needs (0.5/0.2)^2 x 8


def test_a_user_scorer_per_frame_gets_an_interval_and_a_number_says_it_has_none() -> None:
    from loop.judge.score import user_scores

    found = user_scores({"acc": [1, 0, 1, 1], "f1": 0.5, "label": "x"}, 4)
    assert found["acc"] == 0.75 and found["acc_frames"] == [1.0, 0.0, 1.0, 1.0] and len(found["acc_ci95"]) == 2
    assert found["f1"] == 0.5 and "f1_ci95" not in found and found["interval_note"].startswith("no interval for f1")

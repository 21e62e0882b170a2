"""The guard's rule: bias correction is kept only where every held-out fold gains and the mean
gain stands clear of the folds' spread; a near tie is not a gain (issue 42)."""

from __future__ import annotations

import pytest

from loop.compilers.bias.guard import Estimate


def _estimate(shares: list[float]) -> Estimate:
    return Estimate(tuple(100.0 for _ in shares), tuple(100.0 * (1 - s) for s in shares))


@pytest.mark.parametrize(
    ("shares", "keeps"),
    [
        ([0.30, 0.25, 0.35, 0.28], True),  # a real gain, every fold
        ([0.02, 0.01, 0.03, 0.02], True),  # small, but every fold agrees
        ([0.40, 0.30, -0.01, 0.35], False),  # one fold made worse: not kept on the others' strength
        ([-0.02, -0.01, -0.03, -0.02], False),
        ([0.0, 0.0, 0.0, 0.0], False),
    ],
)
def test_keeps(shares, keeps):
    assert _estimate(shares).keeps() is keeps


def test_the_gain_and_shares_read_the_folds():
    e = Estimate((10.0, 20.0), (5.0, 25.0))
    assert e.gain == 0.0 and e.relative == (0.5, -0.25) and not e.keeps()

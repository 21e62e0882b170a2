"""The outputs' hash covers what the device returned: bytes, dtype and shape of each output."""

from __future__ import annotations

import numpy as np

from loop.judge.score import output_sha


def test_same_bytes_in_another_dtype_or_shape_is_another_output() -> None:
    q = np.arange(8, dtype=np.uint8)
    assert len({output_sha([[q]]), output_sha([[q.view(np.float32)]]), output_sha([[q.reshape(2, 4)]])}) == 3
    assert output_sha([[q[:4], q[4:]]]) != output_sha([[q[:2], q[2:]]])
    assert output_sha([[q], [q]]) == output_sha([[q.copy()], [q.copy()]])

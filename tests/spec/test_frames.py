"""Frame sets hash by content: bytes, dtype, shape, and for several inputs their names."""

from __future__ import annotations

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

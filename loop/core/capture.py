"""Capturing what native tools write to stderr, so a failure can carry its tail."""

from __future__ import annotations

import io
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

STDERR_TAIL = 4000


@contextmanager
def captured_stderr() -> Iterator[io.StringIO]:
    """Capture both Python's and the C runtime's stderr (native tools write to fd 2)."""
    buf = io.StringIO()
    sys.stderr.flush()
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        old, sys.stderr = sys.stderr, io.TextIOWrapper(os.fdopen(os.dup(2), "wb"), write_through=True)
        try:
            yield buf
        finally:
            sys.stderr.flush()
            sys.stderr.close()
            sys.stderr = old
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            buf.write(tmp.read().decode("utf-8", "replace"))

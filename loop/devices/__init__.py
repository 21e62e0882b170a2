"""Stage 6's other side: open an artifact, run frames on it, report health.

Owns the ``Device`` interface (``base``) and its backends: ONNX Runtime, the Hailo emulator and
HailoRT silicon (through ``loop.hailort``), plus each device's own vendor benchmark, the
shipped links (``links``) a simulated link may stand for, and ``test_double`` (a device that
fails on purpose, for the runners' tests). May import ``core`` and ``hailort``; never a
compiler, nor ``measure``, which drives devices.
"""

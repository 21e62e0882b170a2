"""Stages 6 and its figures: the three quantities and what spoils them.

Owns the measurement protocol (time to first output, steady-state rate, bytes per inference),
host load and the host/device locks, ladders, the controlled-input check, interleaved compare
and its statistics, the links fitted and kept under ``runs/links``, and what a model's weights
weigh against a device and cost to load (``fit``). Measures through the
``devices`` interface; may import ``core``, ``devices``, ``judge``, ``spec`` and ``store``, never a
compiler.
"""

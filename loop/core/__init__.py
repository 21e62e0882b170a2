"""The shared vocabulary and the plumbing every role may use.

Owns the plain values that cross between roles (``vocab``: artifacts and their layouts, layer
prints, compile options and results, frames; ``record``: the run, from the sweep through the
ledger to every reader; ``kinds``: its status, stage, verdict and flags as enums), the
types two rooms share (``footprint``: what a perturbation may change, written by ``spec`` and read
by ``judge``; ``links``: the link model, simulated by ``devices`` and fitted by ``measure``;
``options``: the base of a backend's own compile keys, declared by ``compilers`` for ``spec``), errors,
JSON read with its nesting bounded (``jsondepth``), hashing, the one way an ONNX Runtime
session is made, stderr capture, process liveness and scratch folders, and the registry that
names compilers and devices by string. Imports no other part of loop (the registry's class types
only under ``TYPE_CHECKING``).
"""

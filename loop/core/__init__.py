"""The shared vocabulary and the plumbing every role may use.

Owns the plain values that cross between roles (``vocab``: artifacts and their layouts, layer
prints, compile options and results, frames; ``record``: the run as the ledger reads it), errors,
hashing, the one way an ONNX Runtime session is made, stderr capture, process liveness and scratch folders, and the
registry that names compilers and devices by string. Imports no other part of loop (the
registry's class types only under ``TYPE_CHECKING``).
"""

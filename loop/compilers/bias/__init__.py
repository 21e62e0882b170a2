"""Bias correction, in one room: ``correction`` moves each layer's bias by minus its mean error,
``rules`` keeps a layer's move only where frames it was not estimated from agree (and places it on
the bias's grid, widening an Add constant's grid rather than pinning a value at its end), ``guard``
keeps the whole pass only if, done without each of four folds of the frames, it lowers the
model's own output error on every fold, clear of the folds' spread, and ``zeros`` gives a layer
without a bias one to move.

With the guard the pass costs about four plain ones; a sweep pays it once, on its reference, and
every variant judged against that reference follows the reference's decision (``given``), so a
near tie cannot go one way on the reference and the other on a variant (issue 42).
"""

"""Stages 4, 5 and 7: what changed, whether it was asked for, and how good it is.

Owns the layer structure of a model (``structure``) and what its weights are (``weights``),
fingerprints, the audit against the reference (footprints, verdicts) and scoring. Pure functions
of models, prints and outputs: imports ``core`` only (footprints are ``core.footprint``, so
``spec`` may import ``judge``).
"""

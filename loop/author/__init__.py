"""Stage 1: what the user wrote, and the ONNX it authors.

Owns the sweep file (``sweepfile``: parse and validate against ``schema``, limits in
``yamlio``), recipes (``graphs``), perturbations (``perturb``), controlled frames (``frames``),
the clean-up of exported models (``normalize``), what of a base ONNX Runtime can run
(``runnable``) and authoring a variant (``author``). May import ``core`` and
``judge.structure`` (to find layers); never a compiler, device, store or the flow.
"""

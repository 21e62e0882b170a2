"""``loop fit``: a model file weighed against a device, read from the file alone.

An ONNX model is read without its external data (``load_external_data=False``) and weighed from
its tensors' dims (:mod:`loop.judge.weights`), so a 24 GB model is weighed in the time it takes to
parse its graph; a HEF by its size (:func:`loop.hailort.hef.inspect_hef`). What a device holds is
:data:`loop.hailort.hef.DEVICE_BYTES`; the link is a shipped, inline or fitted one
(:func:`loop.measure.link.load`); the arithmetic is :mod:`loop.measure.fit`.
"""

from __future__ import annotations

from pathlib import Path

from loop.core.modelfile import read_graph
from loop.hailort.hef import device_memory, inspect_hef
from loop.judge.weights import Weights, weigh
from loop.measure.fit import FitReport, Memory, compiled, weighed, with_run
from loop.measure.link import load
from loop.store.ledger import record_in

HEF_SUFFIX = ".hef"


def fit(model: Path, device: str, link: str, runs: Path, run: int | None = None) -> FitReport:
    """``model`` (an ONNX model, or a HEF by its suffix) against ``device`` and over ``link``,
    with run ``run``'s recorded weights beside it when one is given (``runs``'s ledger)."""
    memory = Memory(device, *device_memory(device))
    chosen = load(runs, link)
    if model.suffix.lower() == HEF_SUFFIX:
        info = inspect_hef(model, device)
        ok = info.fit is None or info.fit.architecture_ok
        refused = None if ok else f"{device} refuses {info.hw_arch} HEFs (HAILO_HEF_NOT_COMPATIBLE_WITH_DEVICE)"
        report = compiled(str(model), info.size, refused, memory, chosen)
    else:
        report = weighed(str(model), weigh_file(model), memory, chosen)
    return report if run is None else with_run(report, record_in(runs, run))


def weigh_file(path: Path) -> Weights:
    """The weights of the ONNX model at ``path``, its external data never opened, or of the graph a
    recipe (.yaml, as ``loop layers`` and a sweep's ``base:`` take) builds; a file that is neither
    raises :class:`LoopError` naming it."""
    if path.suffix.lower() in (".yaml", ".yml"):
        from loop.author.graphs import load_base

        return weigh(load_base(path))
    return weigh(read_graph(path))

"""What a run's weights cost on a link: one crossing of the HEF when the model loads, never one
per inference.

HailoRT on Hailo-10H sends the whole HEF in one call and the device's server allocates one DMA
buffer of its size (``vdevice_hrpc_client.cpp`` ``create_infer_model``; ``hailort_server.cpp``):
a HEF that fits stays, one that does not fails when the model is created, and nothing streams
(docs/hailo.md). The compile records the verdict (``info.hef_residency``, and
``info.weights.resident`` after it) and refuses a HEF that does not fit before any device work,
so a finished run's weights are resident or of unknown fit; what they cost is the load, once.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from loop.core.links import LinkModel
from loop.core.record import RunRecord


@dataclass(frozen=True)
class WeightLoad:
    weight_bytes: int  # at the compiled precision
    hef_bytes: int | None  # what crosses the link: the whole file (None: not recorded)
    device_bytes: int | None  # what the device can allocate for it (None: no figure for the chip)
    resident: str  # yes, no (refused at compile), unknown (no figure)
    load_ms: float | None  # the one crossing, when the model is created: a cold start, not per inference

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def weight_load(model: LinkModel, run: RunRecord) -> WeightLoad | None:
    """The run's weights and HEF against its device, and the one crossing of the HEF on
    ``model``; None when the compile recorded no weights (a backend that does not)."""
    weights, fit = run.compiled.weights or {}, run.compiled.hef_residency or {}
    if run.weight_bytes is None:
        return None
    hef = fit.get("hef_bytes")
    resident = str(fit.get("resident") or weights.get("resident") or "unknown")
    device = fit.get("device_bytes", weights.get("device_memory_bytes"))
    load_ms = None if hef is None else model.busy_s(hef) * 1e3
    return WeightLoad(run.weight_bytes, hef, device, resident, load_ms)


def describe(load: WeightLoad, link: str) -> str:
    """One line for a person."""
    head = f"weights {load.weight_bytes / 1e9:.3f} GB at the compiled precision"
    if load.hef_bytes is None:
        return f"{head}; no HEF size recorded: resident {load.resident}"
    memory = "an unknown allocation" if load.device_bytes is None else f"{load.device_bytes:,} B"
    head = f"{head}, HEF {load.hef_bytes:,} B against {memory}: resident {load.resident}"
    if load.load_ms is None:
        return head
    once = f"{load.load_ms:,.1f} ms when the model is created (not per inference)"
    return f"{head}; loading it crosses {link} once, {once}"

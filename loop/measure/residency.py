"""What weights that do not stay on the device cost per inference, on a link.

The compile records a run's weight bytes at the compiled precision against the device's memory
(``info.weights``: ``bytes``, ``device_memory_bytes``, ``resident``). Weights that fit cross the
link once, when the model loads. Weights that do not fit cannot stay: every inference streams
them, and a pass over more weights than the memory holds evicts what the next pass needs first,
so the whole of them is counted per inference (a bound, not a measurement).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from loop.core.links import LinkModel
from loop.core.record import RunRecord


@dataclass(frozen=True)
class WeightStream:
    weight_bytes: int
    device_memory_bytes: int | None
    resident: str  # yes, no, unknown (no memory figure for the chip)
    stream_ms: float | None  # per inference, when not resident
    rate_bound_fps: float | None  # no faster than one pass of the weights over the link

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def weight_stream(model: LinkModel, run: RunRecord) -> WeightStream | None:
    """The run's weights against its device's memory, and their per-inference cost on ``model``
    when they do not fit; None when the compile recorded no weights (a backend that does not)."""
    weights = run.info.get("weights")
    if not isinstance(weights, dict) or not isinstance(weights.get("bytes"), int):
        return None
    nbytes, resident = int(weights["bytes"]), str(weights.get("resident", "unknown"))
    if resident != "no":
        return WeightStream(nbytes, weights.get("device_memory_bytes"), resident, None, None)
    busy = model.busy_s(nbytes)
    return WeightStream(nbytes, weights.get("device_memory_bytes"), resident, busy * 1e3, 1 / busy)


def describe(stream: WeightStream, link: str) -> str:
    """One line for a person."""
    memory = "an unknown memory" if stream.device_memory_bytes is None else f"{stream.device_memory_bytes / 1e9:.2f} GB"
    head = f"weights {stream.weight_bytes / 1e9:.3f} GB at the compiled precision against {memory}"
    if stream.stream_ms is None:
        return f"{head}: resident {stream.resident}"
    return (
        f"{head}: not resident; streaming them costs {stream.stream_ms:,.1f} ms per inference on {link} "
        f"(at most {stream.rate_bound_fps:.4g} fps, which the rate above leaves out)"
    )

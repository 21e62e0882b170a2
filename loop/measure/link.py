"""The link as a model: fitted from a ladder, used to predict a run's rate on another link.

A link is three numbers, each with a plain meaning:

* ``bandwidth_mb_s``: bytes move at this rate while the link is busy;
* ``per_transfer_ms``: a fixed cost each inference adds to the link's busy time;
* ``round_trip_ms``: latency a lone frame pays on top (queueing frames hides it).

So one inference keeps the link busy for ``L = bytes / bandwidth + per_transfer`` and a lone
frame takes ``L + round_trip + C`` where ``C`` is the compute time. At queue depth ``d`` the
pipelined rate is the slower stage's, ``1 / max(L, C)``, capped by Little's law at
``d / (L + round_trip + C)``: that cap is where a depth ladder's knee comes from. Compute is a
serial stage (one frame at a time, as an accelerator runs a network).

``fit`` takes a frame ladder (compute negligible, so ``1 / fps = L`` is a straight line in
bytes) and, where rungs were also measured at depth 1, the round trip: seconds per frame at
depth 1 less those at the best depth.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from loop.core.errors import LoopError
from loop.core.record import RunRecord

LINK = "link"
COMPUTE = "compute"


@dataclass(frozen=True)
class Rung:
    """One frame size of a ladder: bytes per inference and seconds per frame at ``depth``;
    ``lone_s`` is seconds per frame at depth 1 where the rung was measured there."""

    name: str
    bytes: int
    per_frame_s: float
    depth: int
    lone_s: float | None = None
    compute_s: float = 0.0  # a lone frame's compute, where the device timed it (else taken as nil)


@dataclass(frozen=True)
class LinkModel:
    name: str
    bandwidth_mb_s: float
    per_transfer_ms: float
    round_trip_ms: float
    source: str
    residuals_pct: dict[str, float]

    def busy_s(self, nbytes: float) -> float:
        """Seconds the link is busy per inference of ``nbytes`` (in plus out)."""
        return nbytes / (self.bandwidth_mb_s * 1e6) + self.per_transfer_ms / 1e3

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LinkModel:
        return cls(**data)


def fit(name: str, rungs: Sequence[Rung], source: str) -> LinkModel:
    """Least squares of seconds per frame on bytes; the round trip from rungs with depth 1."""
    if len({r.bytes for r in rungs}) < 2:
        sizes = len({r.bytes for r in rungs})
        raise LoopError(f"link '{name}': a fit needs rungs of two frame sizes or more, got {len(rungs)} of {sizes}")
    xs, ys = [float(r.bytes) for r in rungs], [r.per_frame_s for r in rungs]
    slope, fixed = _line(xs, ys)
    if slope <= 0:
        raise LoopError(f"link '{name}': seconds per frame do not grow with bytes; the rungs are compute-bound")
    if fixed < 0:  # noise around no fixed cost, not a gain: the line through the origin that fits best
        slope, fixed = _through_origin(xs, ys), 0.0
    model = LinkModel(name, 1e-6 / slope, fixed * 1e3, 0.0, source, {})
    # the seed's own arithmetic: what a lone frame pays beyond a queued one (1/724 - 1/2094 s),
    # less its compute where the device timed it, on the quickest rung (the least compute to hide)
    timed = [r for r in rungs if r.lone_s is not None]
    quick = min(timed, key=lambda r: r.lone_s or 0.0) if timed else None
    residuals = {r.name: round(100 * (model.busy_s(r.bytes) / r.per_frame_s - 1), 2) for r in rungs}
    trip = max(0.0, (quick.lone_s or 0.0) - quick.per_frame_s - quick.compute_s) * 1e3 if quick else 0.0
    return LinkModel(name, model.bandwidth_mb_s, model.per_transfer_ms, trip, source, residuals)


def _line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Slope and intercept minimizing relative residuals (weights 1/y): a ladder spans 32x
    in bytes, and plain least squares would fit the biggest frame and ignore the small ones."""
    import numpy as np

    y = np.asarray(ys, dtype=float)
    slope, intercept = np.polyfit(np.asarray(xs, dtype=float), y, 1, w=1 / y)  # polyfit weighs residuals by w
    return float(slope), float(intercept)


def _through_origin(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The slope minimizing relative residuals with no intercept: sum (1 - s x / y)^2."""
    ratios = [x / y for x, y in zip(xs, ys, strict=True)]
    return sum(ratios) / sum(r * r for r in ratios)


def rungs_of(runs: Sequence[RunRecord]) -> list[Rung]:
    """A ladder's rungs from measured runs: bytes in plus out, and 1/fps at the run's depth
    (the best depth of a depth ladder, with depth 1 as the lone frame)."""
    out = []
    for r in runs:
        m = r.measure
        if r.status != "ok" or m.rate is None or m.bytes_in is None:
            continue
        rates = {d.depth: d.rate.median for d in m.by_depth} or {m.depth or 1: m.rate.median}
        best = max(rates, key=lambda d: rates[d])
        lone = 1 / rates[1] if 1 in rates and best != 1 else None
        split = m.data.get("split_ms") or {}
        compute = float(split.get("lone_compute_ms") or m.data.get("compute_ms") or 0.0) / 1e3
        out.append(Rung(r.variant, m.bytes_in + (m.bytes_out or 0), 1 / rates[best], best, lone, compute))
    return out


@dataclass(frozen=True)
class Prediction:
    link: str
    bytes: int
    compute_ms: float
    compute_basis: str
    depth: int
    link_busy_ms: float
    rate_fps: float
    first_output_ms: float
    ttfo_ms: float | None
    bound: str
    depth_limited: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def compute_s(run: RunRecord, lone: bool = False) -> tuple[float, str]:
    """Seconds of compute for one frame, and where the figure came from: the device's own
    split where it timed one (``lone``: a lone frame's, where it timed that apart), else
    1 / rate at depth 1, else 1 / the run's rate. Compute is a serial stage, one frame at a
    time, as an accelerator runs a network; a host CPU that runs frames side by side is faster
    than that when queued, which this model does not credit."""
    m = run.measure
    split = m.data.get("split_ms") or {}
    if lone and split.get("lone_compute_ms") is not None:
        return float(split["lone_compute_ms"]) / 1e3, "lone_compute_ms recorded by the device"
    if m.data.get("compute_ms") is not None:
        return float(m.data["compute_ms"]) / 1e3, "compute_ms recorded by the device"
    if m.rate is None:
        raise LoopError(f"run {run.id} has no measured rate to predict from")
    alone = {d.depth: d.rate.median for d in m.by_depth}.get(1)
    if alone is not None:
        return 1 / alone, f"1 / rate at depth 1 on '{run.device}' (taken as compute only: the run crossed no link)"
    return 1 / m.rate.median, f"1 / rate at depth {m.depth} on '{run.device}' (no depth 1 measured; taken as compute)"


def predict(model: LinkModel, run: RunRecord, depth: int | None = None) -> Prediction:
    """The run's rate and time to first output had its bytes crossed ``model``."""
    m = run.measure
    nbytes = (m.bytes_in or 0) + (m.bytes_out or 0)
    d = depth or m.depth or 1
    compute, basis = compute_s(run, lone=d <= 1)
    busy, trip = model.busy_s(nbytes), model.round_trip_ms / 1e3
    first = busy + trip + compute_s(run, lone=True)[0]  # a first output is a lone frame's
    in_flight = busy + trip + compute  # one frame's time in the queue: Little's law caps d of them
    rate = 1 / first if d <= 1 else min(1 / max(busy, compute), d / in_flight)
    opened = (m.data.get("ttfo_parts") or {}).get("open_ms")
    return Prediction(
        link=model.name,
        bytes=nbytes,
        compute_ms=compute * 1e3,
        compute_basis=basis,
        depth=d,
        link_busy_ms=busy * 1e3,
        rate_fps=rate,
        first_output_ms=first * 1e3,
        ttfo_ms=None if opened is None else float(opened) + first * 1e3,
        bound=LINK if busy >= compute else COMPUTE,
        depth_limited=d > 1 and d / in_flight < 1 / max(busy, compute),
    )


# The seed's frame ladder (Hailo-10H over USB at 1.5 A, raw uint8 through a 1x1 convolution,
# pipeline depth 4): in MB + out MB per frame, ms per frame. Its depth ladder (16 KB block:
# 724 fps alone, 2094 fps at depth 32) gives the round trip.
_SEED_LADDER = (("512p", 1.05 + 0.26, 4.83), ("720p", 3.69 + 0.92, 15.75), ("1080p", 8.29 + 2.07, 33.59))
_SEED_4K = ("4K", 33.18 + 8.29, 144.80)
_SEED_BLOCK = (16_384, 1 / 724, 1 / 2094)
SEED_SOURCE = (
    "the seed's frame ladder, Hailo-10H over USB at 1.5 A (512p-4K at depth 4, plateau 285-300 MB/s); "
    "round trip from its 16 KB depth ladder (724 fps alone, 2094 fps at depth 32)"
)


def seed_link() -> LinkModel:
    """``hailo10h-usb-1.5a``: the seed's figures, fitted by :func:`fit` as a user's ladder is."""
    rows = (*_SEED_LADDER, _SEED_4K)
    rungs = [Rung(n, round(mb * 1e6), ms / 1e3, 4) for n, mb, ms in rows]
    block, lone, best = _SEED_BLOCK
    rungs.append(Rung("16KB", block, best, 32, lone))
    return fit("hailo10h-usb-1.5a", rungs, SEED_SOURCE)


SHIPPED = {"hailo10h-usb-1.5a": seed_link}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def links_dir(runs: Path) -> Path:
    return runs / "links"


def save(runs: Path, model: LinkModel) -> Path:
    from loop.store.files import atomic_write

    if not _NAME.match(model.name) or model.name in SHIPPED:
        raise LoopError(f"link name '{model.name}': use letters, digits, '.', '_' or '-', not a shipped name")
    links_dir(runs).mkdir(parents=True, exist_ok=True)
    return atomic_write(links_dir(runs) / f"{model.name}.json", json.dumps(model.to_json(), indent=2).encode())


def load(runs: Path | None, name: str) -> LinkModel:
    """A shipped link, one given inline (``300MB/s+0.9ms``), or one fitted and saved under ``runs``."""
    if "MB/s" in name:
        return parse_inline(name)
    if name in SHIPPED:
        return SHIPPED[name]()
    path = links_dir(runs) / f"{name}.json" if runs is not None and _NAME.match(name) else None
    if path is None or not path.is_file():
        known = sorted({*SHIPPED, *(p.stem for p in _saved(runs))})
        raise LoopError(f"unknown link '{name}' (known: {', '.join(known)})")
    try:
        return LinkModel.from_json(json.loads(path.read_text()))
    except (ValueError, TypeError) as exc:
        raise LoopError(f"{path}: not a link model ({exc})") from exc


def _saved(runs: Path | None) -> list[Path]:
    return sorted(links_dir(runs).glob("*.json")) if runs is not None and links_dir(runs).is_dir() else []


def parse_inline(text: str) -> LinkModel:
    """``300MB/s+0.9ms`` (bandwidth, then an optional round trip) as a link model."""
    num = r"([0-9]+(?:\.[0-9]*)?)"
    m = re.fullmatch(rf"\s*{num}\s*MB/s\s*(?:\+\s*{num}\s*ms)?\s*", text)
    if not m or not math.isfinite(float(m.group(1))) or float(m.group(1)) <= 0:
        raise LoopError(f"link '{text}': expected a link name or BANDWIDTH like '300MB/s+0.9ms'")
    return LinkModel(text.strip(), float(m.group(1)), 0.0, float(m.group(2) or 0), "given inline", {})


def _one_network(sweep: str, records: Sequence[RunRecord]) -> None:
    """A link ladder is one network at several frame sizes: fitted over several networks, the
    line would be their compute times, called a link."""
    from loop.measure.ladder import network_of

    nets = {network_of(r): r.variant for r in records if r.status == "ok"}
    if len(nets) > 1:
        raise LoopError(
            f"sweep '{sweep}' holds {len(nets)} networks ({', '.join(sorted(nets.values()))}), not one network "
            "at several frame sizes: a link ladder sweeps one network's frame size (graphs/link-ladder.yaml)"
        )


def fit_runs(runs: Path, sweep: str, name: str) -> LinkModel:
    """Fit the ladder recorded as ``sweep`` in ``runs``'s ledger, and save it as ``name``."""
    from loop.store.ledger import Ledger

    with Ledger.open_existing(runs / "ledger.sqlite") as book:
        records = book.records(sweep)
    if not records:
        raise LoopError(f"no runs of sweep '{sweep}' in {runs}")
    _one_network(sweep, records)
    rungs = rungs_of(records)
    ids = ", ".join(str(r.id) for r in records if r.status == "ok")
    model = fit(name, rungs, f"fitted from sweep '{sweep}' in {runs} (runs {ids})")
    save(runs, model)
    return model

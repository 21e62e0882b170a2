"""Links in use: fitted from a ladder in the ledger, kept under ``runs/links``, and used to
predict a run's rate on another link.

The model itself (three numbers, and the fit) is :mod:`loop.core.links`; the shipped links are
the devices' (:mod:`loop.devices.links`). At queue depth ``d`` a run's pipelined rate is the
slower stage's, ``1 / max(L, C)`` (``L`` the link's busy time per inference, ``C`` compute),
capped by Little's law at ``d / (L + round_trip + C)``; a lone frame takes ``L + round_trip + C``.

A fitted link's file, ``runs/links/NAME.json``, is a user's file like any other, checked when read
as a sweep file is: a string or a zero for the bandwidth, a NaN, a negative round trip or JSON
nested thousands deep would otherwise surface as a traceback, or worse as a printed "-201.6 fps".
:class:`LinkFile` declares each field once, with its type and bounds (strict: no "300" for 300;
finite numbers only), and a file that fails is one line naming the file and the field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from loop.core import jsondepth
from loop.core.errors import LoopError
from loop.core.links import LinkModel, Rung, fit, parse_inline  # noqa: F401 - re-exported for the model's users
from loop.core.record import RunRecord
from loop.devices.links import SHIPPED, shipped_or_inline

LINK = "link"
COMPUTE = "compute"


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
        split = m.split_ms or {}
        compute = float(split.get("lone_compute_ms") or m.compute_ms or 0.0) / 1e3
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
    split = m.split_ms or {}
    if lone and split.get("lone_compute_ms") is not None:
        return float(split["lone_compute_ms"]) / 1e3, "lone_compute_ms recorded by the device"
    if m.compute_ms is not None:
        return m.compute_ms / 1e3, "compute_ms recorded by the device"
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
    opened = m.ttfo_parts.get("open_ms")
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


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MAX_BYTES = 1 << 20  # a fitted link is a few hundred bytes, with one residual per rung
MAX_DEPTH = 4  # an object of numbers and one object of residuals
MAX_MS = 60_000.0  # a fixed cost or round trip of a minute is no link's


class LinkFile(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)

    name: str = Field(pattern=_NAME.pattern)
    bandwidth_mb_s: float = Field(gt=0, le=1e7)
    per_transfer_ms: float = Field(ge=0, le=MAX_MS)
    round_trip_ms: float = Field(ge=0, le=MAX_MS)
    source: str = Field(max_length=4096)
    residuals_pct: dict[Annotated[str, Field(max_length=256)], Annotated[float, Field(ge=-1e6, le=1e6)]] = Field(
        max_length=4096
    )


def checked(data: Any, where: str) -> LinkModel:
    """``data`` as a link model, or one :class:`LoopError` naming ``where`` and the first field
    that fails."""
    try:
        valid = LinkFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "(the file)"
        raise LoopError(f"not a link model: {first['msg']}", file=where, field=field) from None
    return LinkModel(**valid.model_dump())


def read(path: Path) -> LinkModel:
    """The link model saved at ``path``."""
    try:
        if path.stat().st_size > MAX_BYTES:
            raise LoopError(f"not a link model: larger than {MAX_BYTES} bytes", file=str(path))
        data = jsondepth.loads(path.read_bytes(), MAX_DEPTH)
    except (OSError, ValueError) as exc:
        raise LoopError(f"not a link model: {exc}", file=str(path)) from None
    return checked(data, str(path))


def links_dir(runs: Path) -> Path:
    return runs / "links"


def save(runs: Path, model: LinkModel) -> Path:
    from loop.store.files import atomic_write

    if not _NAME.match(model.name) or model.name in SHIPPED:
        raise LoopError(f"link name '{model.name}': use letters, digits, '.', '_' or '-', not a shipped name")
    checked(model.to_json(), f"link '{model.name}'")  # what load would refuse is never written
    links_dir(runs).mkdir(parents=True, exist_ok=True)
    return atomic_write(links_dir(runs) / f"{model.name}.json", json.dumps(model.to_json(), indent=2).encode())


def load(runs: Path | None, name: str) -> LinkModel:
    """A shipped link, one given inline (``300MB/s+0.9ms``), or one fitted and saved under ``runs``."""
    given = shipped_or_inline(name)
    if given is not None:
        return given
    path = links_dir(runs) / f"{name}.json" if runs is not None and _NAME.match(name) else None
    if path is None or not path.is_file():
        known = sorted({*SHIPPED, *(p.stem for p in _saved(runs))})
        raise LoopError(f"unknown link '{name}' (known: {', '.join(known)})")
    return read(path)


def _saved(runs: Path | None) -> list[Path]:
    return sorted(links_dir(runs).glob("*.json")) if runs is not None and links_dir(runs).is_dir() else []


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

    with Ledger.of_runs(runs, readonly=True, existing=True) as book:
        records = book.records(sweep)
    if not records:
        raise LoopError(f"no runs of sweep '{sweep}' in {runs}")
    _one_network(sweep, records)
    rungs = rungs_of(records)
    ids = ", ".join(str(r.id) for r in records if r.status == "ok")
    model = fit(name, rungs, f"fitted from sweep '{sweep}' in {runs} (runs {ids})")
    save(runs, model)
    return model

"""A fitted link's file, ``runs/links/NAME.json``, checked when read as a sweep file is.

A link file is a user's file like any other: a string or a zero for the bandwidth, a NaN, a
negative round trip or JSON nested thousands deep would otherwise surface as a traceback, or
worse as a printed "-201.6 fps". The schema declares each field once, with its type and bounds
(strict: no "300" for 300; finite numbers only), and a file that fails is one line naming the
file and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from loop.core import jsondepth
from loop.core.errors import LoopError
from loop.core.links import LinkModel

MAX_BYTES = 1 << 20  # a fitted link is a few hundred bytes, with one residual per rung
MAX_DEPTH = 4  # an object of numbers and one object of residuals
MAX_MS = 60_000.0  # a fixed cost or round trip of a minute is no link's


class LinkFile(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    bandwidth_mb_s: float = Field(gt=0, le=1e7)
    per_transfer_ms: float = Field(ge=0, le=MAX_MS)
    round_trip_ms: float = Field(ge=0, le=MAX_MS)
    source: str = Field(max_length=4096)
    residuals_pct: dict[Annotated[str, Field(max_length=256)], Annotated[float, Field(ge=-1e6, le=1e6)]] = Field(
        max_length=4096
    )


def _field(error: Any) -> str:
    return ".".join(str(p) for p in error["loc"]) or "(the file)"


def checked(data: Any, where: str) -> LinkModel:
    """``data`` as a link model, or one :class:`LoopError` naming ``where`` and the first field
    that fails."""
    try:
        valid = LinkFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise LoopError(f"not a link model: {first['msg']}", file=where, field=_field(first)) from None
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


__all__ = ["LinkFile", "checked", "read"]

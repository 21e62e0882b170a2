"""Memory as a resource, as cores are: how many compiles a sweep runs at once.

One compile's peak is estimated from the base's weights, ``COMPILE_FIXED + COMPILE_PER_WEIGHT_BYTE
x float weight bytes``, and the sweep's own process likewise (``PARENT_*``); both were
measured on ONNX Runtime over transformer-like stacks with their weights in external data
(``benchmarks/big_model.py``; the figures are in ``docs/architecture.md``, "Memory"). Each compile
records its own peak (``info.peak_bytes``), so the rule can be held to what runs.

The default ``--jobs`` is the cores' share cut to what the memory available holds beside the sweep's
own process. A sweep that cannot hold even one compile refuses in one line before any work,
naming both figures; an explicit ``--jobs`` is taken as asked, beyond that refusal.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from loop.core import memory
from loop.core.errors import LoopError

GB = 1e9
# Measured (docs/architecture.md, "Memory"), models passed between stages as files, the float
# weights mapped from them, results left in runs/: a compile peaked at 1.05, 3.38 and 13.25 GB on
# 0.236, 1.074 and 4.295 GB of float weights (quantize_static's own peak, which it runs); the
# sweep's own process at 0.52, 0.69 and 2.32 GB.
COMPILE_FIXED = 300_000_000
COMPILE_PER_WEIGHT_BYTE = 3.1
PARENT_FIXED = 450_000_000
PARENT_PER_WEIGHT_BYTE = 0.45


@dataclass(frozen=True)
class Budget:
    """What one compile and the sweep's own process are expected to take, against what is available."""

    weight_bytes: int
    available: int | None

    @property
    def compile_bytes(self) -> int:
        return int(COMPILE_FIXED + COMPILE_PER_WEIGHT_BYTE * self.weight_bytes)

    @property
    def parent_bytes(self) -> int:
        return int(PARENT_FIXED + PARENT_PER_WEIGHT_BYTE * self.weight_bytes)

    def fitting(self) -> int | None:
        """How many compiles fit beside the sweep's own process (None: memory not known here)."""
        if self.available is None:
            return None
        return max(0, (self.available - self.parent_bytes) // self.compile_bytes)

    def jobs(self, asked: int | None, cores: int) -> int:
        """``asked``, or the cores cut to what fits; refuses where not even one compile fits."""
        fits = self.fitting()
        if fits == 0:
            raise LoopError(
                f"not enough memory for one compile: a compile of {self.weight_bytes / GB:.2f} GB of weights "
                f"takes about {self.compile_bytes / GB:.1f} GB beside the sweep's {self.parent_bytes / GB:.1f} GB, "
                f"and {(self.available or 0) / GB:.1f} GB is available"
            )
        if asked:
            return asked
        return max(1, min(cores, fits if fits is not None else cores))


def budget(base: Path, local: bool = True) -> Budget:
    """The budget of a sweep over ``base``: its weights read from the file alone (a recipe's are
    small); ``local``: the compiles run on this host (else its memory is not theirs to weigh)."""
    weight_bytes = 0
    if base.suffix.lower() == ".onnx" and base.is_file():
        stat = base.stat()
        weight_bytes = _float_bytes(str(base), stat.st_mtime_ns, stat.st_size)
    return Budget(weight_bytes, memory.available_bytes() if local else None)


@lru_cache(maxsize=8)
def _float_bytes(path: str, mtime_ns: int, size: int) -> int:
    """The model's weights as float32 bytes (what a compile reads), once per file as it stands: a
    search's every generation asks again of the same base."""
    from loop.flow.fit import weigh_file

    try:
        return weigh_file(Path(path)).count * 4
    except LoopError:  # the author stage says what is wrong with it, in its own words
        return 0

"""The words a run is described by: its status, the stage it failed at, its verdict, its flags.

Each is an enum whose values are the strings the ledger has always held, and each member *is*
that string (a ``str`` subclass), so JSON, SQLite and comparisons with the old strings are
unchanged. Writers name members; readers take any string the ledger holds, a value this loop
does not know (written by a newer loop, or by a backend of its own) included: the ledger is
read for as long as it is kept, and a word read back is shown as written, never refused.
"""

from __future__ import annotations

from enum import Enum
from typing import Any


class Kind(str, Enum):
    """A ``str`` enum that prints as its value and reads any string back."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @classmethod
    def _missing_(cls, value: Any) -> Kind | None:
        if not isinstance(value, str):
            return None  # not a word: the caller's ValueError says so
        # an unknown word stays a member of its kind, so a typed reader can hold it
        member = str.__new__(cls, value)
        member._value_ = value
        member._name_ = value
        return member


class Status(Kind):
    """Where a run is: ``running`` until it is ``ok`` or ``failed``; ``interrupted`` when its
    sweep died; ``corrupt`` only as read back (a row that cannot be read as a run)."""

    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    CORRUPT = "corrupt"


class Stage(Kind):
    """Where a run failed: a compile stage, a device stage (each under its own timeout), or
    the runs folder's disk (``store``, ``ledger``: not the variant's fault, redone on resume)."""

    STARTUP = "startup"
    OPTIMIZE = "optimize"
    RESCALE = "rescale"  # scale_grid's patch of a quantized model
    FINGERPRINT = "fingerprint"
    COMPILE = "compile"
    STORE = "store"
    LEDGER = "ledger"
    OPEN = "open"
    INPUTS = "inputs"
    MEASURE = "measure"
    VENDOR_BENCHMARK = "vendor-benchmark"
    HEALTH = "health"
    SCORE = "score"  # auditing or scoring what the device returned (a user scorer that raised, say)


class Verdict(Kind):
    """The audit's word on a run (see :mod:`loop.judge.audit`)."""

    REFERENCE = "reference"  # the base itself
    CLEAN = "clean"  # every change inside the footprint
    CONFOUNDED = "confounded"  # something outside it changed: kept, left out of comparisons
    NO_EFFECT = "no-effect"  # nothing changed: the perturbation missed
    NA = "n/a"  # a base (or recipe params) of its own: nothing like-for-like to audit against
    NO_REFERENCE = "no-reference"  # the base it is audited against failed: unknown, left out too


NOT_COMPARABLE = (Verdict.CONFOUNDED, Verdict.NO_REFERENCE)  # kept in the ledger, left out of comparisons


class Flag(Kind):
    """Something about how a run was measured that a reader should weigh. A backend may add
    flags of its own (its vendor benchmark disagreeing, say); they read back as flags too."""

    HOST_BUSY = "host-busy"  # other processes used more of a core than the protocol allows
    HOST_CONTENDED = "host-contended"  # measured while this sweep's compiles still ran (--overlap)
    POWER_LIMITED = "power-limited"  # the device said its power source limits it
    THERMAL_DRIFT = "thermal-drift"  # the rate fell over a long run by more than its noise
    CALIBRATION_WORSE = "calibration-worse"  # scored far below the sweep's own calibration method
    QUANTIZATION_RUINED = "quantization-ruined"  # its SNR or top-1 agreement against the float model collapsed
    # scored far below its reference, beyond its own interval: a fast wrong answer, whatever its verdict
    BELOW_REFERENCE = "below-reference"
    # run score-only (a study's ``measure=False``, ``loop sweep --score-only``): the devices answered
    # the controlled inputs alone, so it has no time to first output and no rate, by request
    SCORE_ONLY = "score-only"

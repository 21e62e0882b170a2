"""The shim's buffers outlive every job (issue 33, item 5): the REAL shim over the FAKE HailoRT.

The fake (tests/devices/fake_hailort, a test double: not HailoRT, no Hailo hardware) can keep jobs in
flight past shutdown, as HailoRT does when its 10 s wait for transfers runs out, and counts every block
the shim frees while such a job holds a buffer in it (``freed_in_flight``). Each test loads its own copy
of the library: a leaked session keeps its VDevice for the life of that copy, which must not reach the
other tests' copy.
"""

from __future__ import annotations

import ctypes
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loop.hailort.shim import LEAKED, ShimCaller, load_shim

HEF = "FAKEHEF in=4x4x3 out=2x2x3"
FRAME, OUT = 48, 12
TIMEOUT, INTERNAL_FAILURE = 4, 8


class Fake:
    """One copy of the shim over the fake: the bound shim and the fake's own test hooks."""

    def __init__(self, library: Path) -> None:
        self.shim = ShimCaller(load_shim(library, library.parent / "hailort_shim.sigs"))
        self.lib = ctypes.CDLL(str(library))
        self.lib.fake_hailort_counters.restype = ctypes.c_size_t
        self.frame = ctypes.create_string_buffer(FRAME)

    def counters(self) -> dict[str, Any]:
        buf = ctypes.create_string_buffer(2048)
        self.lib.fake_hailort_counters(buf, len(buf))
        return dict(json.loads(buf.value))

    def open(self, hef: Path) -> ctypes.c_void_p:
        handle = ctypes.c_void_p()
        self.shim.check(self.shim.binding.loop_hrt_open(str(hef).encode(), b"drain_ms=0", ctypes.byref(handle)))
        return handle

    def inputs(self) -> tuple[Any, Any]:
        return (ctypes.c_void_p * 1)(ctypes.addressof(self.frame)), (ctypes.c_size_t * 1)(FRAME)

    def pipelined(self, handle: ctypes.c_void_p) -> int:
        elapsed, hw = ctypes.c_double(), ctypes.c_double()
        ptrs, sizes = self.inputs()
        run = self.shim.binding.loop_hrt_pipelined
        return int(run(handle, ptrs, sizes, 1, 4, 2, ctypes.byref(elapsed), ctypes.byref(hw)))

    def infer_tight(self, handle: ctypes.c_void_p, out: Any) -> int:
        """One frame into an output that does not end on a page: written through the shim's own buffer."""
        ptrs, sizes = self.inputs()
        outs, out_sizes = (ctypes.c_void_p * 1)(ctypes.addressof(out)), (ctypes.c_size_t * 1)(OUT)
        return int(self.shim.binding.loop_hrt_infer(handle, ptrs, sizes, 1, outs, out_sizes, 1, 1000))


@pytest.fixture()
def fake(shim_over_fake_hailort: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fake]:
    monkeypatch.setenv("HAILORT_LOGGER_PATH", str(tmp_path))
    copy = tmp_path / "copy" / shim_over_fake_hailort.name
    copy.parent.mkdir()
    shutil.copy(shim_over_fake_hailort, copy)
    shutil.copy(shim_over_fake_hailort.parent / "hailort_shim.sigs", copy.parent)
    made = Fake(copy)
    yield made
    made.lib.fake_hailort_stall_jobs(0, 0)  # the stalled jobs' callbacks, so nothing is left owed


@pytest.fixture()
def hef(tmp_path: Path) -> Path:
    path = tmp_path / "m.hef"
    path.write_text(HEF)
    return path


def test_a_session_whose_pipelined_jobs_did_not_drain_is_leaked_not_freed(fake: Fake, hef: Path) -> None:
    """``~Session()`` ignored shutdown's outcome and its slots, declared after the configured model,
    were freed first: under jobs still in flight. HailoRT v5.2.0's shutdown answers success even when
    its wait ran out (infer_model.cpp), so the shim counts its jobs' callbacks itself."""
    handle = fake.open(hef)
    fake.lib.fake_hailort_stall_jobs(1, 0)
    assert fake.pipelined(handle) == TIMEOUT
    assert fake.shim.binding.loop_hrt_close(handle) == LEAKED
    assert "2 job(s) still in flight" in fake.shim.last_error() and "leaked" in fake.shim.last_error()
    seen = fake.counters()
    assert (seen["stalled_jobs"], seen["freed_in_flight"]) == (2, 0)
    # the jobs left out on the early return were detached: none of their destructors waited (10 s each)
    assert seen["dtor_waits"] == 0


def test_a_timed_out_infer_leaves_its_bounce_buffer_alive(fake: Fake, hef: Path) -> None:
    """A run that times out leaves its job in flight (infer_model.cpp, ConfiguredInferModelBase::run
    is run_async and a wait): the shim's bounce buffer it writes into must not be freed at close."""
    out = ctypes.create_string_buffer(OUT)
    handle = fake.open(hef)
    fake.lib.fake_hailort_stall_jobs(1, 0)
    assert fake.infer_tight(handle, out) == TIMEOUT
    assert fake.shim.binding.loop_hrt_close(handle) == LEAKED
    assert fake.counters()["freed_in_flight"] == 0 and fake.counters()["dtor_waits"] == 0


def test_a_failed_shutdown_leaks_the_session_and_says_so(fake: Fake, hef: Path) -> None:
    """shutdown()'s status was ignored; now a failed one leaves the session leaked, with its status."""
    handle = fake.open(hef)
    fake.lib.fake_hailort_stall_jobs(1, INTERNAL_FAILURE)
    assert fake.shim.binding.loop_hrt_close(handle) == LEAKED
    assert "shutdown failed with status 8" in fake.shim.last_error()

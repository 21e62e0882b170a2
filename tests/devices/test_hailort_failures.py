"""The hailort device over the REAL shim and the FAKE HailoRT (tests/devices/fake_hailort: a test
double of libhailort, not HailoRT; no Hailo hardware runs here) when frames fail or a session cannot
be freed.

On a Hailo-8 a failed job's wait answers success and only its callback carries the status
(``AsyncInferJobImpl::wait``, ``infer_model.cpp``, hailort v4.23.0): a failed frame must fail the call.

The shim answers close with 1004 when HailoRT may still hold the session's buffers (jobs in flight
after shutdown, ``fake_hailort_stall_jobs``): the device must keep its own staging buffers alive for
good, say so on the run, and not fail the close; the timeout reopen gives the new session fresh ones.
Each test loads its own copy of the library: a leaked session keeps its VDevice for that copy's life.
"""

from __future__ import annotations

import ctypes
import gc
import shutil
import weakref
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from loop.core.vocab import Artifact
from loop.devices import hailort
from loop.devices.base import RuntimeOptions
from loop.devices.hailort import LEAKED_SESSIONS, HailoRTDevice, HailoRTError
from loop.measure.protocol import SESSION_LEAKED, flags_for

HEF = Artifact("hailo", b"FAKEHEF in=4x4x3 out=2x2x3", ".hef", (), ())
FRAMES = [np.ones((1, 4, 4, 3), np.uint8)]
TIMEOUT, INTERNAL_FAILURE = 4, 8


@pytest.fixture()
def lib(shim_over_fake_hailort: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ctypes.CDLL]:
    """A copy of the shim over the fake, whose sessions wait 0 ms for jobs at close."""
    monkeypatch.setenv("HAILORT_LOGGER_PATH", str(tmp_path))
    plain = hailort.options_text
    monkeypatch.setattr(hailort, "options_text", lambda o, d: plain(o, d) + ";drain_ms=0")
    copy = tmp_path / "copy" / shim_over_fake_hailort.name
    copy.parent.mkdir()
    shutil.copy(shim_over_fake_hailort, copy)
    shutil.copy(shim_over_fake_hailort.parent / "hailort_shim.sigs", copy.parent)
    made = ctypes.CDLL(str(copy))
    made.library = str(copy)
    yield made
    made.fake_hailort_stall_jobs(0, 0)  # the stalled jobs' callbacks, so nothing is left owed


def test_a_leaked_session_closes_keeps_its_buffers_and_says_so(lib: ctypes.CDLL) -> None:
    device = HailoRTDevice(library=lib.library)
    session = device.open(HEF, RuntimeOptions())
    staged = [weakref.ref(s.raw) for s in (*session._ins, *session._outs)]
    lib.fake_hailort_stall_jobs(1, 0)
    with pytest.raises(HailoRTError) as err:
        session.pipelined(FRAMES, 4, 2)  # times out, is reopened, times out again
    assert err.value.status == TIMEOUT
    session.close()  # 1004: recorded, not raised
    assert session.leaked == 2  # the session the reopen replaced, and the reopened one
    del session
    gc.collect()
    assert all(ref() is not None for ref in staged)  # a leaked job may still use them
    warnings = device.health().warnings
    assert any("session leaked" in w and "1004" in w for w in warnings)
    assert SESSION_LEAKED in flags_for(warnings)


def test_the_timeout_reopen_stages_fresh_buffers_when_the_old_session_leaked(lib: ctypes.CDLL) -> None:
    device = HailoRTDevice(library=lib.library)
    with device.open(HEF, RuntimeOptions()) as session:
        call = session.bound(FRAMES)
        old_in, old_out = session._ins[0].raw, session._outs[0].raw
        lib.fake_hailort_stall_jobs(1, 0)
        with pytest.raises(HailoRTError):
            call()
        assert session.leaked >= 1 and any("session leaked" in n for n in session.notes)
        assert session._outs[0].raw is not old_out  # the leaked job may still write there
        assert np.array_equal(session._ins[0].raw, old_in)  # the bound frame carried over
        assert any(old_out is kept for entry in LEAKED_SESSIONS for stages in entry[1:2] for s in stages
                   for kept in (s.raw,))  # fmt: skip
        lib.fake_hailort_stall_jobs(0, 0)
        session.infer(FRAMES)  # the reopened session runs on its own buffers


@pytest.mark.parametrize("arch", ["hailo8", "hailo10h"])
def test_a_failed_frame_fails_the_call_on_either_device(
    lib: ctypes.CDLL, arch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_HAILORT_ARCH", arch)
    hef = Artifact("hailo", f"FAKEHEF in=4x4x3 out=2x2x3 arch={arch}".encode(), ".hef", (), ())
    with HailoRTDevice(library=lib.library).open(hef, RuntimeOptions()) as session:
        session.pipelined(FRAMES, 8, 4)
        for run in (lambda: session.pipelined(FRAMES, 8, 4), lambda: session.infer(FRAMES)):
            lib.fake_hailort_fail_runs(INTERNAL_FAILURE, 1)
            with pytest.raises(HailoRTError) as err:
                run()
            assert err.value.status == INTERNAL_FAILURE

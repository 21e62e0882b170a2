"""HailoRTDevice driven for real through the LOOPBACK shim (tests/devices/loopback).

The loopback is a C test double implementing shim/hailort_shim.sigs; it is not HailoRT
and no Hailo hardware runs in these tests. They show the Python side and the ABI work:
layout, status codes, refused buffers, deterministic outputs, pipelined timings.
"""

from __future__ import annotations

import ctypes
import math
import mmap
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from loop.core.errors import BufferSizeError
from loop.core.kinds import Flag
from loop.core.vocab import Artifact
from loop.devices.base import RuntimeOptions
from loop.devices.hailort import (
    LATENCY_OFF_NOTE,
    HailoLog,
    HailoRTDevice,
    HailoRTError,
    options_text,
    page_buffer,
    runtime_warnings,
    status_line,
)
from loop.measure.protocol import flags_for

POWER_WARNING = "[HailoRT] [warning] USB-C source electrical current advertised: 1.5A."


def loopback_artifact(spec: str = "LOOPBACK 4 4 3 2 2 3") -> Artifact:
    return Artifact("hailo", spec.encode(), ".hef", (), ())


def loopback_reference(frame: np.ndarray, out_bytes: int) -> np.ndarray:
    """The loopback's function, re-implemented, to prove bytes cross the ABI intact."""
    data = frame.tobytes()
    acc = 2166136261
    for b in data:
        acc = ((acc ^ b) * 16777619) & 0xFFFFFFFF
    return np.array(
        [((acc >> (j % 24)) + j * 31 + data[j % len(data)]) & 0xFF for j in range(out_bytes)], dtype=np.uint8
    )


@pytest.fixture()
def loopback_device(loopback_shim_lib: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HailoRTDevice:
    monkeypatch.setenv("HAILORT_LOGGER_PATH", str(tmp_path))
    return HailoRTDevice(library=str(loopback_shim_lib))


def test_layout_comes_from_the_shim(loopback_device: HailoRTDevice) -> None:
    with loopback_device.open(loopback_artifact(), RuntimeOptions()) as session:
        (inp,), (out,) = session.inputs, session.outputs
        assert (inp.name, inp.shape, inp.dtype, inp.frame_bytes) == ("loopback/input0", (1, 4, 4, 3), "uint8", 48)
        assert (inp.scale, inp.zero_point) == (0.0078125, 128)
        assert (out.shape, out.frame_bytes, out.scale, out.zero_point) == ((1, 2, 2, 3), 12, 0.5, 3)
        assert session.async_queue_size == 4


def test_outputs_are_deterministic_and_depend_on_the_input(loopback_device: HailoRTDevice) -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (1, 4, 4, 3), dtype=np.uint8)
    b = a.copy()
    b[0, 0, 0, 0] ^= 1
    with loopback_device.open(loopback_artifact(), RuntimeOptions()) as session:
        first, again, other = (session.infer([x])[0] for x in (a, a, b))
    assert np.array_equal(first, again)
    assert not np.array_equal(first, other)
    assert np.array_equal(first.reshape(-1), loopback_reference(a, 12))


def test_infer_writes_into_a_given_larger_output(loopback_device: HailoRTDevice) -> None:
    frame = np.full((1, 4, 4, 3), 7, np.uint8)
    out = np.full(20, 0xEE, np.uint8)
    with loopback_device.open(loopback_artifact(), RuntimeOptions()) as session:
        session.infer([frame], [out])
    assert np.array_equal(out[:12], loopback_reference(frame, 12))
    assert np.all(out[12:] == 0xEE)


def test_undersized_buffers_are_refused_in_python(loopback_device: HailoRTDevice) -> None:
    with loopback_device.open(loopback_artifact(), RuntimeOptions()) as session:
        with pytest.raises(BufferSizeError, match="smaller"):
            session.infer([np.zeros((1, 4, 4, 2), np.uint8)])
        with pytest.raises(BufferSizeError, match="smaller"):
            session.infer([np.zeros((1, 4, 4, 3), np.uint8)], [np.zeros(11, np.uint8)])
        with pytest.raises(BufferSizeError, match="dtype"):
            session.infer([np.zeros((1, 4, 4, 3), np.float32)])


def test_undersized_buffers_are_refused_by_the_shim_itself(loopback_device: HailoRTDevice) -> None:
    """Bypassing Python's checks: the library answers its own status 1000 and writes nothing."""
    frame = np.zeros(48, np.uint8)
    out = np.full(12, 0xAB, np.uint8)
    with loopback_device.open(loopback_artifact(), RuntimeOptions()) as session:
        binding = session.shim.binding
        ins = (ctypes.c_void_p * 1)(frame.ctypes.data)
        outs = (ctypes.c_void_p * 1)(out.ctypes.data)
        status = binding.loop_hrt_infer(
            session.handle, ins, (ctypes.c_size_t * 1)(48), 1, outs, (ctypes.c_size_t * 1)(11), 1, 1000
        )
        assert status == 1000
        assert "output" in session.shim.last_error()
        assert np.all(out == 0xAB)
        with pytest.raises(BufferSizeError, match="refused by the device"):
            session.shim.check(status)


def test_pipelined_measures_and_caps_depth(loopback_device: HailoRTDevice) -> None:
    frame = np.arange(48, dtype=np.uint8).reshape(1, 4, 4, 3)
    with loopback_device.open(loopback_artifact(), RuntimeOptions(hw_latency=True)) as session:
        assert session.hw_latency_ms() is None  # nothing measured yet: never invented
        calls: list[tuple[Any, ...]] = []
        real = session.shim.binding.functions["loop_hrt_pipelined"]
        session.shim.binding.functions["loop_hrt_pipelined"] = lambda *a: calls.append(a) or real(*a)
        elapsed = session.pipelined([frame], 200, 64)
        assert calls[0][4:6] == (200, 4)  # depth capped at the async queue size
        assert elapsed > 0 and math.isfinite(elapsed)
        latency = session.hw_latency_ms()
        assert latency is not None and latency > 0
        with pytest.raises(BufferSizeError):
            session.pipelined([frame[..., :2]], 10, 2)


def test_wrong_architecture_hef_is_one_clear_line(loopback_device: HailoRTDevice) -> None:
    """Item 8: HailoRT 4.23 and 5.2 answer 93 for another architecture; 26 is a file that is no HEF."""
    with pytest.raises(HailoRTError) as err:
        loopback_device.open(loopback_artifact("LOOPBACK-ARCH hailo8"), RuntimeOptions())
    message = str(err.value)
    assert err.value.status == 93 and "\n" not in message
    assert "HAILO_HEF_NOT_COMPATIBLE_WITH_DEVICE" in message and "another architecture" in message
    with pytest.raises(HailoRTError) as err:
        loopback_device.open(loopback_artifact("not a HEF at all"), RuntimeOptions())
    assert err.value.status == 26 and "another architecture" not in str(err.value)


def test_non_hailo_artifacts_are_refused(loopback_device: HailoRTDevice) -> None:
    with pytest.raises(HailoRTError, match="onnxruntime"):
        loopback_device.open(Artifact("onnxruntime", b"x", ".onnx", (), ()), RuntimeOptions())


def test_health_captures_runtime_stderr_and_flags_power(
    loopback_device: HailoRTDevice, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOPBACK_EMIT_WARNING", "1")
    with loopback_device.open(loopback_artifact(), RuntimeOptions()):
        health = loopback_device.health()
    assert health.warnings == (POWER_WARNING,)
    assert flags_for(health.warnings) == [Flag.POWER_LIMITED]  # the one check loop flags runs by
    assert health.temperature_c is None  # the loopback has no chip
    assert (health.device_id, health.device_path) == ("LOOPBACK", "loopback/0")
    assert loopback_device.health().warnings == ()  # handed out once


def test_health_reads_the_hailort_log_file(loopback_device: HailoRTDevice, tmp_path: Path) -> None:
    log = tmp_path / "hailort.log"
    log.write_text("[2026-08-29 10:00:00.000] [1] [HailoRT] [info] [x.cpp:1] [f] old\n")
    loopback_device.log = HailoLog()
    with open(log, "a") as f:
        f.write(
            "[2026-08-29 10:00:01.000] [1] [HailoRT] [warning] [usb.cpp:9] [check] "
            "USB-C source electrical current advertised: 1.5A.\n"
        )
    assert loopback_device.health().warnings == (POWER_WARNING,)


def test_available_names_the_paths_it_tried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loopback_shim_lib: Path
) -> None:
    missing = tmp_path / "libhailort_shim.so"
    monkeypatch.setenv("LOOP_HAILORT_SHIM", str(missing))
    ok, reason = HailoRTDevice.available()
    assert not ok and str(missing) in reason
    monkeypatch.setenv("LOOP_HAILORT_SHIM", str(loopback_shim_lib))
    assert HailoRTDevice.available() == (True, f"shim {loopback_shim_lib}")


def test_pure_helpers() -> None:
    assert flags_for(["[HailoRT] [warning] something else"]) == []
    assert runtime_warnings("[HailoRT] [info] fine\n[HailoRT] [error] boom\n") == ["[HailoRT] [error] boom"]
    assert status_line(74, "x").startswith("HailoRT status 74 (HAILO_OUT_OF_PHYSICAL_DEVICES")
    assert status_line(99, "") == "HailoRT status 99"
    text = options_text(RuntimeOptions(power_mode="ultra_performance", dma_map=True, batch_size=2), "usb/1")
    assert text == "dma_map=1;hw_latency=0;batch_size=2;power_mode=ultra_performance;device_id=usb/1"


# -- issue 12, through the LOOPBACK (the Python side of each fix) --------------------------------


def open_handles(library: Path) -> int:
    return ctypes.CDLL(str(library)).loopback_open_handles()


def test_defaults_leave_latency_off_and_batch_to_hailort() -> None:
    """Item 2: hw latency was on and batch 1 by default; hailortcli runs with neither."""
    assert options_text(RuntimeOptions(), None) == "dma_map=0;hw_latency=0"
    assert (
        options_text(RuntimeOptions(hw_latency=True, group_id="loop"), None) == "dma_map=0;hw_latency=1;group_id=loop"
    )


def test_latency_off_by_default_is_recorded_with_why(loopback_device: HailoRTDevice) -> None:
    frame = np.zeros((1, 4, 4, 3), np.uint8)
    with loopback_device.open(loopback_artifact(), RuntimeOptions()) as session:
        session.pipelined([frame], 10, 2)
        assert session.hw_latency_ms() is None
        assert session.notes == (LATENCY_OFF_NOTE,)


def test_multi_planar_model_opens_without_latency_and_says_why(loopback_device: HailoRTDevice) -> None:
    with loopback_device.open(loopback_artifact("LOOPBACK 4 4 3 2 2 3 planes=2"), RuntimeOptions(hw_latency=True)) as s:
        assert any("configured without it" in note for note in s.notes)
        s.pipelined([np.zeros((1, 4, 4, 3), np.uint8)], 5, 1)
        assert s.hw_latency_ms() is None


def test_invalid_quantization_is_refused_not_dequantized_to_zeros(
    loopback_device: HailoRTDevice, loopback_shim_lib: Path
) -> None:
    """Item 3: scale 0 (INVALID_QUANT_INFO) was used silently; item 7: the handle is closed."""
    with pytest.raises(HailoRTError, match="without one usable quantization scale"):
        loopback_device.open(loopback_artifact("LOOPBACK 4 4 3 2 2 3 badquant"), RuntimeOptions())
    assert open_handles(loopback_shim_lib) == 0


def test_a_failed_session_never_blocks_the_next_open(loopback_device: HailoRTDevice) -> None:
    """Item 7: a handle leaked by a failing HailoRTSession.__init__ made every later open fail with 74."""
    with pytest.raises(HailoRTError):
        loopback_device.open(loopback_artifact("LOOPBACK 4 4 3 2 2 3 badquant"), RuntimeOptions())
    with loopback_device.open(loopback_artifact(), RuntimeOptions()) as session:
        assert session.inputs[0].frame_bytes == 48


def test_time_to_first_output_closes_when_the_first_call_fails(
    loopback_device: HailoRTDevice, loopback_shim_lib: Path
) -> None:
    """Item 7: time_to_first_output had no try/finally around its session."""
    from loop.measure.protocol import time_to_first_output

    with pytest.raises(BufferSizeError):
        time_to_first_output(
            loopback_device, loopback_artifact(), [np.zeros((1, 4, 4, 2), np.uint8)], RuntimeOptions(), 1
        )
    assert open_handles(loopback_shim_lib) == 0
    _parts, ttfo = time_to_first_output(
        loopback_device, loopback_artifact(), [np.zeros((1, 4, 4, 3), np.uint8)], RuntimeOptions(), 1
    )
    assert ttfo > 0


def test_devices_of_one_process_share_its_device_whatever_the_group(loopback_shim_lib: Path) -> None:
    """Issue 25, item 1: the sessions and holds of one process share its one device (the shim's one
    VDevice per process); a held device is let go by release(), and only then is it free."""
    first, second = HailoRTDevice(library=str(loopback_shim_lib)), HailoRTDevice(library=str(loopback_shim_lib))
    lib = ctypes.CDLL(str(loopback_shim_lib))
    held = lib.loopback_device_holds()  # other tests' devices, never released, hold it too
    with (
        first.open(loopback_artifact(), RuntimeOptions()),
        second.open(loopback_artifact(), RuntimeOptions(group_id="g")),
    ):
        assert (lib.loopback_device_holds() - held, open_handles(loopback_shim_lib)) == (2, 2)
        assert not first.release()  # its session still holds the device
    assert first.release() and second.release() and lib.loopback_device_holds() == held
    assert status_line(74, "").count("group_id") == 1 and "UNIQUE" in status_line(74, "")


def test_an_unknown_device_id_is_hailort_status_2_not_a_buffer_error(loopback_shim_lib: Path) -> None:
    """Item 9: the shim's own 2 collided with HAILO_INVALID_ARGUMENT, so this became a BufferSizeError."""
    device = HailoRTDevice(library=str(loopback_shim_lib), device_id="usb/9")
    with pytest.raises(HailoRTError) as err:
        device.open(loopback_artifact(), RuntimeOptions())
    assert err.value.status == 2 and "HAILO_INVALID_ARGUMENT" in str(err.value)


def test_health_survives_a_nul_in_the_text(loopback_device: HailoRTDevice, monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 9: a NUL cut the JSON short and health() raised instead of answering."""
    monkeypatch.setenv("LOOPBACK_HEALTH_NUL", "1")
    health = loopback_device.health()
    assert health.temperature_c is None and any("health unreadable" in w for w in health.warnings)


def test_session_buffers_start_and_end_on_a_page(loopback_device: HailoRTDevice) -> None:
    """Item 9: outputs handed to HailoRT must end on a page (hailo/infer_model.hpp)."""
    with loopback_device.open(loopback_artifact(), RuntimeOptions()) as session:
        for stage in session._ins + session._outs:
            assert stage.raw.ctypes.data % mmap.PAGESIZE == 0 and stage.raw.nbytes % mmap.PAGESIZE == 0
        assert list(session._out_sizes) == [mmap.PAGESIZE]  # the capacity, not the 12-byte frame
    block = page_buffer(1)
    assert block.nbytes == mmap.PAGESIZE and block.ctypes.data % mmap.PAGESIZE == 0


def test_windows_adds_dll_folders_before_loading(
    loopback_shim_lib: Path, shim_sigs_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 1: Python 3.8+ on Windows ignores PATH for a ctypes DLL's dependencies."""
    import loop.hailort.shim as shim_module

    hailort_bin = tmp_path / "HailoRT" / "bin"
    hailort_bin.mkdir(parents=True)
    (hailort_bin / "hailort.dll").write_bytes(b"")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{hailort_bin}")
    events: list[str] = []
    monkeypatch.setattr(shim_module.sys, "platform", "win32")
    monkeypatch.setattr(shim_module.os, "add_dll_directory", lambda p: events.append(f"add {p}"), raising=False)
    real_bind = shim_module.bind
    monkeypatch.setattr(shim_module, "bind", lambda lib, sigs: events.append("load") or real_bind(lib, sigs))
    shim_module.load_shim(loopback_shim_lib, shim_sigs_path)
    assert events == [f"add {loopback_shim_lib.parent}", f"add {hailort_bin}", "load"]
    assert shim_module.dll_directories(loopback_shim_lib, {"LOOP_HAILORT_DLL_DIR": str(tmp_path)}) == [
        loopback_shim_lib.parent,
        tmp_path,
    ]

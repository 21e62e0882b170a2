"""The REAL shim (shim/hailort_shim.cpp) run over a FAKE HailoRT (tests/devices/fake_hailort).

The fake is a test double of the slice of libhailort the shim calls, behaving as HailoRT v5.2.0's
source does where named in fake_hailort.cpp; it is not HailoRT and no Hailo hardware runs here.
These tests pin what the shim's own C++ does: latency and batch defaults, the float32 fallback for
invalid quantization, group_id, status codes, exceptions at the C boundary, per-thread error
text, health text, page-rounded outputs and DMA mappings kept for a session's life.
"""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from loop.core.vocab import Artifact
from loop.devices.base import RuntimeOptions
from loop.devices.hailort import HailoRTDevice, HailoRTError, page_buffer
from loop.hailort.shim import ABI_VERSION, hef_layouts, load_shim
from loop.hailort.sigs import parse_sigs

PLAIN = "FAKEHEF in=4x4x3 out=2x2x3"


def fake_hef(text: str = PLAIN) -> Artifact:
    return Artifact("hailo", text.encode(), ".hef", (), ())


def counters(library: Path) -> dict[str, Any]:
    buf = ctypes.create_string_buffer(1024)
    lib = ctypes.CDLL(str(library))
    lib.fake_hailort_counters.restype = ctypes.c_size_t
    lib.fake_hailort_counters(buf, len(buf))
    return json.loads(buf.value)


@pytest.fixture()
def shim_lib(shim_over_fake_hailort: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("HAILORT_LOGGER_PATH", str(tmp_path))
    ctypes.CDLL(str(shim_over_fake_hailort)).fake_hailort_reset()
    yield shim_over_fake_hailort
    assert counters(shim_over_fake_hailort)["live_vdevices"] == 0, "a test left a VDevice open"


@pytest.fixture()
def device(shim_lib: Path) -> Iterator[HailoRTDevice]:
    device = HailoRTDevice(library=str(shim_lib))
    yield device
    device.release()  # the device holds the process's VDevice from its first use until released


def test_every_declared_symbol_resolves_and_the_abi_matches(shim_lib: Path, shim_sigs_path: Path) -> None:
    binding = load_shim(shim_lib, shim_sigs_path)
    assert set(binding.functions) == {s.name for s in parse_sigs(shim_sigs_path.read_text())}
    assert binding.loop_hrt_abi_version() == ABI_VERSION


def test_defaults_ask_no_latency_and_no_batch(device: HailoRTDevice, shim_lib: Path) -> None:
    """Item 2: the shim set HAILO_LATENCY_MEASURE and batch 1 unless told otherwise."""
    with device.open(fake_hef(), RuntimeOptions()) as session:
        session.pipelined([np.zeros((1, 4, 4, 3), np.uint8)], 8, 4)
        assert session.hw_latency_ms() is None
    seen = counters(shim_lib)
    assert (seen["last_latency_flags"], seen["last_batch"]) == (0, -1)  # HAILO_DEFAULT_BATCH_SIZE left alone


def test_asked_latency_clears_after_each_read(device: HailoRTDevice, shim_lib: Path) -> None:
    """Item 2: the figure was cumulative since configure; HAILO_LATENCY_CLEAR_AFTER_GET is now set."""
    with device.open(fake_hef(), RuntimeOptions(hw_latency=True, batch_size=2)) as session:
        session.pipelined([np.zeros((1, 4, 4, 3), np.uint8)], 8, 4)
        assert (session.hw_latency_ms() or 0) > 0
    seen = counters(shim_lib)
    assert (seen["last_latency_flags"], seen["last_batch"]) == (3, 2)


def test_several_physical_inputs_configure_without_latency(device: HailoRTDevice, shim_lib: Path) -> None:
    """Item 2: configure failed with status 6 for such models; the shim counts the HEF's physical
    input streams (planes included) first, so the model configures once, without it."""
    with device.open(fake_hef(PLAIN + " planes=2"), RuntimeOptions(hw_latency=True)) as session:
        assert any("the model has 2 physical inputs" in note for note in session.notes)
        assert session.infer([np.ones((1, 4, 4, 3), np.uint8)])[0].shape == (1, 2, 2, 3)
    assert counters(shim_lib)["configures"] == 1


def test_on_chip_nms_outputs_are_not_asked_for_latency(device: HailoRTDevice, shim_lib: Path) -> None:
    with device.open(fake_hef("FAKEHEF in=4x4x3 out=2x2x3 out=2x2x3:nms"), RuntimeOptions(hw_latency=True)) as s:
        assert any("on-chip NMS" in note for note in s.notes)
    assert counters(shim_lib)["configures"] == 1


def test_nms_on_the_host_still_measures_hardware_latency(device: HailoRTDevice, shim_lib: Path) -> None:
    """Issue 25, item 8: any NMS output was refused, while HailoRT refuses only an output stream of
    order HAILO_NMS_ON_CHIP (resource_manager.cpp); NMS that HailoRT runs on the host is measured."""
    frame = np.zeros((1, 4, 4, 3), np.uint8)
    with device.open(fake_hef("FAKEHEF in=4x4x3 out=2x2x3:hostnms"), RuntimeOptions(hw_latency=True)) as s:
        assert not any("not measured" in note for note in s.notes)
        s.pipelined([frame], 8, 2)
        assert (s.hw_latency_ms() or 0) > 0
    assert counters(shim_lib)["last_latency_flags"] == 3


def test_several_quantization_params_are_read_as_float32(device: HailoRTDevice) -> None:
    """Item 3: get_quant_infos()[0] is INVALID_QUANT_INFO (scale 0) there; outputs were zeros."""
    with device.open(fake_hef("FAKEHEF in=4x4x3 out=2x2x3:multiquant"), RuntimeOptions()) as session:
        (out,) = session.outputs
        assert (out.dtype, out.scale, out.frame_bytes) == ("float32", None, 48)
        assert any("INVALID_QUANT_INFO" in note for note in session.notes)
        (values,) = session.infer([np.arange(48, dtype=np.uint8).reshape(1, 4, 4, 3)])
    assert values.dtype == np.float32 and np.any(values != 0)


def test_hef_layout_needs_no_device(shim_lib: Path, tmp_path: Path) -> None:
    """Item 4: layouts from the HEF itself (Hef::create and its vstream infos)."""
    hef = tmp_path / "m.hef"
    hef.write_text("FAKEHEF in=4x4x3 out=2x2x3 out=2x2x2:multiquant")
    inputs, outputs = hef_layouts(hef, str(shim_lib))
    assert [(t.name, t.shape, t.dtype, t.scale, t.zero_point) for t in inputs] == [
        ("fake/input0", (1, 4, 4, 3), "uint8", 1 / 128, 128)
    ]
    assert [(t.name, t.dtype, t.scale) for t in outputs] == [
        ("fake/output0", "uint8", 0.5),
        ("fake/output1", "float32", None),
    ]
    assert counters(shim_lib)["live_vdevices"] == 0


def test_every_session_of_a_process_shares_one_vdevice(shim_lib: Path) -> None:
    """Issue 25, item 1: each session created its own "UNIQUE" VDevice, so the second session of one
    process (compare's B, a ladder's next depth) failed with 74 on Hailo-10H. Now one per process."""
    first, second = HailoRTDevice(library=str(shim_lib)), HailoRTDevice(library=str(shim_lib))
    frame = [np.zeros((1, 4, 4, 3), np.uint8)]
    try:
        with (
            first.open(fake_hef(), RuntimeOptions()) as a,
            second.open(fake_hef(), RuntimeOptions()) as b,
            first.open(fake_hef(), RuntimeOptions()) as a_again,
        ):
            assert all(s.infer(frame)[0].shape == (1, 2, 2, 3) for s in (a, b, a_again))
            assert not a.notes[:-1]  # the same group as asked: nothing to say
    finally:
        first.release(), second.release()
    seen = counters(shim_lib)
    assert (seen["vdevice_creates"], seen["peak_live_vdevices"], seen["live_vdevices"]) == (1, 1, 0)


def test_a_second_vdevice_is_refused_as_the_server_refuses_it(shim_lib: Path) -> None:
    """The fake refuses a second "UNIQUE" VDevice (hailort_server.cpp): 74, or 73 when a device_id
    was given (vdevice_hrpc_client.cpp). One process asking for the device by id and without one
    holds two VDevices, which is what the shim's one-per-device_id still cannot merge."""
    anyone = HailoRTDevice(library=str(shim_lib))
    anyone.health()
    try:
        with pytest.raises(HailoRTError) as err:
            HailoRTDevice(library=str(shim_lib), device_id="fake/0").open(fake_hef(), RuntimeOptions())
        assert err.value.status == 73 and "HAILO_DEVICE_IN_USE" in str(err.value)
    finally:
        anyone.release()


def test_a_session_asking_another_group_shares_and_says_so(device: HailoRTDevice) -> None:
    with device.open(fake_hef(), RuntimeOptions(group_id="sweep")), device.open(fake_hef(), RuntimeOptions()) as s:
        assert any("created with group_id 'sweep', not the 'UNIQUE' asked for" in n for n in s.notes)


def test_architecture_mismatch_is_93(device: HailoRTDevice) -> None:
    """Item 8."""
    with pytest.raises(HailoRTError) as err:
        device.open(fake_hef(PLAIN + " arch=hailo8"), RuntimeOptions())
    assert err.value.status == 93 and "compile.hw_arch" in str(err.value)


def test_hailort_invalid_argument_is_not_a_buffer_error(shim_lib: Path) -> None:
    """Item 9: an unknown device id is HailoRT's 2, which the shim's own 2 used to shadow."""
    with pytest.raises(HailoRTError) as err:
        HailoRTDevice(library=str(shim_lib), device_id="usb/9").open(fake_hef(), RuntimeOptions())
    assert err.value.status == 2 and "HAILO_INVALID_ARGUMENT" in str(err.value)


@pytest.mark.parametrize("where", ["open", "layout", "run"])
def test_cpp_exceptions_stop_at_the_c_boundary(shim_lib: Path, tmp_path: Path, where: str) -> None:
    """Item 9: only configure was inside a try; an exception crossing extern "C" aborts the process.
    Run in a child process so that a missing catch fails the test instead of killing pytest."""
    hef = tmp_path / "m.hef"
    hef.write_text(f"{PLAIN} throw={where}")
    script = textwrap.dedent(f"""
        import numpy as np
        from loop.core.vocab import Artifact
        from loop.devices.base import RuntimeOptions
        from loop.devices.hailort import HailoRTDevice, HailoRTError
        device = HailoRTDevice(library={str(shim_lib)!r})
        try:
            with device.open(Artifact("hailo", open({str(hef)!r}, "rb").read(), ".hef", (), ()), RuntimeOptions()) as s:
                s.infer([np.zeros((1, 4, 4, 3), np.uint8)])
        except HailoRTError as exc:
            print("STATUS", exc.status, exc)
        """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "STATUS 1003" in done.stdout and f"throw={where}" in done.stdout


def test_last_error_text_belongs_to_its_thread(device: HailoRTDevice) -> None:
    """Item 9: the text was process-wide, so another thread's failure could replace it."""
    shim = device.shim()
    failed, other_done = threading.Event(), threading.Event()
    seen: dict[str, str] = {}

    def first() -> None:
        shim.binding.loop_hrt_layout(None, None, 0, None)  # fails: null handle
        failed.set()
        other_done.wait(10)
        seen["first"] = shim.last_error()

    def second() -> None:
        failed.wait(10)
        shim.binding.loop_hrt_hw_latency(None, None)  # fails: null argument
        other_done.set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert seen["first"].startswith("layout: null handle (status 1002)")


def test_health_reads_the_serial_without_a_length_and_survives_a_nul(
    device: HailoRTDevice, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 9: Hailo-10H leaves serial_number_length 0; a NUL in the board name cut the JSON short."""
    monkeypatch.setenv("FAKE_HAILORT_BOARD_NUL", "1")
    with device.open(fake_hef(), RuntimeOptions()):
        health = device.health()
        facts = json.loads(device.shim().text("loop_hrt_health", device._held()))
    assert (health.device_id, health.temperature_c, health.device_path) == ("FAKESERIAL01", 41.5, "fake/0")
    assert facts["board"] == "Hailo" and not any("unreadable" in w for w in health.warnings)


def test_health_reads_the_device_and_group_the_sessions_use(shim_lib: Path) -> None:
    """Issue 25, item 3: health with no session open opened a default VDevice: the first device of
    the host (not device_id's) in group "UNIQUE" (not group_id's), which on a shared Hailo-10H
    waits 5 s and fails. Now it reads through the process's VDevice, as the sessions will."""
    device = HailoRTDevice(library=str(shim_lib), device_id="fake/1")
    device.select(RuntimeOptions(group_id="sweep"))
    try:
        health = device.health()
        assert health.device_path == "fake/1" and not any("unreadable" in w for w in health.warnings)
        assert counters(shim_lib)["active_group"] == "sweep"
        with device.open(fake_hef(), RuntimeOptions(group_id="sweep")):
            device.health()
    finally:
        device.release()
    assert counters(shim_lib)["vdevice_creates"] == 1  # health's VDevice is the sessions' one


def test_a_timeout_reopens_the_session_once_and_a_second_one_ends_the_call(
    device: HailoRTDevice, shim_lib: Path
) -> None:
    """Issue 25, item 8: HAILO_TIMEOUT (4) had no hint and left the session dead (jobs in flight,
    nothing reopened). One timeout now reopens the session and retries; a second is one clear line."""
    fail_runs = ctypes.CDLL(str(shim_lib)).fake_hailort_fail_runs
    frame = [np.arange(48, dtype=np.uint8).reshape(1, 4, 4, 3)]
    with device.open(fake_hef(), RuntimeOptions()) as session:
        expected = session.infer(frame)[0]
        fail_runs(4, 1)
        assert np.array_equal(session.infer(frame)[0], expected)
        fail_runs(4, 1)
        assert session.pipelined(frame, 6, 2) > 0
        assert sum("HAILO_TIMEOUT (4)" in n for n in session.notes) == 2
        fail_runs(4, 2)
        with pytest.raises(HailoRTError) as err:
            session.infer(frame)
    assert err.value.status == 4 and "HAILO_TIMEOUT: the device did not answer in time" in str(err.value)
    assert counters(shim_lib)["configures"] == 4  # the first open and three reopens


def test_close_closes_the_handle_even_when_the_hef_cannot_be_removed(
    device: HailoRTDevice, shim_lib: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 25, item 8: the HEF folder went first, so a removal that raised (Windows refuses to delete
    a file HailoRT still has open) left the handle, and with it the device, held for good."""
    session = device.open(fake_hef(), RuntimeOptions())

    def refuse() -> None:
        raise PermissionError("the file is in use")

    monkeypatch.setattr(session.hef_dir, "cleanup", refuse)
    with pytest.raises(PermissionError):
        session.close()
    assert not session.handle and device.release()
    assert counters(shim_lib)["live_vdevices"] == 0


def test_a_tight_output_buffer_is_not_written_past(
    device: HailoRTDevice, monkeypatch: pytest.MonkeyPatch, shim_lib: Path
) -> None:
    """Item 9: the device may fill an output's last page (hailo/infer_model.hpp); a caller's buffer that
    does not end on one is written through the shim's own page-rounded buffer."""
    monkeypatch.setenv("FAKE_HAILORT_PAGE_TAIL", "1")
    block = page_buffer(64)
    block[:] = 0xAB
    frame = np.arange(48, dtype=np.uint8)
    with device.open(fake_hef(), RuntimeOptions()) as session:
        binding = session.shim.binding
        ins = (ctypes.c_void_p * 1)(frame.ctypes.data)
        outs = (ctypes.c_void_p * 1)(block.ctypes.data)
        status = binding.loop_hrt_infer(
            session.handle, ins, (ctypes.c_size_t * 1)(48), 1, outs, (ctypes.c_size_t * 1)(12), 1, 1000
        )
        assert status == 0
        assert np.all(block[12:] == 0xAB) and not np.all(block[:12] == 0xAB)
        session.infer([frame.reshape(1, 4, 4, 3)])  # the session's own buffers end on a page
    assert counters(shim_lib)["misaligned_outputs"] == 0


def test_dma_mappings_are_made_once_per_session(device: HailoRTDevice, shim_lib: Path) -> None:
    """Item 9: buffers were mapped and unmapped on every call."""
    frame = np.zeros((1, 4, 4, 3), np.uint8)
    with device.open(fake_hef(), RuntimeOptions(dma_map=True)) as session:
        for _ in range(3):
            session.infer([frame])
        session.pipelined([frame], 20, 2)
        session.pipelined([frame], 20, 2)
        during = counters(shim_lib)
    after = counters(shim_lib)
    # one input and one output staging buffer, plus one output per pipelined slot (2)
    assert (during["dma_maps"], during["dma_unmaps"]) == (4, 0)
    assert after["dma_unmaps"] == 4


def test_a_session_whose_reopen_failed_still_closes(device: HailoRTDevice, shim_lib: Path) -> None:
    """A timeout whose reopen fails (the HEF gone, here) leaves no handle; closing the session must
    still count it closed, or the device would never be free to release."""
    session = device.open(fake_hef(), RuntimeOptions())
    for hef in Path(session.hef_dir.name).iterdir():
        hef.unlink()
    ctypes.CDLL(str(shim_lib)).fake_hailort_fail_runs(4, 1)
    with pytest.raises(HailoRTError) as err:
        session.infer([np.zeros((1, 4, 4, 3), np.uint8)])
    assert err.value.status == 13 and not session.handle
    session.close()
    assert device.release() and counters(shim_lib)["live_vdevices"] == 0

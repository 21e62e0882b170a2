"""Fixtures for device tests, built once per session with the system compilers:

* the loopback: a C test double implementing shim/hailort_shim.sigs (not HailoRT);
* the real shim (shim/hailort_shim.cpp) built over a FAKE HailoRT (tests/devices/fake_hailort):
  the shim's own C++ runs, against a test double of libhailort (not HailoRT either).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

LOOPBACK_SOURCE = Path(__file__).parent / "loopback" / "loopback_shim.c"
FAKE_HAILORT = Path(__file__).parent / "fake_hailort"
SHIM_DIR = Path(__file__).resolve().parents[2] / "shim"
SHIM_SIGS = SHIM_DIR / "hailort_shim.sigs"


def _compile(out_dir: Path, name: str, *defines: str) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        pytest.skip("no C compiler (cc, gcc or clang) on PATH to build the loopback shim")
    suffix = ".dylib" if sys.platform == "darwin" else ".so"
    out = out_dir / f"lib{name}{suffix}"
    cmd = [compiler, "-std=c11", "-shared", "-fPIC", "-O1", *defines, "-o", str(out), str(LOOPBACK_SOURCE), "-lm"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out


@pytest.fixture(scope="session")
def loopback_shim_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Path of the loopback library (complete ABI)."""
    return _compile(tmp_path_factory.mktemp("loopback"), "loopback_shim")


@pytest.fixture(scope="session")
def loopback_shim_lib_missing_symbol(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The loopback built without ``loop_hrt_hw_latency``."""
    return _compile(tmp_path_factory.mktemp("loopback_omit"), "loopback_omit", "-DLOOPBACK_OMIT_HW_LATENCY")


@pytest.fixture(scope="session")
def shim_sigs_path() -> Path:
    return SHIM_SIGS


def _compile_shim_over_fake(out_dir: Path) -> Path:
    compiler = shutil.which("g++") or shutil.which("clang++")
    if compiler is None or sys.platform != "linux":
        pytest.skip("the real shim over the fake HailoRT needs g++ or clang++ on Linux")
    out = out_dir / "libhailort_shim.so"
    cmd = [
        compiler,
        "-std=c++17",
        "-shared",
        "-fPIC",
        "-O1",
        "-Wall",
        "-Wextra",
        f"-I{FAKE_HAILORT / 'include'}",
        "-o",
        str(out),
        str(SHIM_DIR / "hailort_shim.cpp"),
        str(FAKE_HAILORT / "fake_hailort.cpp"),
        str(FAKE_HAILORT / "fake_hef.cpp"),
        "-pthread",
        # The fake checks every aligned delete (the shim's page buffers) against the buffers its
        # in-flight jobs hold (fake_hailort.cpp, fake_hailort_stall_jobs).
        "-Wl,--wrap=_ZdlPvSt11align_val_t",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    shutil.copy(SHIM_SIGS, out_dir / SHIM_SIGS.name)
    return out


@pytest.fixture(scope="session")
def shim_over_fake_hailort(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real shim linked with the FAKE HailoRT, its .sigs beside it (one library)."""
    return _compile_shim_over_fake(tmp_path_factory.mktemp("shim_fake_hailort"))

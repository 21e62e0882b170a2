"""The real shim source as a build: against HailoRT's public headers (syntax only, when
HAILORT_INCLUDE points at <hailort>/hailort/libhailort/include), linked against a real libhailort
(when LOOP_HAILORT_LIB points at a shim built by shim/build_libhailort.sh), against Windows-style
min/max macros (always, over the FAKE HailoRT headers in tests/devices/fake_hailort), and through
its CMake file (with stand-in HailoRT package files). None of it runs on a Hailo device."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from loop.core.vocab import Artifact
from loop.devices.base import RuntimeOptions
from loop.devices.hailort import HailoRTDevice, HailoRTError
from loop.hailort.shim import CAUGHT_EXCEPTION, ShimCaller, load_shim
from loop.hailort.sigs import parse_sigs

SHIM = Path(__file__).resolve().parents[2] / "shim"
FAKE_INCLUDE = Path(__file__).parent / "fake_hailort" / "include"
# The standard headers come first: libstdc++'s c++config.h #undefs min and max the first time any
# of them is included, and libstdc++'s own code is not written to survive the macros (MSVC's STL is,
# and undefines nothing). Included first, they leave the macros in force for all that follows, as
# on Windows.
STANDARD_FIRST = "".join(
    f"#include <{h}>\n"
    for h in (
        "algorithm",
        "chrono",
        "cmath",
        "cstdint",
        "cstdio",
        "cstdlib",
        "cstring",
        "functional",
        "limits",
        "map",
        "memory",
        "new",
        "optional",
        "sstream",
        "string",
        "utility",
        "vector",
    )
)
MACROS = "#define min(a, b) (((a) < (b)) ? (a) : (b))\n#define max(a, b) (((a) > (b)) ? (a) : (b))\n"
# What Windows' headers do unless NOMINMAX is defined (minwindef.h, pulled in by winsock2.h).
WINDOWS_MINMAX = f"{STANDARD_FIRST}#ifndef NOMINMAX\n{MACROS}#endif\n"
FORCED_MINMAX = STANDARD_FIRST + MACROS


def _syntax(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["g++", "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", *args, str(SHIM / "hailort_shim.cpp")],
        capture_output=True,
        text=True,
    )


@pytest.mark.skipif(not os.environ.get("HAILORT_INCLUDE"), reason="HAILORT_INCLUDE is not set")
@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ on PATH")
def test_shim_compiles_against_hailort_headers() -> None:
    done = _syntax(f"-I{os.environ['HAILORT_INCLUDE']}")
    assert done.returncode == 0, done.stderr[-4000:]
    # HailoRT's own headers may warn (4.x does, on std::iterator); the shim itself must not.
    assert not re.search(r"hailort_shim\.cpp:\d+:\d+: warning", done.stderr), done.stderr[-4000:]


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ on PATH")
def test_shim_builds_with_windows_min_max_macros(tmp_path: Path) -> None:
    """Item 1: hailo/platform.h includes winsock2.h on Windows, whose min/max macros broke std::min(.

    1. A winsock2.h stand-in defining them unless NOMINMAX is set, included by the FAKE
       hailo/platform.h as HailoRT's is under MSVC: the shim must define NOMINMAX before HailoRT's headers.
    2. The macros forced on before anything (-include): the shim's own calls must survive them too.
    """
    (tmp_path / "winsock2.h").write_text(WINDOWS_MINMAX)
    (tmp_path / "forced_minmax.h").write_text(FORCED_MINMAX)
    through_platform = _syntax(f"-I{FAKE_INCLUDE}", f"-I{tmp_path}", "-DFAKE_HAILORT_SIMULATE_WINDOWS")
    assert through_platform.returncode == 0, through_platform.stderr[-4000:]
    forced = _syntax(f"-I{FAKE_INCLUDE}", "-include", str(tmp_path / "forced_minmax.h"))
    assert forced.returncode == 0, forced.stderr[-4000:]


def test_shim_exports_exactly_what_the_sigs_declare() -> None:
    declared = {s.name for s in parse_sigs((SHIM / "hailort_shim.sigs").read_text())}
    source = (SHIM / "hailort_shim.cpp").read_text()
    exported = set(re.findall(r"LOOP_HRT_EXPORT\s+[\w\s\*]+?\b(loop_hrt_\w+)\s*\(", source))
    assert exported == declared


@pytest.mark.skipif(
    not os.environ.get("LOOP_HAILORT_LIB"),
    reason="LOOP_HAILORT_LIB is not set (a shim linked against a real libhailort: "
    "shim/build_libhailort.sh prints its path)",
)
def test_shim_linked_against_a_real_libhailort(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every .sigs symbol resolves in the linked library (the check the seed ran on Windows), and with
    no Hailo device here, open fails with HailoRT's own status, as one clear line."""
    monkeypatch.setenv("HAILORT_LOGGER_PATH", str(tmp_path))  # where libhailort writes hailort.log
    library = Path(os.environ["LOOP_HAILORT_LIB"])
    binding = load_shim(library, SHIM / "hailort_shim.sigs")
    assert len(binding.functions) == len(parse_sigs((SHIM / "hailort_shim.sigs").read_text()))
    device = HailoRTDevice(library=str(library))
    with pytest.raises(HailoRTError) as err:
        device.open(Artifact("hailo", b"no device will read this", ".hef", (), ()), RuntimeOptions())
    status = err.value.status
    assert status is not None and 0 < status < CAUGHT_EXCEPTION - 3  # HailoRT's, not the shim's
    assert "\n" not in str(err.value) and str(err.value).startswith(f"HailoRT status {status} (")
    hef = tmp_path / "garbage.hef"
    hef.write_bytes(b"not a HEF")
    with pytest.raises(HailoRTError) as err:
        ShimCaller(binding).text("loop_hrt_hef_layout", str(hef).encode())
    assert err.value.status is not None and err.value.status < 1000


def _fake_hailort_package(root: Path, version: str) -> Path:
    """Stand-in HailoRT CMake package files (not HailoRT's): a version file as HailoRT's
    (SameMajorVersion) and an imported target to link."""
    folder = root / f"hailort-{version}"
    folder.mkdir()
    (folder / "HailoRTConfig.cmake").write_text("add_library(HailoRT::libhailort INTERFACE IMPORTED)\n")
    (folder / "HailoRTConfigVersion.cmake").write_text(
        f'set(PACKAGE_VERSION "{version}")\n'
        'string(REGEX MATCH "^[0-9]+" _major "${PACKAGE_VERSION}")\n'
        "if(PACKAGE_FIND_VERSION_MAJOR STREQUAL _major)\n  set(PACKAGE_VERSION_COMPATIBLE TRUE)\n"
        "else()\n  set(PACKAGE_VERSION_COMPATIBLE FALSE)\nendif()\n"
    )
    return folder


@pytest.mark.skipif(shutil.which("cmake") is None, reason="no cmake on PATH")
def test_cmake_asks_for_the_hailort_major_version(tmp_path: Path) -> None:
    """Item 1: find_package(HailoRT) accepted any version; Hailo's examples ask for 5."""

    def configure(version: str, *extra: str) -> subprocess.CompletedProcess[str]:
        package = _fake_hailort_package(tmp_path, version)
        return subprocess.run(
            ["cmake", "-S", str(SHIM), "-B", str(tmp_path / f"build-{version}"), f"-DHailoRT_DIR={package}", *extra],
            capture_output=True,
            text=True,
            timeout=300,
        )

    old = configure("4.23.0")
    assert old.returncode != 0 and "4.23.0" in old.stderr
    assert configure("5.2.0").returncode == 0


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash on PATH")
def test_build_script_downloads_nothing_and_names_what_is_missing(tmp_path: Path) -> None:
    """shim/build_libhailort.sh runs CMake disconnected; with no dependencies given it stops first."""
    script = SHIM / "build_libhailort.sh"
    assert "-DFETCHCONTENT_FULLY_DISCONNECTED=ON" in script.read_text()
    source = tmp_path / "hailort"
    (source / "hailort").mkdir(parents=True)
    (source / "hailort" / "CMakeLists.txt").write_text("")
    done = subprocess.run(["bash", str(script), str(source), str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 2 and "missing under" in done.stderr and "protobuf" in done.stderr
    assert not (source / "build-loop").exists()


CLEAN_PATH = "/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin"  # hailort's execute_cmake.cmake


def stand_in_tools(folder: Path) -> Path:
    """``cmake`` and ``g++`` stand-ins (not the tools) that log their arguments, one call a line, and
    leave the files the script reads next; the log they write."""
    log = folder / "calls"
    folder.mkdir()
    (folder / "cmake").write_text(
        "#!/bin/sh\n"
        f'printf "%s|" cmake "$@" >> {log}; echo >> {log}\n'
        'lib="$2/hailort/libhailort/src"\n'
        'if [ "$1" = --build ]; then mkdir -p "$lib"; touch "$lib/libhailort.so.5"; fi\n'
    )
    (folder / "g++").write_text(f'#!/bin/sh\nprintf "%s|" g++ "$@" >> {log}; echo >> {log}\n')
    for tool in ("cmake", "g++"):
        (folder / tool).chmod(0o755)
    return log


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash on PATH")
def test_build_script_hands_jobs_to_hailorts_configure_time_protoc_build(tmp_path: Path) -> None:
    """HailoRT builds protoc while configuring, in a wiped environment (MAKEFLAGS and
    CMAKE_BUILD_PARALLEL_LEVEL never reach it); under make it adds -j of every processor. Under Ninja
    its build takes CMAKE_EXTRA_BUILD_ARGS, so JOBS gets through where ninja is on HailoRT's PATH;
    elsewhere the script says the protoc build uses every processor."""
    source, deps = tmp_path / "hailort", tmp_path / "deps"
    (source / "hailort").mkdir(parents=True)
    (source / "hailort" / "CMakeLists.txt").write_text("")
    for name in ("protobuf", "spdlog", "readerwriterqueue", "xxhash", "eigen", "json", "minja", "cli11", "dotwriter"):
        (deps / name).mkdir(parents=True)
    log = stand_in_tools(tmp_path / "bin")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}", "JOBS": "3"}
    script = str(SHIM / "build_libhailort.sh")
    done = subprocess.run(["bash", script, str(source), str(deps)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    configure, build, _link = (line.split("|")[:-1] for line in log.read_text().splitlines())
    assert build[-2:] == ["-j", "3"]
    ninja = subprocess.run(["sh", "-c", "command -v ninja"], env={"PATH": CLEAN_PATH}, capture_output=True)
    if ninja.returncode == 0:
        assert configure[configure.index("-G") + 1] == "Ninja" and "-DCMAKE_EXTRA_BUILD_ARGS=--parallel;3" in configure
    else:
        assert "-G" not in configure and "protoc build will use all" in done.stderr

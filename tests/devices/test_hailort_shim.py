"""The real shim source against HailoRT's public headers (syntax only: no HailoRT library
is linked and nothing runs). Point HAILORT_INCLUDE at <hailort>/hailort/libhailort/include."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from loop.devices.sigs import parse_sigs

SHIM = Path(__file__).resolve().parents[2] / "shim"


@pytest.mark.skipif(not os.environ.get("HAILORT_INCLUDE"), reason="HAILORT_INCLUDE is not set")
@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ on PATH")
def test_shim_compiles_against_hailort_headers() -> None:
    include = os.environ["HAILORT_INCLUDE"]
    done = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", f"-I{include}",
                           str(SHIM / "hailort_shim.cpp")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    # HailoRT's own headers may warn (4.x does, on std::iterator); the shim itself must not.
    assert not re.search(r"hailort_shim\.cpp:\d+:\d+: warning", done.stderr), done.stderr[-4000:]


def test_shim_exports_exactly_what_the_sigs_declare() -> None:
    declared = {s.name for s in parse_sigs((SHIM / "hailort_shim.sigs").read_text())}
    source = (SHIM / "hailort_shim.cpp").read_text()
    exported = set(re.findall(r"LOOP_HRT_EXPORT\s+[\w\s\*]+?\b(loop_hrt_\w+)\s*\(", source))
    assert exported == declared

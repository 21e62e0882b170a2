"""The real HEF read two ways must agree: loop's own reader (loop/hailort/hef.py, no Hailo software)
and the shim's ``loop_hrt_hef_info``, which asks HailoRT's C API (``hailo_create_hef_file``,
``hailo_get_network_groups_infos``, ``hailo_hef_get_all_stream_infos``).

Through a real libhailort where ``LOOP_HAILORT_LIB`` points at a shim built by shim/build_libhailort.sh;
always through the FAKE HailoRT (tests/devices/fake_hailort/fake_hef.cpp, a test double, not HailoRT),
which reads the file the public way in C++ of its own: that checks the shim's marshalling of
``hailo_stream_info_t`` and the Python reader against a second reading. No device is used by either.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from real_hef import REAL_HEF

from loop.hailort.hef import FORMAT_ORDERS, TYPES, HefInfo, inspect_hef
from loop.hailort.shim import HailoRTError, hef_info


def ours(info: HefInfo) -> list[tuple[Any, ...]]:
    return [
        (g.name, s.name, s.direction, s.shape, s.order, s.dtype, s.zero_point, np.float32(s.scale), s.limvals)
        for g in info.groups
        for s in (*g.inputs, *g.outputs)
    ]


def theirs(answer: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (
            g["name"],
            s["name"],
            s["direction"],
            tuple(s["shape"]),
            FORMAT_ORDERS[s["order"]],
            TYPES[s["type"]],  # hailo_format_type_t UINT8 1, UINT16 2: the same numbers as data bytes
            float(s["zero_point"]),
            np.float32(s["scale"]),
            tuple(np.float32(v).item() for v in s["limvals"]),
        )
        for g in answer["groups"]
        for s in g["streams"]
    ]


def agree(library: Path) -> None:
    mine, answer = inspect_hef(REAL_HEF), hef_info(REAL_HEF, str(library))
    assert len(answer["groups"]) == len(mine.groups)
    assert theirs(answer) == [(*row[:8], tuple(np.float32(v).item() for v in row[8])) for row in ours(mine)]


def test_the_fake_hailort_reads_the_real_hef_as_loop_does(shim_over_fake_hailort: Path) -> None:
    agree(shim_over_fake_hailort)


def test_a_file_that_is_no_hef_is_hailort_status_92(shim_over_fake_hailort: Path, tmp_path: Path) -> None:
    """hef.cpp parse_hef_file: a version it does not know (here " and") is HAILO_HEF_NOT_SUPPORTED."""
    path = tmp_path / "x.hef"
    path.write_bytes(b"ONNX and more")
    with pytest.raises(HailoRTError) as err:
        hef_info(path, str(shim_over_fake_hailort))
    assert err.value.status == 92


@pytest.mark.skipif(
    not os.environ.get("LOOP_HAILORT_LIB"),
    reason="LOOP_HAILORT_LIB is not set (a shim linked against a real libhailort: shim/build_libhailort.sh)",
)
def test_libhailort_reads_the_real_hef_as_loop_does() -> None:
    agree(Path(os.environ["LOOP_HAILORT_LIB"]))

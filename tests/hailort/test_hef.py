"""Reading a HEF with no device and no Hailo software (issue 33: ``loop inspect``).

The figures of the one real HEF (tests/data/hailo, in the repository) were read by this reader and
cross-checked through the shim's C-API call (tests/devices/test_hef_through_shim.py). The small HEFs
written here are built with the reader's own message definitions, so they test the derivation
(header checks, transposition, planes, per-feature scales, fit), not the field numbers: the real
file does that.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import io
import random
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xxhash
from real_hef import REAL_HEF, REAL_HEF_SHA256, real_hef_sha256

from loop.core.errors import LoopError
from loop.hailort.hef import FORMAT_ORDERS, describe, inspect_hef
from loop.hailort.hef_header import CHUNK, HefFormatError, read_header
from loop.hailort.hef_proto import hef_message_class

MAGIC = 0x01484546


def hef_file(body: bytes, version: int = 1, ccws: bytes = b"\x00" * 16) -> bytes:
    """A HEF as hef_internal.hpp lays out each header version (big-endian), around ``body``."""
    residue = body + (b"" if version == 0 else ccws)
    tails = {
        0: lambda: struct.pack(">I16s", 0, hashlib.md5(residue).digest()),
        1: lambda: struct.pack(">IQI", zlib.crc32(residue), len(ccws), 0),
        2: lambda: struct.pack(">QQQQ", xxh(residue), len(ccws), 0, 0),
        3: lambda: struct.pack(">QQIQQQ", 0, len(ccws), 0, 0, xxh(body), 0),  # the body's own hash set
    }
    return struct.pack(">III", MAGIC, version, len(body)) + tails[version]() + residue


def xxh(data: bytes) -> int:
    return xxhash.xxh3_64_intdigest(data)


def edge(context: Any, name: str, direction: int, hwc: tuple[int, int, int], fmt: int = 0) -> Any:
    layer = context.metadata.edge_layers.add()
    layer.direction = direction
    info = layer.layer_info
    info.name = name
    base = info.edge_layer_base
    base.height, base.width, base.features = hwc
    base.padded_height, base.padded_width, base.padded_features = hwc
    base.format, base.data_bytes = fmt, 1
    info.numeric_info.qp_zp, info.numeric_info.qp_scale = 3.0, 0.5
    return layer


def small_body(transposed: bool = False, per_feature: bool = False) -> bytes:
    hef = hef_message_class()()
    hef.header.hw_arch, hef.header.sdk_version_str = 103, "3.33.0"  # PROTO__HW_ARCH__HAILO1XH
    if per_feature:
        hef.extensions.add(type_index=25, name="OUTPUT_SCALE_PER_FEATURE")
    group = hef.network_groups.add()
    group.network_group_metadata.network_group_name = "net"
    group.network_group_metadata.transposed_net = transposed
    context = group.contexts.add()
    edge(context, "net/in", 0, (4, 6, 3))
    out = edge(context, "net/out", 1, (2, 5, 8))
    out.layer_info.numeric_info.qp_scales.extend([0.5] * 8)
    planes = context.metadata.edge_layers.add()
    planes.layer_planes.name = "net/nv12"
    for i, hwc in enumerate([(4, 4, 1), (2, 2, 2)]):
        plane = planes.layer_planes.planes.add().layer_info
        plane.name = f"net/nv12_{i}"
        plane.edge_layer_base.height, plane.edge_layer_base.width, plane.edge_layer_base.features = hwc
        plane.edge_layer_base.data_bytes = 1
    inner = edge(context, "net/inner", 1, (1, 1, 1))
    inner.context_switch_info.edge_connection_type = 1  # INTERMEDIATE: not a stream
    return bytes(hef.SerializeToString())


def write(tmp_path: Path, data: bytes, name: str = "m.hef") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_format_orders_are_hailort_5_2s_by_value() -> None:
    """hailort.h v5.2.0 hailo_format_order_t: the values the C API answers, through the last one."""
    named = {1: "NHWC", 6: "NC", 9: "HAILO_NMS", 19: "HAILO_YYYYUV", 21: "HAILO_NMS_ON_CHIP"}
    named |= {22: "HAILO_NMS_BY_CLASS", 23: "HAILO_NMS_BY_SCORE"}
    assert {value: FORMAT_ORDERS[value] for value in named} == named and len(FORMAT_ORDERS) == 24


def test_the_real_hef_is_in_the_repository_as_shipped() -> None:
    """A fresh clone reads it: nothing beside the clone is needed, and no test of it skips."""
    assert REAL_HEF.is_file() and real_hef_sha256() == REAL_HEF_SHA256
    assert (REAL_HEF.parent / "LICENSE-hailo-rpi5-examples").read_text().startswith("MIT License")


def test_the_real_hef_holds_one_group_and_its_two_streams() -> None:
    info = inspect_hef(REAL_HEF)
    assert info.size == 3_503_356
    head = info.header
    assert (head.version, head.header_bytes, head.proto_bytes, head.extra_bytes) == (1, 28, 997_288, 2_506_040)
    assert (head.checksum, head.checksum_value, head.checked) == ("crc32", "a7bc7593", True)
    assert (info.hw_arch, info.sdk_version) == ("hailo8p", "3.29.0")
    (group,) = info.groups
    assert (group.name, group.networks, group.contexts) == (
        "arcface_mobilefacenet",
        ("arcface_mobilefacenet/arcface_mobilefacenet",),
        1,
    )
    (inp,), (out,) = group.inputs, group.outputs
    assert (inp.name, inp.shape, inp.order) == ("arcface_mobilefacenet/input_layer1", (112, 112, 3), "NHWC")
    assert inp.dtype == "uint8"
    assert (inp.zero_point, inp.scale, inp.limvals) == (0.0, 1.0, (0.0, 255.0))
    assert (out.name, out.shape, out.order, out.dtype) == ("arcface_mobilefacenet/fc1", (1, 1, 512), "NC", "uint8")
    assert out.zero_point == 144.0 and np.float32(out.scale) == np.float32(0.0167389177)
    assert np.allclose(out.limvals, (-2.41040421, 1.85801983))
    assert (out.original_names, out.scales_per_feature) == (("MatMul_95", "BatchNormalization_96"), 0)


def test_the_real_hef_on_hailo10h_fits_by_size_but_not_by_architecture() -> None:
    """HailoRT sends a Hailo-10H the whole HEF and the device allocates a buffer of its size: the
    HEF's size against 8 GiB (an upper bound). This one is a Hailo-8 family HEF, which it refuses."""
    fit = inspect_hef(REAL_HEF, "hailo10h").fit
    assert fit is not None
    assert (fit.hef_bytes, fit.device_bytes, fit.fits, fit.architecture_ok) == (3_503_356, 8 * 2**30, True, False)
    assert "3,503,356 B <= 8,589,934,592 B" in fit.arithmetic and "upper bound" in fit.arithmetic
    assert "HAILO_HEF_NOT_COMPATIBLE_WITH_DEVICE" in fit.arithmetic
    assert inspect_hef(REAL_HEF, "hailo8").fit.architecture_ok  # type: ignore[union-attr]


def test_streams_are_derived_as_hailort_derives_them(tmp_path: Path) -> None:
    """hef.cpp: a transposed network swaps height and width; planes are one stream each; an edge
    between contexts is no stream; with scales per feature an output's single scale is invalid."""
    info = inspect_hef(write(tmp_path, hef_file(small_body(transposed=True, per_feature=True))), "hailo10h")
    (group,) = info.groups
    assert [(s.name, s.shape) for s in group.inputs] == [
        ("net/in", (6, 4, 3)),
        ("net/nv12_0", (4, 4, 1)),
        ("net/nv12_1", (2, 2, 2)),
    ]
    (out,) = group.outputs
    assert (out.name, out.shape, out.scale, out.scales_per_feature) == ("net/out", (5, 2, 8), 0.0, 8)
    assert info.fit is not None and info.fit.architecture_ok and info.fit.fits
    assert any("8 scales per feature" in line for line in describe(info))


def test_a_version_0_header_is_checked_by_md5(tmp_path: Path) -> None:
    good = hef_file(small_body(), version=0)
    assert inspect_hef(write(tmp_path, good)).header.checksum == "md5"
    bad = good[:-1] + bytes([good[-1] ^ 1])
    with pytest.raises(LoopError, match="md5 does not match"):
        inspect_hef(write(tmp_path, bad, "bad.hef"))


@pytest.mark.parametrize("version", [2, 3])
def test_versions_2_and_3_are_checked_by_xxh3(tmp_path: Path, version: int) -> None:
    """hef.cpp: version 2 hashes all after the header; version 3 with proto_xxh3_64bits set only the body."""
    good = hef_file(small_body(), version=version, ccws=b"\x07" * 300)
    info = inspect_hef(write(tmp_path, good))
    assert (info.header.version, info.header.checksum, info.header.checked) == (version, "xxh3-64", True)
    body_byte = info.header.header_bytes + 3
    bad = good[:body_byte] + bytes([good[body_byte] ^ 1]) + good[body_byte + 1 :]
    with pytest.raises(LoopError, match="xxh3-64 does not match"):
        inspect_hef(write(tmp_path, bad, "bad.hef"))


# XXH3_64bits (seed 0), as HailoRT calls it, from libxxhash 0.8.1 on Debian: lengths on each of xxHash's paths.
KNOWN = {0: 0x2D06800538D394C2, 241: 0x07525DBC14902C7F, 1024: 0xE2898655DB7BC9EE, 5000: 0x82C9E6E5B7476DC8}


def pattern(n: int) -> bytes:
    return bytes((i * 31 + 7) % 251 for i in range(n))


def version_2(residue: bytes, stored: int) -> io.BytesIO:
    """A version 2 header over ``residue`` (all of it CCWs, no body): read_header checks only the hash."""
    return io.BytesIO(struct.pack(">IIIQQQQ", MAGIC, 2, 0, stored, len(residue), 0, 0) + residue)


@pytest.mark.parametrize("length", sorted(KNOWN))
def test_xxh3_is_hailorts_on_known_answers(length: int) -> None:
    data = version_2(pattern(length), KNOWN[length])
    assert read_header(data, len(data.getvalue())).checksum_value == f"{KNOWN[length]:016x}"


def test_xxh3_agrees_with_libxxhash_on_every_path() -> None:
    """Short spans (up to 240 bytes) were left unchecked by loop's own XXH3; every span is checked now."""
    name = ctypes.util.find_library("xxhash")
    if name is None:
        pytest.skip("libxxhash is not installed (the known answers above still ran)")
    lib = ctypes.CDLL(name)
    lib.XXH3_64bits.restype, lib.XXH3_64bits.argtypes = ctypes.c_uint64, [ctypes.c_char_p, ctypes.c_size_t]
    rng = random.Random(33)
    for length in (1, 3, 4, 8, 9, 16, 17, 128, 129, 240, 241, 1024, 1025, 2049, 3 * CHUNK + 17):
        data = rng.randbytes(length)
        file = version_2(data, lib.XXH3_64bits(data, length))
        header = read_header(file, len(file.getvalue()))
        assert header.checked, length


def test_a_short_span_is_checked_too() -> None:
    good = version_2(pattern(100), xxh(pattern(100)))
    assert read_header(good, len(good.getvalue())).checked
    bad = version_2(pattern(100), xxh(pattern(100)) ^ 1)
    with pytest.raises(HefFormatError, match="xxh3-64 does not match"):
        read_header(bad, len(bad.getvalue()))


class Reads(io.BytesIO):
    """A file that remembers the largest read asked of it."""

    largest = 0

    def read(self, size: int | None = -1) -> bytes:
        self.largest = max(self.largest, size if size is not None and size >= 0 else len(self.getvalue()))
        return super().read(size)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_a_large_file_is_hashed_in_chunks(version: int) -> None:
    data = hef_file(b"", version=version, ccws=b"\x05" * (3 * CHUNK + 5))
    file = Reads(data)
    read_header(file, len(data))
    assert file.largest <= CHUNK


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda data: b"ONNX" + data[4:], "not a HEF"),
        (lambda data: b"\x01HE", "truncated"),
        (lambda data: data[:-5], "truncated or padded"),
        (lambda data: data[:30] + bytes([data[30] ^ 0xFF]) + data[31:], "crc32 does not match"),
        (lambda data: data[:4] + struct.pack(">I", 7) + data[8:], "version 7"),
    ],
)
def test_a_damaged_file_is_one_error_naming_it(tmp_path: Path, damage: Any, said: str) -> None:
    path = write(tmp_path, damage(hef_file(small_body())))
    with pytest.raises(LoopError) as err:
        inspect_hef(path)
    assert str(path) in str(err.value) and said in str(err.value)
    assert "\n" not in str(err.value)


def test_a_body_that_is_no_protobuf_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, hef_file(b"\xff\xff\xff\xff"))  # a checksum that matches, over no message
    with pytest.raises(LoopError, match="protobuf body does not parse"):
        inspect_hef(path)


def test_an_unknown_device_is_refused() -> None:
    with pytest.raises(LoopError, match="unknown device 'hailo99'"):
        inspect_hef(REAL_HEF, "hailo99")

"""What a HEF holds, read from the file alone: no device, no Hailo software (``loop inspect``).

The header is checked as HailoRT checks it (:mod:`loop.hailort.hef_header`); the body is decoded
with :mod:`loop.hailort.hef_proto`. The streams are HailoRT's *stream infos* (``hailo_stream_info_t``,
what ``hailo_hef_get_all_stream_infos`` answers), derived as HailoRT v5.2.0 derives them in
``libhailort/src/hef/hef.cpp`` (``fill_core_ops``, ``HefUtils::fill_layer_info``,
``fill_layer_info_with_base_info``) and ``core_op_metadata.cpp`` (boundary layers of every context,
inputs first): name, direction, shape (height, width, features; swapped when transposed), the device's
format order (``HailoRTDefaults::get_device_format_order``), type from the data bytes, and the
quantization (``qp_zp``, ``qp_scale``, ``limvals``).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError

from loop.core.errors import LoopError
from loop.hailort.hef_header import HefFormatError, HefHeader, read_header
from loop.hailort.hef_proto import hef_message_class

# hef.proto ProtoHEFHwArch
HW_ARCHS = {0: "hailo8", 1: "hailo8p", 2: "hailo8r", 3: "hailo8l", 4: "hailo15m", 6: "hailo15l", 103: "hailo1xh"}
HW_ARCHS.update({100: "sage_a0", 101: "sage_b0", 102: "paprika_b0", 104: "ginger", 105: "lavender", 106: "pluto"})
HW_ARCHS[108] = "mars"
# device_internal.cpp (DeviceBase::hef_arch_to_device_compatible_archs), turned round: the HEF
# architectures each device accepts.
COMPATIBLE: dict[str, frozenset[str]] = {
    "hailo8": frozenset({"hailo8", "hailo8p", "hailo8r", "sage_b0", "paprika_b0", "hailo8l"}),
    "hailo8l": frozenset({"hailo8l"}),
    "hailo10h": frozenset({"hailo1xh", "ginger", "lavender", "hailo15m"}),
    "hailo15h": frozenset({"hailo1xh", "ginger", "lavender", "hailo15m"}),
    "hailo15m": frozenset({"hailo15m"}),
    "hailo15l": frozenset({"pluto", "hailo15l"}),
    "hailo12l": frozenset({"mars"}),
}
# What a device can allocate for the HEF, and where the figure comes from. On Hailo-10H HailoRT sends
# the whole file in one call and the device's server allocates one DMA buffer of the HEF's size
# (vdevice_hrpc_client.cpp create_infer_model; hailort_server.cpp VDeviceCreateInferModelHandler).
DEVICE_BYTES: dict[str, tuple[int, str]] = {
    "hailo10h": (
        8 * 2**30,
        "8 GiB, the LPDDR4 on the seed's board (ASUS UGen300): an upper bound, unconfirmed as what the "
        "device's server can allocate, which shares that memory with all else it holds",
    ),
}
# HailoRTDefaults::get_device_format_order: the compiler's format number -> hailo_format_order_t.
DEVICE_ORDERS = {0: "NHWC", 1: "NHCW", 2: "NC", 3: "FCR", 4: "BAYER_RGB", 5: "NHW", 6: "HAILO_NMS_ON_CHIP"}
DEVICE_ORDERS.update({7: "F8CR", 8: "RGB888", 11: "YUY2", 13: "NHWC", 14: "HAILO_YYUV", 15: "HAILO_YYVU"})
DEVICE_ORDERS[16] = "HAILO_YYYYUV"
# hailort.h hailo_format_order_t, by value (what the C API answers), as v5.2.0 declares it: 22 and 23
# are host-side NMS layouts, so the C API may answer them for a stream a user asked to read that way.
FORMAT_ORDERS = (
    *("AUTO", "NHWC", "NHCW", "FCR", "F8CR", "NHW", "NC", "BAYER_RGB", "12_BIT_BAYER_RGB", "HAILO_NMS", "RGB888"),
    *("NCHW", "YUY2", "NV12", "NV21", "HAILO_YYUV", "HAILO_YYVU", "RGB4", "I420", "HAILO_YYYYUV"),
    *("HAILO_NMS_WITH_BYTE_MASK", "HAILO_NMS_ON_CHIP", "HAILO_NMS_BY_CLASS", "HAILO_NMS_BY_SCORE"),
)
TYPES = {1: "uint8", 2: "uint16"}  # HailoRTCommon::get_format_type(data bytes)
NMS_FORMAT, NC_ORDER, BBOX_PARAMS = 6, "NC", 5  # BBOX_PARAMS: sizeof(hailo_bbox_t) / sizeof(uint16_t)
NET_FLOW, SCALE_PER_FEATURE = 13, 25  # hef.proto ProtoHEFExtensionType


@dataclass(frozen=True)
class HefStream:
    name: str
    direction: str  # "input" (host to device) or "output"
    shape: tuple[int, int, int]  # height, width, features as HailoRT reports them
    padded_shape: tuple[int, int, int]  # the HEF's padded height, width, features
    order: str  # hailo_format_order_t without its prefix
    dtype: str
    zero_point: float
    scale: float  # 0 when the scales are per feature (HailoRT's INVALID_QUANT_INFO)
    limvals: tuple[float, float]
    scales_per_feature: int  # 0 unless the HEF quantizes this output per feature
    network: str
    original_names: tuple[str, ...]


@dataclass(frozen=True)
class HefGroup:
    name: str
    networks: tuple[str, ...]
    contexts: int
    bottleneck_fps: float
    inputs: tuple[HefStream, ...]
    outputs: tuple[HefStream, ...]


@dataclass(frozen=True)
class HefFit:
    device: str
    architecture_ok: bool
    hef_bytes: int
    device_bytes: int | None
    fits: bool | None  # None: no figure for this device
    arithmetic: str
    source: str  # where the device's figure comes from, and how sure it is


@dataclass(frozen=True)
class HefInfo:
    path: str
    size: int
    header: HefHeader
    hw_arch: str
    sdk_version: str
    extensions: tuple[str, ...]
    groups: tuple[HefGroup, ...]
    fit: HefFit | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values (lists, not tuples): what ``loop inspect --json`` prints."""
        return dict(json.loads(json.dumps(asdict(self))))


def inspect_hef(path: Path | str, device: str | None = None) -> HefInfo:
    """Everything ``loop inspect`` reports of the HEF at ``path``; raises :class:`LoopError` naming
    the file and what is wrong when it is not a HEF HailoRT would read."""
    path = Path(path)
    try:
        info = _read(path)
    except HefFormatError as exc:
        raise LoopError(str(exc), file=str(path)) from None
    except OSError as exc:
        raise LoopError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
    return info if device is None else _with_fit(info, device)


def _read(path: Path) -> HefInfo:
    size = path.stat().st_size
    with path.open("rb") as file:
        header = read_header(file, size)
        body = file.read(header.proto_bytes)
    message = hef_message_class()()
    try:
        message.ParseFromString(body)
    except DecodeError:
        raise HefFormatError("the protobuf body does not parse (a damaged or foreign file)") from None
    extensions = {int(e.type_index) for e in message.extensions}
    groups = tuple(_group(g, extensions) for g in message.network_groups)
    if not groups:
        raise HefFormatError("the body holds no network group")
    return HefInfo(
        str(path),
        size,
        header,
        HW_ARCHS.get(message.header.hw_arch, f"unknown ({message.header.hw_arch})"),
        message.header.sdk_version_str,
        tuple(e.name for e in message.extensions),
        groups,
    )


def _core_op(group: Any, extensions: set[int]) -> Any:
    """hef.cpp fill_core_ops: the core op of ``ops`` where HAILO_NET_FLOW is on, else the group's own
    fields; a core op with no contexts of its own stands for its first partial (layout) one."""
    core = group
    if NET_FLOW in extensions:
        core = next((op.core_op for op in group.ops if op.HasField("core_op")), group)
    partials = list(getattr(core, "partial_core_ops", ())) or list(getattr(core, "partial_network_groups", ()))
    if not core.contexts and partials:
        first = partials[0]
        return first.core_op if hasattr(first, "core_op") else first.network_group
    return core


def _group(group: Any, extensions: set[int]) -> HefGroup:
    core = _core_op(group, extensions)
    meta = core.network_group_metadata
    name = meta.network_group_name or group.network_group_name
    networks = tuple(core.networks_names) or (name,)
    streams = [s for c in core.contexts for s in _boundary(c, meta, networks, name, extensions)]
    return HefGroup(
        name,
        tuple(f"{name}/{n}" for n in networks),
        len(core.contexts),
        float(meta.bottleneck_fps),
        tuple(s for s in streams if s.direction == "input"),
        tuple(s for s in streams if s.direction == "output"),
    )


def _boundary(context: Any, meta: Any, networks: tuple[str, ...], group: str, ext: set[int]) -> list[HefStream]:
    out = []
    for edge in context.metadata.edge_layers:
        if edge.context_switch_info.edge_connection_type != 0:  # PROTO__EDGE_CONNECTION_TYPE__BOUNDARY
            continue
        network = f"{group}/{networks[edge.network_index] if edge.network_index < len(networks) else group}"
        direction = "output" if edge.direction == 1 else "input"
        if edge.HasField("layer_planes"):  # one physical stream per plane
            out += [_stream(p.layer_info, direction, meta, network, ext) for p in edge.layer_planes.planes]
        elif edge.HasField("layer_mux"):
            out.append(_mux(edge.layer_mux, direction, meta, network))
        else:
            out.append(_stream(edge.layer_info, direction, meta, network, ext))
    return out


def _shape(base: Any, order: str, transposed: bool) -> tuple[int, int, int]:
    if base.format == NMS_FORMAT:
        nms = base.additional_info.nms_info
        return (int(nms.number_of_classes), BBOX_PARAMS, int(nms.max_output_size * nms.input_division_factor))
    if transposed and order != NC_ORDER:
        return (base.width, base.height, base.features)
    return (base.height, base.width, base.features)


def _common(base: Any, name: str) -> tuple[str, str]:
    order = DEVICE_ORDERS.get(base.format)
    dtype = TYPES.get(base.data_bytes)
    if order is None or dtype is None:
        raise HefFormatError(f"stream '{name}' has format {base.format} and {base.data_bytes} data bytes, unknown")
    return order, dtype


def _stream(info: Any, direction: str, meta: Any, network: str, ext: set[int]) -> HefStream:
    base, numeric = info.edge_layer_base, info.numeric_info
    order, dtype = _common(base, info.name)
    by_feature = SCALE_PER_FEATURE in ext and direction == "output"
    per_feature = len(numeric.qp_scales) if by_feature else 0
    # hef.cpp fill_layer_info: with scales per feature an output's single quant info is INVALID_QUANT_INFO
    zero_point, scale = (0.0, 0.0) if by_feature else (numeric.qp_zp, numeric.qp_scale)
    return HefStream(
        info.name,
        direction,
        _shape(base, order, meta.transposed_net or info.transposed),
        (base.padded_height, base.padded_width, base.padded_features),
        order,
        dtype,
        float(zero_point),
        float(scale),
        (float(numeric.limvals_min), float(numeric.limvals_max)),
        per_feature,
        network,
        tuple(info.original_names),
    )


def _mux(mux: Any, direction: str, meta: Any, network: str) -> HefStream:
    base = mux.edge_layer_base
    order, dtype = _common(base, mux.name)
    shape = _shape(base, order, meta.transposed_net)
    padded = (base.padded_height, base.padded_width, base.padded_features)
    return HefStream(mux.name, direction, shape, padded, order, dtype, 0.0, 0.0, (0.0, 0.0), 0, network, ())


def device_memory(device: str) -> tuple[int | None, str]:
    """What ``device`` can allocate for a HEF and where the figure comes from; (None, "") for a
    known device with no figure. An unknown device raises :class:`LoopError`."""
    if device not in COMPATIBLE:
        raise LoopError(f"unknown device '{device}' (known: {', '.join(sorted(COMPATIBLE))})")
    return DEVICE_BYTES.get(device, (None, ""))


def _with_fit(info: HefInfo, device: str) -> HefInfo:
    capacity, source = device_memory(device)
    arch_ok = info.hw_arch in COMPATIBLE[device]
    fits = None if capacity is None else info.size <= capacity
    if capacity is None:
        arithmetic = f"no figure for what {device} can allocate for a HEF: fit by size not judged"
    else:
        sign = "<=" if fits else ">"
        arithmetic = (
            f"HEF {info.size:,} B {sign} {capacity:,} B ({capacity / 2**30:g} GiB, an upper bound): "
            f"{'fits' if fits else 'does not fit'}, {_share(info.size, capacity)} of it"
        )
    if arch_ok:
        arithmetic += f"; {device} runs {info.hw_arch} HEFs"
    else:
        arithmetic += f"; but {device} refuses {info.hw_arch} HEFs (HAILO_HEF_NOT_COMPATIBLE_WITH_DEVICE)"
    return replace(info, fit=HefFit(device, arch_ok, info.size, capacity, fits, arithmetic, source))


def _share(size: int, capacity: int) -> str:
    share = size / capacity * 100
    return f"{share:.3g}%" if math.isfinite(share) else "?"


def describe(info: HefInfo) -> list[str]:
    """``loop inspect``'s text: one line per fact, then one per stream."""
    head = info.header
    check = f"{head.checksum} ok"
    lines = [
        f"{info.path}: {info.size:,} bytes, HEF format version {head.version} (header {head.header_bytes} B, "
        f"body {head.proto_bytes:,} B, {head.extra_bytes:,} B after it; {check})",
        f"architecture {info.hw_arch}, Dataflow Compiler {info.sdk_version or '?'}",
    ]
    for group in info.groups:
        lines.append(
            f"network group {group.name}: {group.contexts} context(s), "
            f"networks {', '.join(group.networks)}, bottleneck {group.bottleneck_fps:,.1f} fps (compiler's estimate)"
        )
        lines += [f"  {_stream_line(s)}" for s in (*group.inputs, *group.outputs)]
    if info.fit is not None:
        lines.append(f"on {info.fit.device}: {info.fit.arithmetic}")
        lines += [f"  the device's figure: {info.fit.source}"] if info.fit.source else []
    return lines


def _stream_line(s: HefStream) -> str:
    quant = (
        f"{s.scales_per_feature} scales per feature"
        if s.scales_per_feature
        else f"zero point {s.zero_point:g}, scale {s.scale:.9g}"
    )
    shape, (low, high) = "x".join(map(str, s.shape)), s.limvals
    return f"{s.direction:6} {s.name}: {shape} {s.order} {s.dtype}, {quant}, range [{low:.9g}, {high:.9g}]"

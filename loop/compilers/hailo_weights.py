"""Precision per DFC layer, the weights at that precision, and the seed's first number: does the
compiled network fit the device?

On Hailo-10H that is judged as HailoRT loads a network: the client sends the whole HEF in one call
and the device's server allocates one DMA buffer of the HEF's size (hailort v5.2.0
``vdevice_hrpc_client.cpp``, ``hailort_server.cpp``). A HEF that does not fit fails when the model
is configured; it never streams. So the HEF's size against what the device can allocate decides,
known once the compile has run and before any device work (docs/hailo.md, "Residency").
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from loop.hailort.hef import DEVICE_BYTES

DEFAULT_BITS = (8, 8)  # a8_w8, the mode the DFC's model scripts write when they raise or lower one
_QUANT_PARAM = re.compile(r"^\s*quantization_param\(\s*(\[[^\]]*\]|\{[^}]*\}|[^,\s()]+)\s*,(.*)\)\s*$")
_MODE = re.compile(r"precision_mode\s*=\s*a(\d+)_w(\d+)")

Bits = tuple[int, int]  # (activation bits, weight bits)


def _selected(selector: str, layers: Sequence[str]) -> list[str]:
    """The layers a model-script selector names: ``conv1``, ``[conv1, conv2]`` or ``{conv*}``."""
    if selector.startswith("{"):
        return [name for name in layers if fnmatch.fnmatchcase(name, selector.strip("{} "))]
    names = [n.strip().split("/")[-1] for n in selector.strip("[] ").split(",")]
    return [n for n in names if n]


def script_precisions(script: str, layers: Sequence[str]) -> dict[str, Bits]:
    """``(activation, weight)`` bits by DFC layer from ``quantization_param(..., precision_mode=aX_wY)``
    lines (hailo_model_zoo writes ``a8_w4`` and ``a16_w16`` so); a later line wins, as a script runs."""
    found: dict[str, Bits] = {}
    for line in script.splitlines():
        match = _QUANT_PARAM.match(line)
        mode = _MODE.search(match.group(2)) if match else None
        if match and mode:
            for name in _selected(match.group(1), layers):
                found[name] = (int(mode.group(1)), int(mode.group(2)))
    return found


def hn_model_layers(runner: Any) -> dict[str, tuple[int, Bits]] | None:
    """Weight count and bits by layer as the DFC holds them, None when this DFC cannot say:
    Hailo's own compression inspector reads ``layer.weights`` and
    ``layer.precision_config.precision_mode.value`` over ``runner.get_hn_model().stable_toposort()``."""
    try:
        layers = list(runner.get_hn_model().stable_toposort())
        found = {}
        for layer in layers:
            mode = _MODE.search(f"precision_mode={layer.precision_config.precision_mode.value}")
            bits = (int(mode.group(1)), int(mode.group(2))) if mode else DEFAULT_BITS
            found[str(layer.name).split("/")[-1]] = (int(layer.weights), bits)
        return found
    except Exception:
        return None


def kernel_width(kernel: np.ndarray) -> int:
    """The bits a quantized kernel takes: its integer type's width, or 4 when a wider signed type holds
    only values in [-8, 7], not all zero (a 4-bit kernel kept unpacked, as the DFC's double keeps it; how
    the DFC stores one is UNCONFIRMED). An 8-bit kernel on a grid from its own range reaches +-127, so
    it never reads as 4. A float kernel counts at the default mode's 8."""
    array = np.asarray(kernel)
    if not np.issubdtype(array.dtype, np.integer):
        return DEFAULT_BITS[1]
    width = array.dtype.itemsize * 8
    narrow = np.issubdtype(array.dtype, np.signedinteger) and array.size and np.any(array)
    return 4 if narrow and width > 4 and array.min() >= -8 and array.max() <= 7 else width


def _kernel_counts(params: Mapping[str, np.ndarray]) -> dict[str, tuple[int, int]]:
    """Kernel values and their width (:func:`kernel_width`), by layer, from keys ``<net>/<layer>/kernel:0``."""
    counts: dict[str, tuple[int, int]] = {}
    for key, value in params.items():
        layer, leaf = split_key(key)
        if layer and leaf == "kernel":
            array, short = np.asarray(value), layer.split("/")[-1]
            width = kernel_width(array)
            seen, _ = counts.get(short, (0, width))
            counts[short] = (seen + array.size, width)
    return counts


def split_key(key: str) -> tuple[str, str]:
    """``net/conv1/kernel:0`` -> (``net/conv1``, ``kernel``); stats entries stay with their layer."""
    parts = key.split(":")[0].split("/")
    cut = parts.index("stats") if "stats" in parts[1:] else len(parts) - 1
    return "/".join(parts[:cut]), "/".join(parts[cut:])


def layer_bits(
    hn_layers: Mapping[str, tuple[int, Bits]] | None, script: str, params: Mapping[str, np.ndarray]
) -> tuple[dict[str, tuple[int, Bits]], str]:
    """Weight count and bits by layer, and where they came from: the DFC's HN model when it
    answers; else the kernels' own sizes, at the model script's precision mode where it sets one
    and the kernel's width otherwise (:func:`kernel_width`: a layer the DFC put at 4 bits itself,
    ``auto_4bit_weights_ratio``, has no script line)."""
    if hn_layers:
        return dict(hn_layers), "runner.get_hn_model()"
    counts = _kernel_counts(params)
    modes = script_precisions(script, list(counts))
    found = {name: (n, modes.get(name, (DEFAULT_BITS[0], width))) for name, (n, width) in counts.items()}
    return found, "kernel parameters, bits from the model script's precision_mode or the kernel's integers"


def four_bit(
    layers: Mapping[str, tuple[int, Bits]], source: str, asked: float | None, onnx_names: Mapping[str, str]
) -> dict[str, Any] | None:
    """The layers held at 4-bit weights and their share of the weights by count, as Hailo's compression
    inspector counts it (``layer.weights`` of the layers whose mode ends in ``w4``,
    Hailo-Application-Code-Examples ``inspectors/compression_inspector.py``), beside the share asked
    (``weights_4bit_share``); None when nothing was asked and no layer is at 4 bits."""
    total = sum(n for n, _ in layers.values())
    at4 = [name for name, (n, (_, w)) in layers.items() if n and w == 4]
    if asked is None and not at4:
        return None
    count = sum(layers[name][0] for name in at4)
    return {
        "asked": asked,
        "layers": [onnx_names.get(name, name) for name in at4],
        "dfc_layers": at4,
        "weights": count,
        "share": count / total if total else 0.0,
        "from": source,
    }


def residency(layers: Mapping[str, tuple[int, Bits]], source: str, hw_arch: str) -> dict[str, Any]:
    """What the run records of the weights: their count and bytes at the compiled precision. Whether
    they are resident is judged by the HEF (:func:`hef_residency`), once compiled."""
    total_bits = sum(n * w for n, (_, w) in layers.values())
    by_bits: dict[str, int] = {}
    for n, (_, w) in layers.values():
        if n:
            by_bits[str(w)] = by_bits.get(str(w), 0) + n
    nbytes = (total_bits + 7) // 8
    return {
        "weights": sum(n for n, _ in layers.values()),
        "weights_by_bits": dict(sorted(by_bits.items())),
        "bytes": nbytes,
        "from": source,
        "hw_arch": hw_arch,
        "device_memory_bytes": None,
        "resident": "unknown",  # until the HEF is compiled: the HEF's size decides
    }


def hef_residency(size: int, hw_arch: str) -> dict[str, Any]:
    """A HEF of ``size`` bytes against what a ``hw_arch`` device can allocate for it, with the
    arithmetic in one line; ``resident`` is unknown for a chip with no figure."""
    capacity, source = DEVICE_BYTES.get(hw_arch, (None, ""))
    if capacity is None:
        arithmetic = f"HEF {size:,} B; no figure for what {hw_arch} can allocate for a HEF: fit not judged"
        return {"hef_bytes": size, "device_bytes": None, "resident": "unknown", "arithmetic": arithmetic}
    fits = size <= capacity
    arithmetic = (
        f"HEF {size:,} B {'<=' if fits else '>'} {capacity:,} B ({capacity / 2**30:g} GiB, an upper bound on what "
        f"{hw_arch} can allocate for it): {'fits' if fits else 'does not fit; HailoRT would fail to create the model'}"
    )
    return {
        "hef_bytes": size,
        "device_bytes": capacity,
        "device_bytes_from": source,
        "resident": "yes" if fits else "no",
        "arithmetic": arithmetic,
    }

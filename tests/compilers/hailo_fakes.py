"""A FAKE ``hailo_sdk_client`` for driving loop's Hailo compiler without Hailo's software.

It records every call in order and returns values shaped as public callers of the DFC show
them: ``get_params_translated()`` indexed per layer (as Hailo's clipping inspector reads it),
``save_params(path, ParamsKinds.TRANSLATED)`` writing flat ``<net>/<layer>/kernel:0`` keys to
an ``.npz``. It compiles nothing and runs no emulation: it only lets the driver's plumbing be
checked. Install it with :meth:`FakeHailoSdkClient.modules` (it brings the ``hailo_archive``
submodule that holds ``ParamsKinds``).

Time is virtual: each call advances ``now`` by ``DELAYS[call]`` seconds, so a test that points
the compiler's clock at ``now`` knows exactly what each stage should measure. ``hn_layers``
(None: this DFC has no ``get_hn_model``) answers as Hailo's compression inspector reads it.
"""

from __future__ import annotations

import enum
import logging
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

FAKE_HN = {
    "name": "loop_net",
    "layers": {
        "loop_net/input_layer1": {"type": "input_layer", "output_shapes": [[-1, 4, 4, 3]]},
        "loop_net/conv1": {"type": "conv", "original_names": ["Conv_0"]},
        "loop_net/output_layer1": {"type": "output_layer", "input_shapes": [[-1, 4, 4, 2]]},
    },
}
FAKE_HEF = b"FAKE-HEF-BYTES"
FAKE_PARAMS = {
    "loop_net/conv1": {
        "kernel:0": np.ones((1, 1, 3, 2), np.int8),
        "kernel_scale:0": np.float32([0.5, 0.25]),
        "bias:0": np.int32([4, -2]),
        "bias_scale:0": np.float32([0.01, 0.02]),
    },
    "loop_net/output_layer1": {"output_scale:0": np.float32([0.125]), "output_zero_point:0": np.float32([3])},
}
# powers of two, so any sum of them names the calls it covers
DELAYS = {
    "ClientRunner": 1.0,
    "translate_onnx_model": 2.0,
    "load_model_script": 4.0,
    "optimize": 8.0,
    "save_har": 16.0,
    "save_params": 32.0,
    "get_hn_model": 64.0,
    "compile": 128.0,
    "get_hn_dict": 256.0,
}
RECOMMENDED_CALIBRATION = 1024  # the fake lowers its level below this many frames, in its own words


class ParamsKinds(enum.Enum):
    NATIVE = "native"
    TRANSLATED = "translated"


class FakeHailoSdkClient(types.ModuleType):
    """A fake ``hailo_sdk_client`` module that records calls; it is not Hailo's DFC."""

    def __init__(self) -> None:
        super().__init__("hailo_sdk_client")
        self.__version__ = "0.0-fake"
        self.calls: list[tuple[str, Any]] = []
        self.compile_error: str | None = None
        self.now = 0.0
        self.params: dict[str, dict[str, np.ndarray]] = FAKE_PARAMS
        self.hn_layers: list[tuple[str, int, str]] | None = None  # (name, weights, precision mode)
        fake = self

        class InferenceContext:
            SDK_FP_OPTIMIZED = "SDK_FP_OPTIMIZED"
            SDK_QUANTIZED = "SDK_QUANTIZED"

        class ClientRunner:
            def __init__(self, hw_arch: str | None = None, har: str | None = None) -> None:
                fake.record("ClientRunner", {"hw_arch": hw_arch, "har": har})
                self.hw_arch = hw_arch
                self.script = ""

            def translate_onnx_model(self, path: str, net: str, **kwargs: Any) -> tuple[dict, dict]:
                fake.record("translate_onnx_model", {"path": path, "net": net, **kwargs})
                return FAKE_HN, {}

            def load_model_script(self, text: str, append: bool = False) -> None:
                fake.record("load_model_script", text)
                self.script = text

            def optimize(self, calib: np.ndarray) -> None:
                fake.record("optimize", calib)
                if len(calib) < RECOMMENDED_CALIBRATION and "optimization_level=0" not in self.script:
                    logging.getLogger("hailo_sdk_client.fake").warning(
                        "FAKE DFC: reducing optimization level to 0 because the calibration set has %d frames",
                        len(calib),
                    )

            def save_har(self, path: str) -> None:
                fake.record("save_har", path)
                Path(path).write_bytes(f"FAKE-HAR {self.hw_arch}\n{self.script}".encode())

            def get_params_translated(self) -> dict[str, dict[str, np.ndarray]]:
                return fake.params  # indexed per layer, not by flat key

            def save_params(self, path: str, kind: ParamsKinds) -> None:
                fake.record("save_params", kind)
                flat = {f"{layer}/{leaf}": v for layer, leaves in fake.params.items() for leaf, v in leaves.items()}
                np.savez(path, **flat)

            def get_params(self) -> dict[str, np.ndarray]:
                return {}

            def get_hn_dict(self) -> dict:
                fake.record("get_hn_dict", None)
                return FAKE_HN

            def get_hn_model(self) -> Any:
                fake.record("get_hn_model", None)
                if fake.hn_layers is None:
                    raise AttributeError("this fake DFC has no get_hn_model")
                layers = [
                    types.SimpleNamespace(
                        name=f"loop_net/{name}",
                        weights=count,
                        precision_config=types.SimpleNamespace(precision_mode=types.SimpleNamespace(value=mode)),
                    )
                    for name, count, mode in fake.hn_layers
                ]
                return types.SimpleNamespace(stable_toposort=lambda: iter(layers))

            def compile(self) -> bytes:
                fake.record("compile", None)
                if fake.compile_error:
                    raise RuntimeError(fake.compile_error)
                return FAKE_HEF

            @contextmanager
            def infer_context(self, context: str) -> Iterator[str]:
                fake.record("infer_context", context)
                yield context

            def infer(self, context: str, x: np.ndarray) -> np.ndarray:
                fake.record("infer", np.array(x))
                return np.full((1, 4, 4, 2), float(x.sum()) % 7, np.float32)

        self.ClientRunner = ClientRunner
        self.InferenceContext = InferenceContext

    def record(self, name: str, detail: Any) -> None:
        self.calls.append((name, detail))
        self.now += DELAYS.get(name, 0.0)

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def modules(self) -> dict[str, types.ModuleType]:
        """``sys.modules`` entries: this module and the submodule holding ``ParamsKinds``."""
        archive = types.ModuleType("hailo_sdk_client.hailo_archive.hailo_archive")
        archive.ParamsKinds = ParamsKinds  # type: ignore[attr-defined]
        return {
            "hailo_sdk_client": self,
            "hailo_sdk_client.hailo_archive": types.ModuleType("hailo_sdk_client.hailo_archive"),
            "hailo_sdk_client.hailo_archive.hailo_archive": archive,
        }

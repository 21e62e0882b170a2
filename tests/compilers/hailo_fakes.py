"""A FAKE ``hailo_sdk_client`` for driving loop's Hailo compiler without Hailo's software.

A TEST DOUBLE of the Dataflow Compiler, not Hailo's code. It records every call in order, and
behaves as the real DFC does where public sources show how (tests/compilers/hailo_dfc_double.py
holds the arithmetic and cites a source for each behaviour; docs/hailo.md lists what is not
confirmed): ``translate_onnx_model`` reads the ONNX and names layers ``<net>/conv1``, ... with
Conv+BatchNormalization+Relu fused into one layer whose HN ``original_names`` lists each node;
``optimize`` quantizes the translated weights from the calibration frames and the model script
(forced ranges, ``precision_mode=a16_w16``/``a8_w4``, ``auto_4bit_weights_ratio``, bias
correction); ``get_params()`` answers the native float params,
``save_params(path, ParamsKinds.TRANSLATED)`` / ``get_params_translated()`` the quantized ones
(flat ``<net>/<layer>/kernel:0`` keys in the ``.npz``, indexed per layer in the view, as Hailo's
clipping inspector reads it); ``infer`` emulates the quantized net. It compiles nothing:
``compile()`` returns fixed bytes. Install it with :meth:`FakeHailoSdkClient.modules`
(it brings the ``hailo_archive`` submodule that holds ``ParamsKinds``).

``load_params(npz, params_kind=ParamsKinds.TRANSLATED)`` loads edited translated params; whether they
reach the compiled HEF is the double's switch ``edits_reach_hef`` (no public source shows either way),
and ``hef_carries_params`` makes the HEF a loopback "HEF" that carries the params it was compiled
from (double.hef_with_params), so a loopback device's outputs move with them.

A test may pin the answers instead: ``params`` (per layer) replaces the quantized params,
``hn_layers`` what ``get_hn_model`` answers (None: the translated net's own), ``float_bias`` the
DFC layers whose bias stays in float. Time is virtual: each call advances ``now`` by
``DELAYS[call]`` seconds, so a test that points the compiler's clock at ``now`` knows exactly
what each stage should measure.
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

try:  # by path (tests/ is not a package): beside this file
    import hailo_dfc_double as double
except ImportError:
    import importlib.util
    import sys

    _spec = importlib.util.spec_from_file_location("hailo_dfc_double", Path(__file__).with_name("hailo_dfc_double.py"))
    assert _spec and _spec.loader
    double = importlib.util.module_from_spec(_spec)
    sys.modules["hailo_dfc_double"] = double
    _spec.loader.exec_module(double)

FAKE_HN = {
    "name": "loop_net",
    "layers": {
        "loop_net/input_layer1": {"type": "input_layer", "output_shapes": [[-1, 4, 4, 3]]},
        "loop_net/conv1": {"type": "conv", "original_names": ["Conv_0"]},
        "loop_net/output_layer1": {"type": "output_layer", "input_shapes": [[-1, 4, 4, 2]]},
    },
}
FAKE_HEF = b"FAKE-HEF-BYTES"
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
        self.params: dict[str, dict[str, np.ndarray]] | None = None  # pinned quantized params
        self.hn_layers: list[tuple[str, int, str]] | None = None  # pinned (name, weights, precision mode)
        self.float_bias: set[str] = set()  # DFC layers whose bias the double keeps in float
        self.equalized: list[str] = []  # the layers the last optimize equalized
        self.hef: bytes | int = FAKE_HEF  # an int: a HEF of that many bytes (double.SizedHef)
        # THE DOUBLE'S SWITCH for what no public source shows: whether translated params loaded back
        # (load_params, params_kind TRANSLATED) reach the compiled HEF (True), or the HEF is compiled
        # from the params as optimize made them, the edit silently ignored (False)
        self.edits_reach_hef = False
        self.hef_carries_params = False  # the HEF is a loopback "HEF" carrying the params it compiled
        fake = self

        class InferenceContext:
            SDK_FP_OPTIMIZED = "SDK_FP_OPTIMIZED"
            SDK_QUANTIZED = "SDK_QUANTIZED"

        class ClientRunner:
            def __init__(self, hw_arch: str | None = None, har: str | None = None) -> None:
                fake.record("ClientRunner", {"hw_arch": hw_arch, "har": har})
                self.hw_arch = hw_arch
                self.script = ""
                self.net: double.Net | None = None
                self.quantized: dict[str, dict[str, np.ndarray]] = {}
                self.optimized: dict[str, dict[str, np.ndarray]] = {}  # as optimize made them
                self.compile_script = ""  # the compile-time commands compile() sees
                if har is not None:
                    # The quantized net and the script it was optimized with come back; whether the DFC also
                    # keeps the script's compile-time commands (performance_param, allocator lines) is not
                    # documented, so the double does not: hailo_model_zoo loads the script again before it
                    # compiles a reopened HAR (main_driver.py compile -> core/main_utils.py compile_model).
                    self.net, self.quantized, self.script, self.hw_arch, self.optimized = double.read_har(
                        Path(har).read_bytes()
                    )

            def translate_onnx_model(self, path: str, net: str, **kwargs: Any) -> tuple[dict, dict]:
                fake.record("translate_onnx_model", {"path": path, "net": net, **kwargs})
                start, end = kwargs.get("start_node_names"), kwargs.get("end_node_names")
                self.net = double.translate(path, net, start, end)
                return self.net.hn(), double.native(self.net)

            def load_model_script(self, text: str, append: bool = False) -> None:
                fake.record("load_model_script", text)
                self.script = self.script + text if append else text
                self.compile_script = self.compile_script + text if append else text

            def optimize(self, calib: np.ndarray) -> None:
                fake.record("optimize", calib)
                if len(calib) < RECOMMENDED_CALIBRATION and "optimization_level=0" not in self.script:
                    logging.getLogger("hailo_sdk_client.fake").warning(
                        "FAKE DFC: reducing optimization level to 0 because the calibration set has %d frames",
                        len(calib),
                    )
                assert self.net is not None, "FAKE DFC: optimize before translate"
                if double.equalization_enabled(self.script):
                    fake.equalized = double.equalize(self.net)
                self.quantized = double.quantize(self.net, np.asarray(calib), self.script, fake.float_bias)
                self.optimized = self.quantized

            def save_har(self, path: str) -> None:
                fake.record("save_har", path)
                assert self.net is not None
                har = double.har_bytes(self.net, self.quantized, self.script, self.hw_arch, self.optimized)
                Path(path).write_bytes(har)

            def get_params_translated(self) -> dict[str, dict[str, np.ndarray]]:
                return fake.params if fake.params is not None else self.quantized  # indexed per layer

            def save_params(self, path: str, kind: ParamsKinds) -> None:
                fake.record("save_params", kind)
                if kind is ParamsKinds.NATIVE:
                    np.savez(path, **self.get_params())
                    return
                per_layer = self.get_params_translated()
                np.savez(
                    path, **{f"{layer}/{leaf}": v for layer, leaves in per_layer.items() for leaf, v in leaves.items()}
                )

            def load_params(self, params: str | dict[str, np.ndarray], params_kind: Any = None) -> None:
                fake.record("load_params", params_kind)
                if params_kind is not ParamsKinds.TRANSLATED:
                    raise double.FakeDfcError("FAKE DFC: the double loads translated params only")
                if isinstance(params, str):
                    with np.load(params, allow_pickle=True) as saved:
                        flat = {k: np.asarray(saved[k]) for k in saved.files}
                else:
                    flat = dict(params)
                self.quantized = double.per_layer(flat, self.quantized)

            def get_params(self) -> dict[str, np.ndarray]:
                return double.native(self.net) if self.net is not None else {}

            def get_hn_dict(self) -> dict:
                fake.record("get_hn_dict", None)
                return self.net.hn() if self.net is not None else FAKE_HN

            def get_hn_model(self) -> Any:
                fake.record("get_hn_model", None)
                rows = fake.hn_layers if fake.hn_layers is not None else self._hn_rows()
                layers = [
                    types.SimpleNamespace(
                        name=f"loop_net/{name}",
                        weights=count,
                        precision_config=types.SimpleNamespace(precision_mode=types.SimpleNamespace(value=mode)),
                    )
                    for name, count, mode in rows
                ]
                return types.SimpleNamespace(stable_toposort=lambda: iter(layers))

            def _hn_rows(self) -> list[tuple[str, int, str]]:
                if self.net is None:
                    raise AttributeError("this fake DFC has no net to describe")
                bits = double.precision_modes(self.net, self.script)  # the script's modes and the double's auto choice
                rows = [("input_layer1", 0, "a{}_w{}".format(*bits.get("input_layer1", (8, 8))))]
                for layer in self.net.layers:
                    rows.append((layer.name, int(layer.kernel.size), "a{}_w{}".format(*bits.get(layer.name, (8, 8)))))
                return rows

            def compile(self) -> bytes | double.SizedHef:
                fake.record("compile", self.compile_script)
                if fake.compile_error:
                    raise RuntimeError(fake.compile_error)
                if isinstance(fake.hef, int):
                    return double.SizedHef(fake.hef)
                compiled = self.quantized if fake.edits_reach_hef else self.optimized
                return double.hef_with_params(fake.hef, compiled) if fake.hef_carries_params else fake.hef

            @contextmanager
            def infer_context(self, context: str) -> Iterator[str]:
                fake.record("infer_context", context)
                yield context

            def infer(self, context: str, x: np.ndarray) -> np.ndarray | list[np.ndarray]:
                fake.record("infer", np.array(x))
                assert self.net is not None, "FAKE DFC: nothing to emulate"
                outs = double.emulate(self.net, self.get_params_translated(), self.script, np.asarray(x))
                return outs[0] if len(outs) == 1 else outs

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

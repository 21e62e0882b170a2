"""Hailo's Dataflow Compiler (``hailo_sdk_client``): parse, optimize, compile to a HEF.

The DFC is closed source, Linux x86-64 only, and not on PyPI, so it is imported inside the
methods that use it. Its parameter keys and HN layout are only partly documented (see
docs/hailo.md): what is UNCONFIRMED is discovered at run time and, when absent, refused with a
message that lists what was found. None of this has run against the real DFC yet; it is
tested against a test double of ``hailo_sdk_client`` that records calls, translates the ONNX,
names and fuses layers and quantizes them as public sources show the DFC does (docs/hailo.md,
"The DFC test double").

Prints are named as the sweep names layers, through the HN's ``original_names``; compiled
outputs are named by the ONNX output they carry (``info.output_names``).
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from loop.author.cut import cut_model, cut_of
from loop.compilers.base import Compiler, share_said
from loop.compilers.hailo_options import REFUSED, HailoOptions, target_arch
from loop.compilers.hailo_params import (
    HailoCompileError,
    Layouts,
    discover_prints,
    flat_params,
    io_layouts,
    kernel_grid,
    load_translated_params,
    named_prints,
    onnx_layers,
    output_names,
    saved_translated_params,
    split_key,
)
from loop.compilers.hailo_precision import (
    dfc_layer,
    num,
    precision_lines,
    refuse_float_layers,
    refuse_mixed_modes,
    share_lines,
)
from loop.compilers.hailo_rescale import rescale_params
from loop.compilers.hailo_weights import four_bit, hef_residency, hn_model_layers, layer_bits, residency
from loop.core.facts import CompileFacts
from loop.core.hashing import bytes_sha
from loop.core.modelfile import load_model
from loop.core.registry import importable
from loop.core.vocab import (
    Artifact,
    CompileOptions,
    CompileSettings,
    Frames,
    LayerPrint,
    Quantized,
    Rescale,
    TensorLayout,
)

_LEVEL_MENTION = re.compile(r"optimization[ _]level", re.IGNORECASE)
# The DFC's wording when it lowers the level is UNCONFIRMED: any "reduce/lower/set ... level ... to N".
_LEVEL_LOWERED = re.compile(
    r"(?:reduc|lower|decreas|chang|set)\w*\s+(?:the\s+)?optimization[ _]level"
    r"\D{0,40}?\bto\s+(\d)",
    re.IGNORECASE,
)
_ERRORS: tuple[tuple[str, str], ...] = (
    (
        r"mapping failed",
        "the model does not fit the device (Dataflow Compiler: Mapping Failed); "
        "make it smaller or let it use more contexts",
    ),
    (
        r"HAILO_HEF_NOT_COMPATIBLE_WITH_DEVICE|\(93\)",
        "the HEF was compiled for another architecture than the "
        "device (HAILO_HEF_NOT_COMPATIBLE_WITH_DEVICE(93)); check hw_arch",
    ),
    (r"HAILO_INVALID_HEF|\(26\)", "the file is not a HEF this HailoRT can read (HAILO_INVALID_HEF(26))"),
    (
        r"version.{0,40}(mismatch|does not match|not compatible|incompatible)|"
        r"(mismatch|incompatible).{0,40}version|HAILO_INVALID_DRIVER_VERSION",
        "Hailo software versions do not match (DFC, HailoRT, driver and firmware must match exactly)",
    ),
)


def clear_error(text: str) -> str | None:
    """One clear line for a DFC/HailoRT error users meet often, else None."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    for pattern, line in _ERRORS:
        if re.search(pattern, text, re.IGNORECASE | re.DOTALL):
            return f"{line}: {first}" if first else line
    return None


# Read at each call, so a test can run the DFC's test double on virtual time.
_clock: Callable[[], float] = time.perf_counter


@contextmanager
def timed(stages: dict[str, float], name: str) -> Iterator[None]:
    """Add the seconds the block took to ``stages[name]``: each DFC call is timed alone, so a
    stage figure holds that stage and not the start-up, saving or reading around it."""
    start = _clock()
    try:
        yield
    finally:
        stages[name] = stages.get(name, 0.0) + _clock() - start


@contextmanager
def named_errors(stage: str) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        line = clear_error(str(exc))
        if line is None:
            raise
        raise HailoCompileError(f"{stage}: {line}") from exc


def refuse_ignored_options(options: CompileOptions) -> None:
    """Options the DFC has no verified model-script equivalent for are refused, not ignored,
    unless left at their defaults (the Dataflow Compiler's own weights are per channel)."""
    defaults = CompileSettings()
    asked = [f"{k}={getattr(options, k)!r}" for k in REFUSED if getattr(options, k) != getattr(defaults, k)]
    if asked:
        raise HailoCompileError(
            f"the hailo backend would ignore {', '.join(asked)} (no verified Dataflow Compiler "
            "equivalent): leave them at their defaults, or write model_script lines"
        )


class _Lines(logging.Handler):
    def __init__(self, lines: list[str]) -> None:
        super().__init__(logging.NOTSET)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@contextmanager
def dfc_log() -> Iterator[list[str]]:
    """The messages logged meanwhile by the root logger and every ``hailo*`` logger (the DFC's own
    may not propagate): the DFC says there when it lowers the optimization level itself."""
    lines: list[str] = []
    handler = _Lines(lines)
    names = [n for n in list(logging.root.manager.loggerDict) if n.startswith("hailo")]
    loggers = [logging.getLogger()] + [logging.getLogger(n) for n in names]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield lines
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


def optimization_level(requested: int | None, lines: list[str]) -> dict[str, Any]:
    """The level asked for, and the level the DFC says it used (it lowers it with little
    calibration data or no GPU); the lines that mention it are kept as evidence."""
    evidence = list(dict.fromkeys(line for line in lines if _LEVEL_MENTION.search(line)))[:5]
    lowered = next((int(m[1]) for line in evidence if (m := _LEVEL_LOWERED.search(line))), None)
    return {
        "requested": requested,
        "effective": requested if lowered is None else lowered,
        "effective_from": "the DFC's log" if lowered is not None else "as requested (the DFC said nothing)",
        "evidence": evidence,
    }


def model_script(options: CompileOptions, calibration_count: int, layer_names: dict[str, str]) -> str:
    """The model script (``.alls``) for a compile: one command per line, in a fixed order.
    ``layer_names`` maps ONNX node names to DFC layer names (:func:`layer_names_from_hn`)."""
    lines = []
    for o in options.overrides:
        side = {"out": "force_range_out", "in": "force_range_in"}[o.side]
        lines.append(f"quantization_param({dfc_layer(o.layer, layer_names)}, {side}=[{num(o.lo)}, {num(o.hi)}])")
    lines += precision_lines(options, layer_names)
    own = HailoOptions.of(options)
    levels = [("optimization_level", own.optimization_level), ("compression_level", own.compression_level)]
    if any(v is not None for _, v in levels):
        lines.append(f"model_optimization_flavor({', '.join(f'{k}={v}' for k, v in levels if v is not None)})")
    lines += share_lines(options)  # after the flavor, as public scripts write it beside a compression_level
    # Written either way, in the words hailo_model_zoo's scripts use (centernet_resnet_v1_50_postprocess.alls):
    # left to the DFC, the same sweep could audit differently on two DFC versions.
    lines.append(f"pre_quantization_optimization(equalization, policy={own.equalization})")
    batch = own.calibration_batch_size or min(8, max(1, calibration_count))
    lines.append(f"model_optimization_config(calibration, batch_size={batch}, calibset_size={calibration_count})")
    policy = "enabled" if options.bias_correction else "disabled"
    lines.append(f"post_quantization_optimization(bias_correction, policy={policy})")
    # Written either way, as hailo_model_zoo's scripts do beside an enabled bias correction: finetune
    # retrains kernels, and the DFC is said to run it at its default level (docs/hailo.md).
    lines.append(f"post_quantization_optimization(finetune, policy={'enabled' if own.finetune else 'disabled'})")
    lines.extend(own.model_script or ())
    return "\n".join(lines) + "\n"


def nchw_to_nhwc(calibration: np.ndarray) -> np.ndarray:
    """Calibration frames in the DFC's layout: float32 NHWC, whatever the ONNX layout was."""
    data = np.asarray(calibration, dtype=np.float32)
    return np.ascontiguousarray(data.transpose(0, 2, 3, 1)) if data.ndim == 4 else data


def hn_dict(hn: Any) -> dict[str, Any]:
    if isinstance(hn, (str, bytes)):
        hn = json.loads(hn)
    return hn if isinstance(hn, dict) else {}


def layer_names_from_hn(hn: dict[str, Any]) -> dict[str, str]:
    """ONNX node name -> DFC layer name (without the ``<net>/`` prefix) via ``original_names``."""
    names: dict[str, str] = {}
    for layer, body in hn.get("layers", {}).items():
        for original in body.get("original_names", []) if isinstance(body, dict) else []:
            names.setdefault(original, layer.split("/")[-1])
    return names


def platform_layouts(hef: Path) -> Layouts:
    """A HEF's vstreams through Hailo's Python bindings (``hailo_platform.HEF``), no device."""
    from hailo_platform import HEF

    from loop.hailort.shim import as_float_when_unquantizable, layout_from_json

    def entry(info: Any) -> dict[str, Any]:
        dtype = str(info.format.type).split(".")[-1].lower()
        shape = [int(d) for d in info.shape]
        return {
            "name": info.name,
            "shape": shape,
            "dtype": dtype,
            "scale": float(info.quant_info.qp_scale),
            "zero_point": float(info.quant_info.qp_zp),
            "quant_count": 1,
            "frame_bytes": int(np.prod(shape)) * np.dtype(dtype).itemsize,
        }

    hef_file = HEF(str(hef))
    inputs = tuple(layout_from_json(entry(i)) for i in hef_file.get_input_vstream_infos())
    outputs = tuple(
        layout_from_json(as_float_when_unquantizable(entry(o))) for o in hef_file.get_output_vstream_infos()
    )
    return inputs, outputs


def shim_layouts(hef: Path) -> Layouts:
    """A HEF's vstreams through loop's shim (``Hef::create``), no device."""
    from loop.hailort.shim import hef_layouts

    return hef_layouts(hef)


def hef_io(hef: Path, guess: Callable[[], Layouts]) -> tuple[Layouts, str]:
    """The HEF's own layouts, read by the first reader that works; the HN's guess only when none
    does, and then the record says so and why."""
    reasons = []
    for reader, source in ((platform_layouts, "hailo_platform"), (shim_layouts, "shim")):
        try:
            return reader(hef), source
        except Exception as exc:
            reasons.append(f"{source}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    return guess(), f"hn (guessed, the HEF could not be read: {'; '.join(reasons)})"


def _sdk_version() -> str | None:
    import hailo_sdk_client

    return str(getattr(hailo_sdk_client, "__version__", "")) or None


def moved_kernels(before: dict[str, np.ndarray], after: dict[str, np.ndarray]) -> list[str]:
    """The DFC layers whose float kernel the optimization changed (translated against quantized-from)."""
    moved = []
    for key, value in before.items():
        layer, leaf = split_key(key)
        other = after.get(key)
        same = other is not None and np.array_equal(np.asarray(other), np.asarray(value))
        if leaf == "kernel" and other is not None and not same:
            moved.append(layer.split("/")[-1])
    return moved


def equalization(policy: str, moved: list[str], mapped: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What the run records of equalization: the policy written, the layers whose float kernel moved
    between translation and quantization (the ONNX nodes they stand for), and, where it is on, that
    equalization is the cause the audit names for their kernel changes."""
    names = [str((mapped.get(layer) or {}).get("name") or layer) for layer in moved]
    found: dict[str, Any] = {"equalization": {"policy": policy, "layers": names if policy == "enabled" else []}}
    if policy == "enabled" and names:
        cause = "equalization rescaled this kernel with its neighbour's (hailo.equalization: enabled)"
        found["kernel_causes"] = dict.fromkeys(names, cause)
    return found


class HailoCompiler(Compiler):
    """The DFC behind the compiler interface. ``workdir`` keeps the ONNX, HAR and HEF files
    (a fresh temporary folder per compile when None)."""

    name = "hailo"
    options_model = HailoOptions
    refused_compile_keys = REFUSED

    @classmethod
    def target_chip(cls, options: CompileOptions) -> str | None:
        return target_arch(options)

    def __init__(self, workdir: str | Path | None = None) -> None:
        self.workdir = Path(workdir) if workdir else None
        self._runners: dict[str, Any] = {}  # HAR sha -> live runner, to skip reopening the HAR

    @classmethod
    def available(cls) -> tuple[bool, str]:
        if not sys.platform.startswith("linux"):
            return False, "the Dataflow Compiler runs on Linux x86-64 only (compile on a Linux worker)"
        ok, why = importable("hailo_sdk_client")
        return (True, f"hailo_sdk_client {_sdk_version() or 'unknown version'}") if ok else (False, why)

    def describe(self) -> dict[str, str]:
        version = (_sdk_version() or "unknown") if importable("hailo_sdk_client")[0] else "not installed"
        return {"compiler": self.name, "hailo_sdk_client": version}

    def _dir(self) -> Path:
        if self.workdir:
            self.workdir.mkdir(parents=True, exist_ok=True)
            return self.workdir
        return Path(tempfile.mkdtemp(prefix="loop-hailo-"))

    def optimize(self, model: bytes | Path, calibration: Frames, options: CompileOptions) -> Quantized:
        refuse_ignored_options(options)
        refuse_float_layers(options)
        refuse_mixed_modes(options)
        if isinstance(calibration, dict):
            # The DFC keys calibration by its parsed input layer names, which are not the ONNX
            # input names; until that mapping is read from the HN, say so instead of guessing.
            raise ValueError(
                "the hailo backend takes single-input models for now "
                f"(this one has {len(calibration)} inputs: {', '.join(calibration)})"
            )
        own = HailoOptions.of(options)
        hw_arch, net = target_arch(options), own.net_name or "loop_net"
        stages: dict[str, float] = {}
        folder = self._dir()
        runner, script, hn, translated = self._parse(model, calibration, options, folder, net, stages)
        frames = nchw_to_nhwc(calibration)
        with named_errors("optimize"), dfc_log() as log, timed(stages, "optimize_s"):
            runner.optimize(frames)
        har = folder / f"{net}.har"
        with timed(stages, "save_s"):
            runner.save_har(str(har))
            data = har.read_bytes()
        self._runners[bytes_sha(data)] = runner
        with timed(stages, "params_s"):
            source, params = self._params(runner)
            layers, layers_from = layer_bits(hn_model_layers(runner), script, params)
        mapped, made_by = onnx_layers(cut_model(model, cut_of(options)), hn)
        equalized = moved_kernels(translated, self._native(runner))
        # which layers the DFC holds at 4 bits, whoever chose them (weights: 4, the DFC's ratio, its default)
        at4 = four_bit(layers, layers_from, options.weights_4bit_share, {k: v["name"] for k, v in mapped.items()})
        said = share_said(at4)
        info = CompileFacts(
            model_script=script,
            param_keys=tuple(params),
            param_source=source,
            hw_arch=hw_arch,
            net_name=net,
            workdir=str(folder),
            optimization_level=optimization_level(own.optimization_level, log),
            activation_bits={name: a for name, (_, (a, _)) in layers.items() if a != 8},
            layer_bits={name: list(bits) for name, (_, bits) in layers.items()},
            weights=residency(layers, layers_from, hw_arch),
            # what each DFC layer stands for in the ONNX (HN original_names), and which node makes each output
            onnx_layers=mapped,
            onnx_outputs=made_by,
            cut=dict(zip(("start_nodes", "end_nodes"), map(list, cut_of(options)), strict=True)),
            **equalization(own.equalization, equalized, mapped),
            weights_4bit=at4 or None,
            warnings=(said,) if said else (),
        )
        return Quantized(self.name, data, info=info, stages=stages)

    def _parse(
        self,
        model: bytes | Path,
        calibration: np.ndarray,
        options: CompileOptions,
        folder: Path,
        net: str,
        stages: dict[str, float],
    ) -> tuple[Any, str, dict[str, Any], dict[str, np.ndarray]]:
        """A runner holding the parsed network and its model script (and the HN, and the float params as
        translated), each DFC call timed alone. A cut goes to the parser as hailo_model_zoo passes it. A
        model given as a file goes by its path, as the DFC takes one with external data beside it."""
        from hailo_sdk_client import ClientRunner

        onnx_path = model if isinstance(model, Path) else folder / f"{net}.onnx"
        if isinstance(model, bytes):
            onnx_path.write_bytes(model)
        with timed(stages, "startup_s"):
            runner = ClientRunner(hw_arch=target_arch(options))
        start, end = cut_of(options)
        cut = {k: list(v) for k, v in (("start_node_names", start), ("end_node_names", end)) if v}
        with named_errors("parse"):
            shapes = self._input_shapes(model, calibration)
            with timed(stages, "parse_s"):
                parsed = runner.translate_onnx_model(str(onnx_path), net, net_input_shapes=shapes, **cut)
        hn = (hn_dict(parsed[0]) if isinstance(parsed, tuple) else {}) or hn_dict(self._hn(runner))
        script = model_script(options, len(calibration), layer_names_from_hn(hn))
        with timed(stages, "script_s"):
            runner.load_model_script(script)
        translated = flat_params(parsed[1]) if isinstance(parsed, tuple) and len(parsed) > 1 else {}
        return runner, script, hn, translated

    @staticmethod
    def _input_shapes(model: bytes | Path, calibration: np.ndarray) -> dict[str, list[int]]:
        graph = load_model(model, data=False).graph
        initializers = {i.name for i in graph.initializer}
        inputs = [i.name for i in graph.input if i.name not in initializers]
        return {inputs[0]: [1, *calibration.shape[1:]]}

    @staticmethod
    def _hn(runner: Any) -> Any:
        getter = getattr(runner, "get_hn_dict", None) or getattr(runner, "get_hn", None)
        return getter() if getter else {}

    @staticmethod
    def _params(runner: Any) -> tuple[str, dict[str, np.ndarray]]:
        """The quantized parameters when they hold kernels, else the native ones."""
        source, translated = saved_translated_params(runner)
        if any("kernel" in k for k in translated):
            return source, translated
        return "get_params", flat_params(runner.get_params())

    def _runner(self, quantized: Quantized) -> Any:
        sha = bytes_sha(quantized.data)
        if sha not in self._runners:
            self._runners[sha] = self._reopen(quantized, self._dir())
        return self._runners[sha]

    @staticmethod
    def _reopen(quantized: Quantized, folder: Path) -> Any:
        """A runner of its own over the quantized HAR, with the run's model script loaded again."""
        from hailo_sdk_client import ClientRunner

        har = folder / f"{quantized.info.net_name or 'loop_net'}.har"
        har.write_bytes(quantized.data)
        runner = ClientRunner(har=str(har))
        # hailo_model_zoo loads the script again before it compiles a reopened HAR (main_driver.py
        # compile -> main_utils.py compile_model); that the HAR keeps it is not documented.
        runner.load_model_script(quantized.info.model_script or "")
        return runner

    def rescale(self, quantized: Quantized, edits: Sequence[Rescale]) -> Quantized:
        """The quantized HAR with its translated params' scales multiplied (``scale_grid``), loaded
        back into a runner of its own (the base's stays as optimize left it) and saved as a new HAR;
        ``compile`` then compiles it without optimizing, as hailo_model_zoo compiles a quantized HAR
        (``main_driver.py``: no optimize past the HAILO_MODEL state; ``core/main_utils.py``
        ``compile_model``). UNCONFIRMED: that the DFC's compile honours loaded translated params; the
        device's outputs say whether it did (``loop/flow/evaluate.py``, ``_unapplied``)."""
        folder = self._dir()
        stages = dict(quantized.stages)  # run_compile times the whole edit; the DFC's call is timed alone
        runner = self._reopen(quantized, folder)
        _, params = saved_translated_params(runner)
        hn = hn_dict(self._hn(runner))
        names = layer_names_from_hn(hn)
        net = str(hn.get("name") or quantized.info.net_name or "loop_net")
        targets = [(edit, f"{net}/{dfc_layer(edit.layer, names)}") for edit in edits]
        edited, done = rescale_params(params, targets, hn)
        with named_errors("rescale"), timed(stages, "load_params_s"):
            how = load_translated_params(runner, edited)
        har = folder / f"{net}.rescaled.har"
        runner.save_har(str(har))  # the HAR travels by value (to the compile child, to the emulator)
        data = har.read_bytes()
        self._runners[bytes_sha(data)] = runner
        info = replace(quantized.info, workdir=str(folder), rescaled={"edits": done, "loaded_by": how})
        return replace(quantized, data=data, info=info, stages=stages)

    def fingerprint(self, quantized: Quantized) -> list[LayerPrint]:
        """The quantized layers, named by the ONNX nodes they stand for (the HN's ``original_names``),
        with their bits, and what their kernels stand for: the native float kernel's hash and the
        integers off its grid."""
        runner = self._runner(quantized)
        _, params = self._params(runner)
        sources: dict[str, str] = {}
        prints = discover_prints(params, quantized.info.activation_bits, sources)[0]
        quantized.info = replace(quantized.info, scale_from=sources)  # per layer:side: no fallback taken for read
        hn = hn_dict(self._hn(runner))
        named = named_prints(prints, quantized.info.onnx_layers, hn, quantized.info.layer_bits)
        return kernel_grid(params, self._native(runner), named)

    @staticmethod
    def _native(runner: Any) -> dict[str, np.ndarray]:
        """The float params the DFC quantized (after its own fusing), or none when it cannot say."""
        try:
            return flat_params(runner.get_params())
        except Exception:
            return {}

    def _output_names(
        self, hef: Path, outputs: tuple[TensorLayout, ...], runner: Any, info: CompileFacts
    ) -> dict[str, str]:
        """Each compiled output stream's ONNX output: its original names as the HEF lists them
        (``HEF.get_original_names_from_vstream_name``, hailort's pyhailort), else as the HN's layer
        that makes the stream lists them."""
        hn = hn_dict(self._hn(runner))
        by_layer = {
            full.split("/")[-1]: body.get("original_names") or [] for full, body in hn.get("layers", {}).items()
        }
        streams = [t.name for t in outputs]
        made_by = info.onnx_outputs
        try:
            from hailo_platform import HEF

            found = output_names(streams, HEF(str(hef)).get_original_names_from_vstream_name, made_by)
        except Exception:
            found = {}
        missing = [s for s in streams if s not in found]
        return {**found, **output_names(missing, lambda s: by_layer.get(s.split("/")[-1], []), made_by)}

    def compile(self, quantized: Quantized, options: CompileOptions) -> Artifact:
        stages = quantized.stages  # the compile's own figures, beside the optimize's (run_compile reads them)
        with timed(stages, "reopen_s"):
            runner = self._runner(quantized)
        with named_errors("compile"), timed(stages, "compile_s"):
            made = runner.compile()
        hw_arch = quantized.info.hw_arch or target_arch(options)
        fit = hef_residency(len(made), hw_arch)
        weights = quantized.info.weights  # their residency judged by the HEF, as HailoRT loads it
        weights = weights and {**weights, "resident": fit["resident"], "device_memory_bytes": fit["device_bytes"]}
        quantized.info = replace(quantized.info, hef_residency=fit, weights=weights)
        if fit["resident"] == "no":  # HailoRT would fail at configure: refused before any device work
            raise HailoCompileError(f"compile: {fit['arithmetic']}")
        hef = bytes(made)
        folder = Path(quantized.info.workdir or self._dir())
        hef_path = folder / f"{quantized.info.net_name or 'loop_net'}.hef"
        hef_path.write_bytes(hef)
        guess = lambda: io_layouts(hn_dict(self._hn(runner)), self._params(runner)[1])  # noqa: E731
        with timed(stages, "layout_s"):
            (inputs, outputs), source = hef_io(hef_path, guess)
        names = self._output_names(hef_path, outputs, runner, quantized.info)
        quantized.info = replace(quantized.info, layout_source=source, output_names=names)
        self._runners.pop(bytes_sha(quantized.data), None)
        if self.workdir is None:  # a scratch folder: the HEF and HAR travel by value from here
            shutil.rmtree(folder, ignore_errors=True)
        return Artifact("hailo", hef, ".hef", inputs, outputs, extras={"har": quantized.data})

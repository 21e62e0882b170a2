"""The Dataflow Compiler's emulator as a device: scores the optimized HAR, not silicon.

``context`` picks the emulation: ``quantized`` (``SDK_QUANTIZED``, the default) or
``fp_optimized`` (``SDK_FP_OPTIMIZED``). The emulator takes float32 NHWC frames and returns
float32 (``runner.infer``), so its session declares float32 NHWC layouts with no grid: frames
reach it as the float values they are, never rounded onto a uint8 grid first (which would turn
[0, 1) inputs into zeros when the artifact carries no scale). SDK_QUANTIZED is reported not to
be bit-exact with silicon: the disagreement with a device is measured on dequantized outputs.
Nothing here is device time.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from loop.core.errors import LoopError
from loop.core.vocab import Artifact, TensorLayout
from loop.devices.base import Device, Health, RuntimeOptions, Session, back_to_back, check_frames, into

CONTEXTS = {"quantized": "SDK_QUANTIZED", "fp_optimized": "SDK_FP_OPTIMIZED"}


def float_layout(layout: TensorLayout) -> TensorLayout:
    """The same stream as the emulator sees it: float32, NHWC, no quantization grid."""
    return TensorLayout(layout.name, layout.shape, "float32", None, None, channels_last=layout.channels_last)


class HailoEmulatorSession(Session):
    def __init__(self, runner: Any, context: Any, stack: ExitStack, artifact: Artifact) -> None:
        self.runner = runner
        self.context = context
        self.stack = stack
        self.inputs = tuple(float_layout(t) for t in artifact.inputs)
        self.outputs = tuple(float_layout(t) for t in artifact.outputs)

    def infer(self, frames: Sequence[np.ndarray], out: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
        check_frames(self.inputs, frames, "input")
        if out is not None:
            check_frames(self.outputs, out, "output", exact=False)
        batch = [np.ascontiguousarray(f, np.float32).reshape(t.shape) for f, t in zip(frames, self.inputs, strict=True)]
        # A batch of float32 NHWC frames, exactly as given.
        result = self.runner.infer(self.context, batch[0] if len(batch) == 1 else batch)
        if isinstance(result, dict):
            results = [result[t.name] for t in self.outputs]
        else:
            results = list(result) if isinstance(result, (list, tuple)) else [result]
        if len(results) != len(self.outputs):
            raise LoopError(f"the emulator returned {len(results)} outputs, the artifact declares {len(self.outputs)}")
        arrays = [np.asarray(r, np.float32).reshape(t.shape) for r, t in zip(results, self.outputs, strict=True)]
        return into(out, arrays)

    def pipelined(self, frames: Sequence[np.ndarray], count: int, depth: int) -> float:
        """A timed loop of ``count`` emulated inferences; ``depth`` is ignored.

        Emulation time is host time spent emulating, not device time.
        """
        return back_to_back(lambda: self.infer(frames), count)

    def close(self) -> None:
        self.stack.close()


class HailoEmulatorDevice(Device):
    """Scores ``artifact.extras["har"]`` through ``ClientRunner.infer_context``."""

    name = "hailo-emulator"

    def __init__(self, context: str = "quantized") -> None:
        if context not in CONTEXTS:
            raise LoopError(f"unknown emulator context '{context}' (known: {', '.join(CONTEXTS)})")
        self.context = context

    @classmethod
    def available(cls) -> tuple[bool, str]:
        try:
            from hailo_sdk_client import ClientRunner, InferenceContext  # noqa: F401
        except Exception as exc:
            return False, f"hailo_sdk_client is not importable ({type(exc).__name__}: {exc})"
        return True, "Dataflow Compiler emulator (not device time)"

    def open(self, artifact: Artifact, options: RuntimeOptions) -> HailoEmulatorSession:
        from hailo_sdk_client import ClientRunner, InferenceContext

        if "har" not in artifact.extras:
            raise LoopError(
                "hailo-emulator needs the optimized HAR (artifact.extras['har']); recompile with the hailo backend"
            )
        stack = ExitStack()
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="loop-har-")))
        har = folder / "model.har"
        har.write_bytes(artifact.extras["har"])
        runner = ClientRunner(har=str(har))
        context = stack.enter_context(runner.infer_context(getattr(InferenceContext, CONTEXTS[self.context])))
        return HailoEmulatorSession(runner, context, stack, artifact)

    def health(self) -> Health:
        return Health()  # an emulator has no temperature, id or runtime warnings

    def describe(self) -> dict[str, str]:
        return {"device": self.name, "context": CONTEXTS[self.context]}

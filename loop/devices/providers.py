"""ONNX Runtime execution providers as devices: ``onnxruntime:CUDAExecutionProvider`` and the like.

The seed's closing question is where a stage should run, which needs a rate with the cost of
moving data to it stated beside it. So every inference goes through IOBinding in three
timed steps: copy the frames to the provider's memory, run with inputs and outputs bound
there, copy the outputs back. On the CPU provider (the one tested here) the copies are a
wrapper and a memcpy, and they are reported as measured, however small.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from loop.core.errors import LoopError
from loop.core.sessions import session
from loop.core.vocab import Artifact
from loop.devices.base import RuntimeOptions, Session, back_to_back, check_frames, into, median_split
from loop.devices.inflight import per_thread, threaded

# Where a provider keeps its tensors, as OrtValue names the device; the rest use host memory.
MEMORY = {"CUDAExecutionProvider": "cuda", "TensorrtExecutionProvider": "cuda", "DmlExecutionProvider": "dml"}


def provider_status() -> list[tuple[str, bool, str]]:
    """Every provider this ONNX Runtime build knows, whether it can run here, and why not."""
    import onnxruntime as ort

    here = set(ort.get_available_providers())
    return [
        (p, p in here, "installed" if p in here else f"not in this onnxruntime build ({ort.__version__})")
        for p in ort.get_all_providers()
    ]


def check_provider(provider: str) -> None:
    status = {p: (ok, why) for p, ok, why in provider_status()}
    if provider not in status:
        raise LoopError(f"unknown execution provider '{provider}' (known: {', '.join(status)})")
    ok, why = status[provider]
    if not ok:
        raise LoopError(f"execution provider '{provider}' cannot run here: {why}")


class ProviderSession(Session):
    def __init__(self, artifact: Artifact, options: RuntimeOptions, provider: str) -> None:
        import onnxruntime as ort

        self._ort = ort
        self._session = session(artifact.data, options.threads, "all", providers=(provider,), spin=options.spin)
        self._memory = MEMORY.get(provider, "cpu")
        self.inputs, self.outputs = artifact.inputs, artifact.outputs
        self.notes = (f"execution provider {provider}: copies in and out timed apart from compute (IOBinding)",)

    def _step(self, frames: Sequence[np.ndarray]) -> Callable[[], tuple[float, float, float, list[np.ndarray]]]:
        """One inference in three timed steps, on its own binding (one per thread in flight)."""
        check_frames(self.inputs, frames, "input")
        binding, run, ort = self._session.io_binding(), self._session.run_with_iobinding, self._ort
        shaped = [np.ascontiguousarray(f.reshape(t.shape)) for f, t in zip(frames, self.inputs, strict=True)]
        for t in self.outputs:
            binding.bind_output(t.name, self._memory)

        def step() -> tuple[float, float, float, list[np.ndarray]]:
            t0 = time.perf_counter()
            for t, f in zip(self.inputs, shaped, strict=True):
                binding.bind_ortvalue_input(t.name, ort.OrtValue.ortvalue_from_numpy(f, self._memory, 0))
            binding.synchronize_inputs()
            t1 = time.perf_counter()
            run(binding)
            binding.synchronize_outputs()
            t2 = time.perf_counter()
            outs = binding.copy_outputs_to_cpu()
            return t1 - t0, t2 - t1, time.perf_counter() - t2, outs

        return step

    def bound(self, frames: Sequence[np.ndarray]) -> Callable[[], object]:
        return self._step(frames)

    def infer(self, frames: Sequence[np.ndarray], out: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
        if out is not None:
            check_frames(self.outputs, out, "output", exact=False)
        return into(out, self._step(frames)()[3])

    def pipelined(self, frames: Sequence[np.ndarray], count: int, depth: int) -> float:
        steps = [self._step(frames) for _ in range(max(depth, 1))]
        return back_to_back(steps[0], count) if depth <= 1 else threaded(per_thread(steps), count, depth)

    def split_ms(self, frames: Sequence[np.ndarray], count: int) -> dict[str, float] | None:
        step = self._step(frames)
        return median_split([step()[:3] for _ in range(count)])

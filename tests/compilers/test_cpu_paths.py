"""The bias-correction guard decides the same on every CPU (issue 50).

Two checks. Under valgrind, which presents a CPU without AVX-512 or VNNI, ONNX Runtime takes its
AVX2 kernels, whose u8 x s8 pair sums saturate at int16 unless asked not to (``int8_product``):
loop's sessions must compute exactly there, and the guard's figures must come out as they do
natively, and so must its decision. And with every output the
guard reads moved at float32 rounding, no decision moves. Valgrind is required where
``LOOP_REQUIRE_VALGRIND=1`` (``.ci/run`` installs it and sets it), so CI never passes these unrun.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from authored import linear_model, one_linear, patterns_model

from loop.compilers.bias import guard as bias_guard
from loop.compilers.onnxruntime import OnnxRuntimeCompiler
from loop.core.vocab import CompileOptions

TESTS = Path(__file__).resolve().parents[1]


def _linear_noise() -> tuple[onnx.ModelProto, np.ndarray]:
    """A linear layer on inputs of zero mean: its correction is noise (test_bias_correction)."""
    rng = np.random.default_rng(3)
    model = one_linear("fc", rng.normal(0, 0.3, (64, 16)).astype(np.float32), np.zeros(16, np.float32), False)
    return model, rng.normal(0, 1, (6, 64)).astype(np.float32)


def cases() -> Iterator[tuple[str, onnx.ModelProto, np.ndarray]]:
    """The models whose guard decisions the suite holds, with their calibration frames."""
    yield "patterns", patterns_model(), np.random.default_rng(1).random((8, 3, 16, 16), dtype=np.float32)
    yield "linear", linear_model(), np.random.default_rng(0).random((32, 10, 16), dtype=np.float32)
    yield "noise", *_linear_noise()


def int8_product(loop_session: bool) -> float:
    """255 x 127, eight times over, through a fused QDQ MatMul: 259,080 exact, 131,068 where
    byte pairs saturate at int16 (``vpmaddubsw``). ``loop_session``: through loop's own session,
    otherwise through a plain ``InferenceSession`` at the same level."""
    import onnxruntime as ort

    from loop.core.sessions import int8_probe, session

    data, feed = int8_probe()
    if loop_session:
        return float(session(data, 1, "all").run(None, feed)[0].item())
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return float(ort.InferenceSession(data, options, providers=["CPUExecutionProvider"]).run(None, feed)[0].item())


def test_loop_sessions_multiply_int8_exactly_here():
    assert int8_product(loop_session=True) == 255 * 127 * 8


def decisions() -> dict[str, dict]:
    """Each case's guard: kept or dropped, and each fold's share of its error removed."""
    out = {}
    for name, model, frames in cases():
        q = OnnxRuntimeCompiler().optimize(model.SerializeToString(), frames, CompileOptions(bias_correction=True))
        found = q.info.bias_correction
        out[name] = {"guard": found["guard"], "folds": found["guard_folds"], "corrected": found["corrected"]}
    return out


def _valgrind() -> str:
    found = shutil.which("valgrind")
    if found is None:
        if os.environ.get("LOOP_REQUIRE_VALGRIND") == "1":
            pytest.fail("valgrind is required here (LOOP_REQUIRE_VALGRIND=1) and is not installed")
        pytest.skip("valgrind is not installed here (apt-get install valgrind)")
    return found


def test_the_guard_decides_as_it_does_on_a_cpu_without_vnni():
    script = (
        "import json, sys; sys.path[:0] = [sys.argv[1], sys.argv[1] + '/compilers']\n"
        "from test_cpu_paths import decisions, int8_product\n"
        "products = [int8_product(False), int8_product(True)]\n"
        "print(json.dumps({'products': products, 'decisions': decisions()}))\n"
    )
    from loop.core.sessions import SATURATES_ENV

    env = {k: v for k, v in os.environ.items() if k != SATURATES_ENV}  # this CPU's answer is not valgrind's
    done = subprocess.run(
        [_valgrind(), "--tool=none", "-q", sys.executable, "-c", script, str(TESTS)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    there = json.loads(done.stdout.strip().splitlines()[-1])
    # the other kernels really ran: plain sessions saturate there, and loop's are exact
    assert there["products"] == [4 * 32767, 255 * 127 * 8]
    here = decisions()
    for name, mine in here.items():
        theirs = there["decisions"][name]
        assert theirs["guard"] == mine["guard"] and theirs["corrected"] == mine["corrected"], name
        np.testing.assert_allclose(theirs["folds"], mine["folds"], atol=bias_guard.MARGIN / 10, err_msg=name)


def test_no_guard_decision_moves_at_float32_rounding(monkeypatch: pytest.MonkeyPatch):
    """Every output the guard reads moved by up to 2 float32 steps, in two seeded draws."""
    exact, plain, seed = decisions(), bias_guard._outputs, [0]

    def jittered(model: onnx.ModelProto, frames: list, threads: int) -> list[list[np.ndarray]]:
        rng = np.random.default_rng(seed[0])
        seed[0] += 1
        step = np.finfo(np.float32).eps / 2
        return [
            [(o * (1 + rng.integers(-2, 3, o.shape) * step)).astype(o.dtype) for o in outs]
            for outs in plain(model, frames, threads)
        ]

    monkeypatch.setattr(bias_guard, "_outputs", jittered)
    for start in (0, 1000):
        seed[0] = start
        for name, found in decisions().items():
            assert found["guard"] == exact[name]["guard"] and found["corrected"] == exact[name]["corrected"], name
            np.testing.assert_allclose(found["folds"], exact[name]["folds"], atol=bias_guard.MARGIN / 10, err_msg=name)

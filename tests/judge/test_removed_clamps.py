"""A forced range past a clamp the quantizer removed changes the function, whatever produced
the clamped tensor: a layer, a bias Add (as Paddle exports a conv), a HardSigmoid's Mul and Add."""

from __future__ import annotations

import textwrap
from pathlib import Path

import onnx
import pytest
from authored import FAST_MEASURE, clamp_chain_model
from sweeps import _sweep_runs

from loop.judge.structure import analyse, describe

CHAINS = {"add-relu": (0.0, float("inf")), "add-clip": (0.0, 6.0), "hardsigmoid": (0.0, 1.0)}


@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_the_structure_knows_the_clamp_behind_any_producer(chain: str) -> None:
    structure = analyse(clamp_chain_model(chain))
    conv2 = next(r for r in describe(structure) if r["layer"] == "conv2")
    lo, hi = CHAINS[chain]
    assert conv2["in_tensor"] == "act"
    assert conv2["in_bounds"] == [lo, hi if hi != float("inf") else None]


def _sweep(tmp_path: Path, chain: str, bias_correction: bool) -> dict[str, dict]:
    onnx.save(clamp_chain_model(chain), str(tmp_path / "m.onnx"))
    lo, hi = CHAINS[chain]
    inside = [lo, min(hi, 4.0) / 2]
    path = tmp_path / "s.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            sweep: clamp-{chain}
            base: m.onnx
            calibration: {{count: 8}}
            inputs: {{count: 2}}
            compile: {{bias_correction: {str(bias_correction).lower()}}}
            {FAST_MEASURE}
            variants:
              - name: base
              - {{name: past, perturb: [{{op: force_range_in, layer: conv2, range: [-20, 20]}}]}}
              - {{name: inside, perturb: [{{op: force_range_in, layer: conv2, range: {inside}}}]}}
            """
        )
    )
    return _sweep_runs(path, tmp_path / "runs")


@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_a_range_past_the_clamp_is_confounded_naming_it(tmp_path: Path, chain: str) -> None:
    runs = _sweep(tmp_path, chain, bias_correction=False)
    past = runs["past"]
    assert past["verdict"] == "confounded"
    function = [c for c in past["changes"] if c["what"] == "function"]
    lo, hi = CHAINS[chain]
    assert len(function) == 1 and function[0]["layer"] == "conv2" and not function[0]["allowed"]
    assert f"act now spans [-20.1, 19.9], past the removed clamp's [{lo:g}, {hi:g}]" in function[0]["detail"]
    assert runs["inside"]["verdict"] == "clean"  # a range within the clamp is only a scale


def test_the_compile_reports_which_clamps_it_removed(tmp_path: Path) -> None:
    from loop.author.frames import seeded
    from loop.compilers.onnxruntime import OnnxRuntimeCompiler
    from loop.core.vocab import CompileOptions

    compiler = OnnxRuntimeCompiler()
    model = clamp_chain_model("hardsigmoid").SerializeToString()
    quantized = compiler.optimize(model, seeded((1, 3, 8, 8), 4, 0), CompileOptions(bias_correction=False))
    assert quantized.info.removed_clamps == {"act": [0.0, 1.0]}

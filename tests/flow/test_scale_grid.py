"""scale_grid on ONNX Runtime, end to end: one optimize per base, each candidate a patch of its
quantized model, audited on what the compile produced (issue 43)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from authored import FAST_MEASURE, TWO_CONV_RECIPE
from sweeps import _sweep_runs

from loop.author.graphs import build_recipe
from loop.author.perturb import parse_op
from loop.author.sweepfile import parse
from loop.core.errors import LoopError
from loop.core.vocab import CompileOptions, Rescale
from loop.flow.compile_pool import iter_compiled
from loop.judge.structure import analyse
from loop.store.cache import Cache
from loop.store.ledger import Ledger

SWEEP = f"""\
sweep: grid
base: tiny.yaml
calibration: {{count: 16}}
inputs: {{count: 4}}
compile: {{bias_correction: true}}
{FAST_MEASURE}
variants:
  - name: base
  - name: weights
    perturb: [{{op: scale_grid, layer: conv1, of: weights, factor: 1.1}}]
  - name: output
    perturb: [{{op: scale_grid, layer: conv1, of: output, factor: 2.8}}]
  - name: forced
    perturb: [{{op: force_range_out, layer: conv1, range: [0.0, 8.0]}}]
  - name: every
    perturb: [{{op: scale_grid, layer: "conv*", of: weights, factor: 0.9}}]
"""


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, dict], dict[str, list], Path]:
    folder = tmp_path_factory.mktemp("grid")
    (folder / "tiny.yaml").write_text(TWO_CONV_RECIPE)
    (folder / "sweep.yaml").write_text(SWEEP)
    runs = _sweep_runs(folder / "sweep.yaml", folder / "runs")
    with Ledger(folder / "runs" / "ledger.sqlite") as ledger:
        prints = {name: list(ledger.record(r["id"]).layers) for name, r in runs.items()}
    return runs, prints, folder


def _layer(prints: list, name: str):
    return next(p for p in prints if p.name == name)


def test_weight_scales_move_by_the_factor_and_the_integers_stay_the_base(swept):
    runs, prints, _ = swept
    assert runs["weights"]["verdict"] == "clean"
    base, mine = _layer(prints["base"], "conv1"), _layer(prints["weights"], "conv1")
    assert mine.kernel_int_sha == base.kernel_int_sha is not None
    assert mine.bias_int_sha == base.bias_int_sha is not None
    assert mine.kernel_sha != base.kernel_sha
    assert np.allclose(np.divide(mine.weight_scale, base.weight_scale), 1.1, rtol=1e-6)
    assert {c["what"] for c in runs["weights"]["changes"]} == {"kernel-scale", "bias-scale"}


def test_an_output_grid_moved_by_its_factor_is_clean_and_the_forced_range_is_not(swept):
    runs, prints, _ = swept
    assert runs["output"]["verdict"] == "clean"
    base, mine = _layer(prints["base"], "conv1"), _layer(prints["output"], "conv1")
    assert mine.out_scale == pytest.approx(base.out_scale * 2.8, rel=1e-6)
    assert _layer(prints["output"], "conv2").in_scale == pytest.approx(base.out_scale * 2.8, rel=1e-6)
    assert all(p.kernel_int_sha == _layer(prints["base"], p.name).kernel_int_sha for p in prints["output"])
    # the seed's finding: the optimizer re-derives the biases against a forced range
    assert runs["forced"]["verdict"] == "confounded"
    assert any(c["what"] == "bias" and not c["allowed"] for c in runs["forced"]["changes"])


def test_a_glob_edits_every_layer_it_matches(swept):
    runs, prints, _ = swept
    assert runs["every"]["verdict"] == "clean"
    for name in ("conv1", "conv2"):
        base, mine = _layer(prints["base"], name), _layer(prints["every"], name)
        assert np.allclose(np.divide(mine.weight_scale, base.weight_scale), 0.9, rtol=1e-6)
        assert mine.kernel_int_sha == base.kernel_int_sha


def test_edited_variants_compile_with_no_calibration_from_the_base_quantized_model(swept):
    runs, _, _ = swept
    optimized = [name for name, r in runs.items() if "optimize_s" in r["stages"]]
    assert sorted(optimized) == ["base", "forced"]  # once per base, and the forced range's own
    for name in ("weights", "output", "every"):
        assert "rescale_s" in runs[name]["stages"]


def test_the_quantized_model_is_cached_and_hit_by_a_later_batch(swept, tmp_path):
    _, _, folder = swept
    model = build_recipe(folder / "tiny.yaml").SerializeToString()
    spec = parse(folder / "sweep.yaml")
    calibration = np.random.default_rng(1).random((4, 3, 8, 8), dtype=np.float32)
    edit = CompileOptions(rescales=(Rescale("conv1", "weights", (1.2,)),))
    cache = Cache(tmp_path / "cache")
    first = [
        r for batch in iter_compiled("onnxruntime", [(model, calibration, edit)], jobs=1, cache=cache) for _, r in batch
    ]
    assert first[0].ok and first[0].info.quantized_from == "optimize"  # its own leader: optimized once
    other = edit.model_copy(update={"rescales": (Rescale("conv1", "weights", (0.8,)),)})
    again = [
        r
        for batch in iter_compiled("onnxruntime", [(model, calibration, other)], jobs=1, cache=cache)
        for _, r in batch
    ]
    assert again[0].ok and again[0].info.quantized_from == "cache" and "optimize_s" not in again[0].stages
    assert spec.compile.bias_correction


def test_factors_of_the_wrong_length_are_refused_in_one_line(recipe):
    structure = analyse(build_recipe(recipe))
    op = parse_op({"op": "scale_grid", "layer": "conv1", "of": "weights", "factors": np.full(3, 1.1)})
    with pytest.raises(LoopError) as err:
        op.check(structure)
    assert "3 factors for layer 'conv1', which has 8 output channels" in str(err.value)
    assert "\n" not in str(err.value)
    ok = parse_op({"op": "scale_grid", "layer": "conv1", "of": "weights", "factors": np.linspace(0.9, 1.1, 8)})
    ok.check(structure)
    assert len(ok.rescales(structure)[0].factors) == 8


def test_factors_are_for_weights_and_a_factor_is_positive():
    with pytest.raises(LoopError, match="of: weights only"):
        parse_op({"op": "scale_grid", "layer": "conv1", "of": "output", "factors": [1.0, 2.0]})
    with pytest.raises(LoopError, match="greater than 0"):
        parse_op({"op": "scale_grid", "layer": "conv1", "of": "weights", "factor": 0.0})
    with pytest.raises(LoopError, match="exactly one of factor and factors"):
        parse_op({"op": "scale_grid", "layer": "conv1", "of": "weights"})

"""Ops: what they change, what they may change (footprints by compile option), and their errors."""

from __future__ import annotations

import pytest
from authored import attention_model, patterns_model

from loop.author.perturb import Allow, parse_op
from loop.core.errors import LoopError
from loop.core.vocab import CompileOptions
from loop.judge.structure import analyse


def test_calibration_footprint_follows_bias_correction():
    op, s = parse_op({"op": "calibration", "seed": 3}), analyse(patterns_model())
    assert Allow("*", "bias") in op.footprint(s, CompileOptions(bias_correction=True))
    off = op.footprint(s, CompileOptions(bias_correction=False))
    assert Allow("*", "bias-rounding") in off and not any(r.what == "bias" for r in off)


def test_force_range_in_lands_on_the_grid_head():
    s = analyse(patterns_model())
    op = parse_op({"op": "force_range_in", "layer": "head", "range": [-1, 2]})
    (override,) = op.overrides(s)
    assert override.tensor == "g"
    rules = op.footprint(s, CompileOptions())
    assert Allow("head", "in_scale") in rules and Allow("last", "in_scale") in rules


def test_unknown_layer_names_the_closest_few():
    s = analyse(patterns_model())
    with pytest.raises(LoopError) as err:
        parse_op({"op": "scale_weights", "layer": "after_pol", "factor": 1.1}).check(s)
    text = str(err.value)
    assert "did you mean 'after_pool'" in text and "9 quantized layers" in text and len(text) < 200


def test_weight_ops_refuse_a_layer_without_weights():
    s = analyse(attention_model())
    with pytest.raises(LoopError, match="no weights"):
        parse_op({"op": "scale_weights", "layer": "qk", "factor": 1.1}).check(s)
    parse_op({"op": "force_range_out", "layer": "qk", "range": [-4, 4]}).check(s)  # a range is fine


def test_a_shared_kernel_is_copied_before_it_changes():
    model = patterns_model()
    shared = next(n for n in model.graph.node if n.name == "to_concat_b")
    shared.input[1] = "w3"  # now it shares to_concat_a's kernel
    s = analyse(model)
    parse_op({"op": "scale_weights", "layer": "to_concat_a", "factor": 2.0}).apply(model, s)
    a, b = (next(n for n in model.graph.node if n.name == name) for name in ("to_concat_a", "to_concat_b"))
    assert a.input[1] == "w3.to_concat_a" and b.input[1] == "w3"

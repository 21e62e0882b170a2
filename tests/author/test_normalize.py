"""Weights as the quantizer wants them: Constant nodes, Identity fan-out and listed initializers."""

from __future__ import annotations

from authored import old_style_model

from loop.author.normalize import normalize
from loop.judge.structure import analyse


def test_old_style_model_is_made_plain():
    model = old_style_model()
    notes = normalize(model)
    assert notes == [
        "1 Constant nodes made initializers",
        "1 Identity nodes over initializers bypassed",
        "2 initializers unlisted from the graph inputs",
    ]
    assert [v.name for v in model.graph.input] == ["x"] and model.ir_version >= 4
    assert {n.op_type for n in model.graph.node} == {"Conv", "Relu"}
    layers = analyse(model).layers
    assert [(lp.name, lp.weight, lp.bias) for lp in layers] == [("conv", "W", "B"), ("conv2", "W2", "B")]


def test_normalize_is_idempotent():
    model = old_style_model()
    normalize(model)
    again = model.SerializeToString()
    assert normalize(model) == [] and model.SerializeToString() == again

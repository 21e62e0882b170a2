"""Verdicts from fingerprints: built by hand here, so each rule is pinned on its own."""

from dataclasses import replace

from loop.core.kinds import Verdict
from loop.core.vocab import LayerPrint
from loop.judge.audit import audit, observe
from loop.spec.perturb import Allow, Expect

CLEAN, CONFOUNDED, NO_EFFECT = Verdict.CLEAN, Verdict.CONFOUNDED, Verdict.NO_EFFECT


def layer(name: str, **kw) -> LayerPrint:
    base = dict(
        name=name,
        op="Conv",
        kernel_sha=f"k-{name}",
        bias_sha=f"b-{name}",
        weight_scale=(0.01,),
        weight_zero_point=(0,),
        in_tensor=f"{name}_in",
        in_scale=0.02,
        in_zero_point=0,
        out_tensor=f"{name}_out",
        out_scale=0.03,
        out_zero_point=0,
        bias=(0.5, -0.5),
        bias_step=(0.001, 0.001),
    )
    base.update(kw)
    return LayerPrint(**base)


BASE = [layer("conv1"), layer("conv2", in_tensor="conv1_out", in_scale=0.03)]
FORCE_CONV1 = [Allow("conv1", "out_scale"), Allow("conv2", "in_scale"), Allow("conv2", "bias-rounding")]


def test_nothing_changed_is_no_effect():
    assert audit(BASE, BASE, FORCE_CONV1).verdict == NO_EFFECT


def test_scale_with_rounding_is_clean():
    v = [
        replace(BASE[0], out_scale=0.06),
        replace(BASE[1], in_scale=0.06, bias_sha="b2", bias=(0.5004, -0.5), bias_step=(0.002, 0.002)),
    ]
    result = audit(BASE, v, FORCE_CONV1)
    assert result.verdict == CLEAN
    assert {(c.layer, c.what) for c in result.changes} == {
        ("conv1", "out_scale"),
        ("conv2", "in_scale"),
        ("conv2", "bias-rounding"),
    }


def test_bias_beyond_rounding_is_confounded_and_named():
    v = [
        replace(BASE[0], out_scale=0.06),
        replace(BASE[1], in_scale=0.06, bias_sha="b2", bias=(0.51, -0.5), bias_step=(0.002, 0.002)),
    ]
    result = audit(BASE, v, FORCE_CONV1)
    assert result.verdict == CONFOUNDED
    assert [(c.layer, c.what) for c in result.outside] == [("conv2", "bias")]
    assert "6.7x the rounding bound" in result.outside[0].detail


def test_kernel_change_outside_footprint():
    v = [replace(BASE[0], out_scale=0.06, kernel_sha="other"), replace(BASE[1], in_scale=0.06)]
    assert audit(BASE, v, FORCE_CONV1).outside[0].what == "kernel"


def test_expect_widens_and_narrows():
    v = [replace(BASE[0], out_scale=0.06, kernel_sha="other"), replace(BASE[1], in_scale=0.06)]
    assert audit(BASE, v, FORCE_CONV1, Expect(allow=(Allow("conv1", "kernel"),))).verdict == CLEAN
    narrowed = audit(BASE, [*v[:1], BASE[1]], FORCE_CONV1, Expect(deny=(Allow("conv1", "out_scale"),)))
    assert narrowed.verdict == CONFOUNDED


def test_range_past_removed_activation_changes_the_function():
    bounds = {"conv1_out": (0.0, 6.0)}
    base = [replace(BASE[0], out_scale=6.0 / 255)]
    wide = [replace(BASE[0], out_scale=9.0 / 255)]
    inside = [replace(BASE[0], out_scale=4.0 / 255)]
    assert audit(base, wide, FORCE_CONV1, bounds=bounds).outside[0].what == "function"
    assert audit(base, inside, FORCE_CONV1, bounds=bounds).verdict == CLEAN
    below = [replace(BASE[0], out_zero_point=64)]
    assert audit(base, below, FORCE_CONV1, bounds=bounds).verdict == CONFOUNDED


def test_observe_reports_missing_layers():
    assert observe(BASE, BASE[:1])[0].detail == "layer missing from the variant"

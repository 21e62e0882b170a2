"""Verdicts from fingerprints: built by hand here, so each rule is pinned on its own."""

from dataclasses import replace

from loop.author.perturb import Allow, Expect
from loop.core.kinds import Verdict
from loop.core.vocab import LayerPrint
from loop.judge.audit import audit, observe

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


def test_same_float_kernel_rerounded_on_a_moved_grid_is_rounding_not_a_confound():
    base = [replace(BASE[0], float_sha="f1", off_grid=0), replace(BASE[1], float_sha="f2", off_grid=0)]
    v = [
        replace(base[0], out_scale=0.06),
        replace(base[1], in_scale=0.06, kernel_sha="k2-moved", weight_scale=(0.02,)),
    ]
    result = audit(base, v, FORCE_CONV1)
    assert result.verdict == CLEAN
    rounding = next(c for c in result.changes if c.layer == "conv2" and c.what == "kernel-rounding")
    assert "channels (0)" in rounding.detail and "input scale moved 2x" in rounding.detail


def test_rounding_can_still_be_denied():
    base = [replace(BASE[0], float_sha="f1", off_grid=0)]
    v = [replace(base[0], kernel_sha="moved", weight_scale=(0.02,))]
    assert audit(base, v, [], Expect(deny=(Allow("conv1", "kernel-rounding"),))).verdict == CONFOUNDED


def test_a_kernel_off_its_float_grid_is_a_re_derivation():
    base = [replace(BASE[0], float_sha="f1", off_grid=0), replace(BASE[1], float_sha="f2", off_grid=0)]
    v = [replace(base[0], out_scale=0.06), replace(base[1], in_scale=0.06, kernel_sha="re-derived", off_grid=7)]
    result = audit(base, v, FORCE_CONV1)
    assert result.verdict == CONFOUNDED
    assert [(c.layer, c.what) for c in result.outside] == [("conv2", "kernel")]
    assert "7 values off its grid: re-derived" in result.outside[0].detail


def test_a_changed_float_kernel_outside_the_footprint_is_a_confound():
    base = [replace(BASE[0], float_sha="f1", off_grid=0)]
    v = [replace(base[0], kernel_sha="other", float_sha="f1-scaled")]
    result = audit(base, v, [])
    assert result.verdict == CONFOUNDED and "float kernel changed" in result.outside[0].detail


def test_a_float_bias_is_judged_as_a_float():
    base = [replace(BASE[0], bias_step=None)]
    moved = [replace(base[0], bias_sha="b-moved", bias=(0.5, -0.4))]
    result = audit(base, moved, [Allow("conv1", "bias")])
    assert result.verdict == CLEAN and result.changes[0].detail.startswith("float bias")
    assert audit(base, moved, []).verdict == CONFOUNDED
    assert audit(base, [replace(base[0], bias_sha="same-values")], []).verdict == NO_EFFECT


def test_a_fused_layer_answers_to_each_of_its_onnx_nodes():
    fused = dict(compiled_name="net/conv1", onnx_names=("Conv_0", "BatchNormalization_1", "Relu_2"))
    base = [replace(BASE[0], name="Conv_0", **fused)]
    v = [replace(base[0], out_scale=0.06)]
    assert audit(base, v, [Allow("Relu_2", "out_scale")]).verdict == CLEAN
    assert audit(base, v, [Allow("Conv_9", "out_scale")]).verdict == CONFOUNDED


def test_an_unmapped_layer_says_so():
    base = [replace(BASE[0], name="net/ew_add1", compiled_name="net/ew_add1")]
    v = [replace(base[0], out_scale=0.06)]
    result = audit(base, v, [])
    assert result.verdict == CONFOUNDED and result.changes[0].detail.startswith("unmapped layer (no ONNX node)")


def test_a_16_bit_grid_spans_65535_steps():
    bounds = {"conv1_out": (0.0, 6.0)}
    base = [replace(BASE[0], out_scale=6.0 / 65535, out_bits=16)]
    same_range = [replace(BASE[0], out_scale=5.0 / 65535, out_bits=16)]
    assert audit(base, same_range, FORCE_CONV1, bounds=bounds).verdict == CLEAN
    wide = [replace(BASE[0], out_scale=9.0 / 65535, out_bits=16)]
    assert audit(base, wide, FORCE_CONV1, bounds=bounds).outside[0].what == "function"


def test_a_small_scale_ratio_keeps_its_digits():
    v = [replace(BASE[0], out_scale=0.03 * 0.00123)]
    detail = observe(BASE[:1], v)[0].detail
    assert "(0.00123x)" in detail

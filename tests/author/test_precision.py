"""The ``precision`` op: parsing, its errors at their line, globs, and its footprint."""

from __future__ import annotations

import pytest
from authored import patterns_model

from loop.author.perturb import Allow, LayerPrecision, parse_op
from loop.author.sweepfile import parse
from loop.core.errors import LoopError
from loop.core.vocab import CompileOptions, Precision
from loop.judge.structure import analyse

SWEEP = """\
sweep: s
base: tiny.yaml
variants:
  - name: base
  - name: p
    perturb:
      - {op: precision, layer: conv1, bits: 16}
"""


def test_a_sweep_file_names_a_layer_or_a_glob(write_sweep):
    spec = parse(write_sweep(SWEEP.replace("conv1", "'conv*'")))
    assert spec.variants[1].ops == (LayerPrecision(layer="conv*", bits=16),)


@pytest.mark.parametrize(
    "old, new, field, words",
    [
        ("bits: 16", "bits: 8", "variants[1].perturb[0].bits", "16 or 32"),
        ("bits: 16", "bits: '16'", "variants[1].perturb[0].bits", "16 or 32"),
        ("layer: conv1, ", "", "variants[1].perturb[0].layer", "missing required key 'layer'"),
        ("conv1", "conv9", "variants[1].perturb[0].layer", "unknown layer 'conv9'"),
        ("conv1", "'dense*'", "variants[1].perturb[0].layer", "'dense*' matches none of the 2 quantized layers"),
    ],
)
def test_a_bad_precision_is_one_line_at_its_field(write_sweep, old, new, field, words):
    with pytest.raises(LoopError) as info:
        parse(write_sweep(SWEEP.replace(old, new)))
    err = info.value
    assert err.file.endswith("sweep.yaml") and err.line == 7 and err.field == field
    assert words in err.message and "\n" not in str(err)


def test_a_glob_resolves_to_each_layer_on_its_quantized_tensor():
    s = analyse(patterns_model())
    op = parse_op({"op": "precision", "layer": "to_*", "bits": 16})
    assert [(p.layer, p.tensor) for p in op.precisions(s)] == [
        ("to_add", "c2"),
        ("to_concat_a", "c3"),
        ("to_concat_b", "c4"),
    ]
    (first,) = parse_op({"op": "precision", "layer": "first", "bits": 16}).precisions(s)
    assert first.tensor == "r0"  # the Relu's output, which the quantizer quantizes


def test_the_footprint_is_the_tensor_and_with_bias_correction_the_biases_after_it():
    s = analyse(patterns_model())
    op = parse_op({"op": "precision", "layer": "depthwise", "bits": 16})
    (p,) = op.precisions(s)
    consumers = [lp.name for lp in s.consumers_of(p.tensor)]
    plain = op.footprint(s, CompileOptions(bias_correction=False))
    assert Allow("depthwise", "out_scale") in plain and consumers
    assert all(Allow(c, "in_scale") in plain for c in consumers)
    assert not any(r.what in ("bias", "kernel") for r in plain)
    corrected = op.footprint(s, CompileOptions(bias_correction=True))
    later = [lp.name for lp in s.layers[s.layer("depthwise").index :]]
    assert {r.layer for r in corrected if r.what == "bias"} == set(later)
    assert not any(r.what == "kernel" for r in corrected)


def test_32_bits_may_change_the_layers_own_kernel():
    s = analyse(patterns_model())
    rules = parse_op({"op": "precision", "layer": "depthwise", "bits": 32}).footprint(s, CompileOptions())
    assert Allow("depthwise", "kernel") in rules


def test_precisions_reach_the_compile_options_and_its_cache_key(write_sweep, tmp_path):
    from loop.author.author import author
    from loop.store.cache import options_json

    spec = parse(write_sweep(SWEEP.replace("conv1", "'conv*'")))
    base, p = (author(spec, v, i == 0) for i, v in enumerate(spec.variants))
    assert base.options.precisions == ()
    assert p.options.precisions == (Precision("conv1", 16, "conv1_out"), Precision("conv2", 16, "conv2_out"))
    assert options_json(base.options) != options_json(p.options)
    assert p.group == base.group == ""


def test_a_node_that_is_not_a_layer_is_named_as_loop_noise_names_it():
    """An Add (and the Relu the quantizer removes after it) writes grid r3, read by to_concat_a and
    to_concat_b: its tensor comes from the model, its footprint from that tensor."""
    from loop.author.perturb import with_tensors

    model, s = patterns_model(), analyse(patterns_model())
    op = parse_op({"op": "precision", "layer": "add", "bits": 16})
    op.check(s)
    (p,) = with_tensors(op.precisions(s), model.SerializeToString(), s)
    assert p == Precision("add", 16, "r3")
    rules = op.footprint(s, CompileOptions(bias_correction=False, precisions=(p,)))
    assert {r.layer for r in rules if r.what == "in_scale"} == {"to_concat_a", "to_concat_b"}


def test_precisions_travel_to_an_isolated_compile_and_back():
    from loop.store.codec import options_from_json, options_to_json

    options = CompileOptions(precisions=(Precision("conv1", 16, "conv1_out"), Precision("conv2", 32, "conv2_out")))
    assert options_from_json(options_to_json(options)) == options

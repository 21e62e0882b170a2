"""A layer's print as loop stores it: long runs of floats packed as their float64 bytes, exactly,
and an older record's plain lists read as they are."""

from __future__ import annotations

import json
import math

import numpy as np

from loop.core.vocab import PACK_FROM, PACKED, LayerPrint


def _print(n: int) -> LayerPrint:
    scales = tuple(np.random.default_rng(n).random(n).tolist())
    bias = (*scales[:-2], math.inf, -0.0) if n >= 2 else scales
    return LayerPrint(
        "conv", "Conv", "k", "b", weight_scale=scales, weight_zero_point=(0,) * n, bias=bias, bias_step=scales
    )


def test_a_print_with_many_channels_round_trips_exactly_through_json():
    lp = _print(300)
    stored = json.loads(json.dumps(lp.to_json()))
    assert set(stored["weight_scale"]) == {PACKED} and isinstance(stored["weight_zero_point"], list)
    back = LayerPrint.from_json(stored)
    assert back == lp and math.isinf(back.bias[-2]) and math.copysign(1.0, back.bias[-1]) < 0  # type: ignore[index]


def test_a_short_print_stays_plain_and_an_older_record_reads_as_it_is():
    lp = _print(PACK_FROM - 1)
    stored = json.loads(json.dumps(lp.to_json()))
    assert isinstance(stored["weight_scale"], list) and LayerPrint.from_json(stored) == lp
    older = {**json.loads(json.dumps(_print(300).to_json())), "weight_scale": list(_print(300).weight_scale)}
    assert LayerPrint.from_json(older).weight_scale == _print(300).weight_scale


def test_runs_json_shows_no_packed_values():
    from loop.core.record import RunRecord

    run = RunRecord(1, "s", "v", "ok", layers=(_print(300),))
    shown = json.dumps(run.to_json(["layers"]))
    assert PACKED not in shown and json.loads(shown)["layers"][0]["name"] == "conv"


def test_a_compiler_that_returns_its_facts_as_a_dict_still_compiles() -> None:
    """A third-party compiler written when a quantized model's facts were a free dict: the dict is
    read into CompileFacts (known keys typed, others kept in ``more``), not refused."""
    from loop.core.facts import CompileFacts
    from loop.core.vocab import Quantized

    q = Quantized("plugin", b"", info={"host": "h", "warnings": ["w"], "theirs": 1})  # type: ignore[arg-type]
    assert isinstance(q.info, CompileFacts)
    assert (q.info.host, q.info.warnings, dict(q.info.more)) == ("h", ("w",), {"theirs": 1})

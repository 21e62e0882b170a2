"""The schema is the one declaration of the sweep file: the README and the dataclasses agree with it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from loop.core.errors import LoopError
from loop.core.vocab import CompileOptions
from loop.spec import schema
from loop.spec.schema_doc import reference, splice
from loop.spec.sweepfile import DataSpec, MeasureSpec
from loop.spec.yamlio import _load

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_holds_exactly_the_generated_tables() -> None:
    text = README.read_text()
    assert reference() in text, "README is stale: run python tools/readme_schema.py"
    assert splice(text) == text


def test_every_key_of_every_section_is_in_the_readme() -> None:
    text = README.read_text()
    for model in (schema.Sweep, schema.Variant, schema.Data, schema.Compile, schema.Measure, schema.RecipeLayer):
        for key in model.model_fields:
            assert f"| `{key}` |" in text or key == "op", key


@pytest.mark.parametrize("model, plain", [(schema.Measure, MeasureSpec()), (schema.Compile, CompileOptions())])
def test_schema_defaults_are_the_dataclass_defaults(model: type[schema.Strict], plain: object) -> None:
    declared = model()
    for f in dataclasses.fields(plain):  # type: ignore[arg-type]
        if f.name in model.model_fields:
            value = getattr(declared, f.name)
            value = (value,) if f.name == "depth" else value
            assert value == getattr(plain, f.name), f.name


def test_data_defaults_follow_the_sweep() -> None:
    assert schema.Data().count is None and DataSpec().count == 64


def _error(text: str) -> LoopError:
    with pytest.raises(LoopError) as info:
        schema.validate(_load(text))
    return info.value


@pytest.mark.parametrize(
    "text, line, field, words",
    [
        (
            "sweep: s\nbase: b\nvariants:\n  - name: a\n    measure:\n      frames: -1\n",
            6,
            "variants[0].measure.frames",
            "greater than or equal to 1, got -1",
        ),
        (
            "sweep: s\nbase: b\nvariants:\n  - name: a\n  - name: b\n    perturb:\n      - op: scale_weights\n"
            "        layer: c\n        factor: x\n",
            9,
            "variants[1].perturb[0].factor",
            "valid number",
        ),
        ("sweep: s\nbase: b\ncompile:\n  timeout_s: .nan\nvariants: [{name: a}]\n", 4, "compile.timeout_s", "finite"),
        ("sweep: s\nvariants: [{name: a}]\n", 1, "base", "missing required key 'base'"),
        (
            "sweep: s\nbase: b\nvariants: [{name: a, perturb: [{op: scale_weights, layer: c}]}]\n",
            3,
            "variants[0].perturb[0].factor",
            "missing",
        ),
    ],
)
def test_errors_land_on_the_yaml_line(text: str, line: int, field: str, words: str) -> None:
    err = _error(text)
    assert (err.line, err.field) == (line, field) and words in err.message, str(err)


def test_an_unknown_key_lists_the_known_ones() -> None:
    err = _error("sweep: s\nbase: b\nmeasure: {frame: 3}\nvariants: [{name: a}]\n")
    assert err.field == "measure.frame" and "(known: batch_size, depth, dma_map" in err.message


def test_a_long_value_is_shortened_in_the_message() -> None:
    err = _error(f"sweep: s\nbase: b\nseed: '{'9' * 500}'\nvariants: [{{name: a}}]\n")
    assert len(str(err)) < 200

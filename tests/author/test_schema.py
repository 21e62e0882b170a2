"""The schema is the one declaration of the sweep file: the README and the dataclasses agree with it."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import types
from pathlib import Path

import pytest
from pydantic import Field

from loop.author import schema
from loop.author.schema_doc import reference, splice
from loop.author.sweepfile import DataSpec, MeasureSpec, parse
from loop.author.yamlio import _load
from loop.compilers.hailo_options import HailoOptions
from loop.compilers.onnxruntime import OnnxRuntimeCompiler
from loop.core import registry
from loop.core.errors import LoopError
from loop.core.options import BackendOptions
from loop.core.vocab import CompileOptions

README = Path(__file__).resolve().parents[2] / "docs" / "sweep-file.md"  # where the tables are generated


def test_readme_holds_exactly_the_generated_tables() -> None:
    text = README.read_text()
    assert reference() in text, "docs/sweep-file.md is stale: run python tools/readme_schema.py"
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
    assert err.field == "measure.frame" and "(known: batch_size, budget_s, depth, dma_map" in err.message


def test_a_long_value_is_shortened_in_the_message() -> None:
    err = _error(f"sweep: s\nbase: b\nseed: '{'9' * 500}'\nvariants: [{{name: a}}]\n")
    assert len(str(err)) < 200


class ToyOptions(BackendOptions):
    focus: int | None = Field(None, ge=1, le=9, description="how deep it looks")


class ToyCompiler(OnnxRuntimeCompiler):
    name = "toy"
    options_model = ToyOptions


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend registered at run time, by string as the registry names every backend."""
    module = types.ModuleType("toy_backend")
    module.ToyCompiler = ToyCompiler  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "toy_backend", module)
    monkeypatch.setitem(registry.COMPILERS, "toy", "toy_backend:ToyCompiler")


def test_a_backends_own_keys_are_its_compilers(toy: None, tmp_path: Path) -> None:
    assert set(HailoOptions.model_fields) < set(schema.compile_model().model_fields)
    assert "| `focus` | int (>= 1, <= 9) | - | toy: how deep it looks |" in reference()
    model = schema.validate(_load("sweep: s\nbase: b\nbackend: toy\ncompile: {focus: 3}\nvariants: [{name: a}]\n"))
    assert model.compile is not None and model.compile.focus == 3  # type: ignore[attr-defined]
    err = _error("sweep: s\nbase: b\nbackend: toy\nvariants:\n  - name: a\n    compile: {focus: 10}\n")
    assert (err.line, err.field) == (6, "variants[0].compile.focus") and "less than or equal to 9" in err.message
    path = tmp_path / "s.yaml"
    path.write_text("sweep: s\nbase: b.yaml\ncompile: {focus: 3}\nvariants: [{name: a}]\n")
    with pytest.raises(LoopError) as info:
        parse(path)
    assert str(info.value) == f"{path}:3: compile.focus: 'focus' applies to backend toy only"


def test_the_schema_loads_no_compiler_until_a_sweep_file_is_read() -> None:
    code = "import sys, loop.author.sweepfile; print(sorted(m for m in sys.modules if 'compilers' in m))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

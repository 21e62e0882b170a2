"""The schema is the one declaration of the sweep file: the README is rendered from it, the flow consumes its models."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

from loop.author import schema
from loop.author.schema_doc import reference, splice
from loop.author.sweepfile import DataSpec, MeasureSpec, parse
from loop.author.yamlio import _load
from loop.compilers.hailo_options import HailoOptions
from loop.compilers.onnxruntime import OnnxRuntimeCompiler
from loop.core import registry
from loop.core.errors import LoopError
from loop.core.options import BackendOptions
from loop.core.vocab import CompileOptions, CompileSettings, DeviceSettings
from loop.devices.base import RuntimeOptions

LOOP = Path(__file__).resolve().parents[2] / "loop"
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


def _section(model: type[BaseModel], key: str) -> Any:
    return schema._model_in(model.model_fields[key].annotation)


def test_each_option_set_is_the_model_the_flow_consumes() -> None:
    """``measure:`` and ``compile:`` are the very models the protocol and the compilers read, not
    mirrors of them that could drift: a new option is declared once."""
    built = schema.sweep_model()
    for root in (schema.Sweep, schema.Variant, built, _section(built, "variants")):
        assert _section(root, "measure") is MeasureSpec is schema.Measure
        assert issubclass(_section(root, "compile"), CompileSettings)
    assert schema.Compile is CompileSettings and issubclass(CompileOptions, CompileSettings)
    # what compile_model() adds to the settings is the backends' own keys, nothing else
    backends = {key for keys in schema.backend_keys().values() for key in keys}
    assert set(schema.compile_model().model_fields) == set(CompileSettings.model_fields) | backends


def test_compile_options_declare_no_setting_again() -> None:
    """Every ``compile:`` key is a field of CompileOptions, inherited, never declared there too."""
    assert set(CompileSettings.model_fields) <= set(CompileOptions.model_fields)
    assert not set(CompileOptions.__annotations__) & set(CompileSettings.model_fields)
    for key, info in CompileSettings.model_fields.items():
        assert CompileOptions.model_fields[key].default == info.default, key


def test_no_class_declares_an_option_set_again() -> None:
    """No class of loop/ but the option set's own re-declares three or more of the fields it
    declares (a mirror; two may share a name by chance, such as a measurement's ``depth``).
    ``CompileFacts`` is no mirror: under the ledger's keys it records what a compile used and
    found (the level the DFC says it ran, the policy and the layers it equalized), never what was asked."""
    owners = {
        "Measure": schema.Measure,
        "CompileSettings": CompileSettings,
        "DeviceSettings": DeviceSettings,
        "Data": schema.Data,
        "HailoOptions": HailoOptions,
    }  # the ops' models, too small for this count, have a test of their own below
    own = {name: set(model.__annotations__) & set(model.model_fields) for name, model in owners.items()}
    assert (
        own["DeviceSettings"] <= set(RuntimeOptions.model_fields)
        and not set(RuntimeOptions.__annotations__) & (own["DeviceSettings"])
    )
    for path in sorted(LOOP.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ClassDef):
                continue
            names = {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
            for owner, fields in own.items():
                shared = names & fields
                assert node.name in (owner, "CompileFacts") or len(shared) < 3, (path, node.name, sorted(shared))


def test_measure_depth_is_a_tuple_however_given() -> None:
    assert MeasureSpec().depth == (1,) and MeasureSpec(depth=4).depth == (4,)
    assert MeasureSpec(depth=[1, 4]).depth == MeasureSpec(depth=(1, 4)).depth == (1, 4)
    assert hash(MeasureSpec(depth=[1, 4])) == hash(MeasureSpec(depth=(1, 4)))


def test_data_defaults_follow_the_sweep() -> None:
    assert schema.Data().count is None and DataSpec().count == 64 and issubclass(DataSpec, schema.Data)


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


def test_the_hailo_section_is_the_backends_own_keys() -> None:
    """``hailo:`` declares nothing of its own: its keys are HailoOptions', bounds and all, each
    unset unless written (the backend's default stays its own)."""
    section = schema.section_model("hailo")
    assert section is not None and tuple(section.model_fields) == HailoOptions.section_keys
    for key, info in section.model_fields.items():
        assert info.metadata == HailoOptions.model_fields[key].metadata and info.default is None, key
    assert schema.backend_sections() == ("hailo",)


def test_each_op_is_its_schema_model_with_behaviour() -> None:
    """A perturbation op declares no parameter of its own: its fields are its sweep-file model's."""
    from loop.author import perturb

    for name, op in perturb.OPS.items():
        model = schema.OPS[name]
        assert issubclass(op, model) and op.model_fields.keys() == model.model_fields.keys(), name
        assert not {k for k in inspect.get_annotations(op) if k in model.model_fields}, name

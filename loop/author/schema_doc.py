"""The sweep-file reference (docs/sweep-file.md), rendered from :mod:`loop.author.schema`'s declarations
(``compile:`` with each registered compiler's ``options_model``).

The tables are generated so that a bound or default changed in the schema cannot drift from
the documentation: ``python tools/readme_schema.py`` rewrites docs/sweep-file.md between
:data:`BEGIN` and :data:`END`, and a test checks the README holds exactly this rendering.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from loop.author import schema

BEGIN = "<!-- sweep-keys: generated from loop/author/schema.py by tools/readme_schema.py; do not edit -->"
END = "<!-- /sweep-keys -->"

SECTIONS: tuple[tuple[str, type[BaseModel]], ...] = (
    ("top level", schema.Sweep),
    ("each of `variants:`", schema.Variant),
    ("`calibration:` and `inputs:`", schema.Data),
    ("`compile:`", schema.Compile),  # with each registered backend's own keys: see sections()
    ("`measure:`", schema.Measure),
    ("`perturb:` op `scale_weights`", schema.ScaleWeightsOp),
    ("`perturb:` op `add_weight_noise`", schema.AddWeightNoiseOp),
    ("`perturb:` ops `force_range_out`, `force_range_in`", schema.ForceRangeOp),
    ("`perturb:` op `scale_grid`", schema.ScaleGridOp),
    ("`perturb:` op `calibration`", schema.CalibrationOp),
    ("`perturb:` op `precision`", schema.PrecisionOp),
    ("`expect:`", schema.ExpectModel),
    ("a recipe's `layers:` item", schema.RecipeLayer),
)
BOUNDS = (
    ("minimum", ">= {}"),
    ("exclusiveMinimum", "> {}"),
    ("maximum", "<= {}"),
    ("exclusiveMaximum", "< {}"),
    ("minLength", "{}+ chars"),
    ("maxLength", "<= {} chars"),
    ("minItems", "{}+ items"),
    ("maxItems", "<= {} items"),
    ("pattern", "`{}`"),
)
NAMES = {"integer": "int", "number": "number", "string": "str", "boolean": "bool", "object": "mapping"}


def _type(prop: dict[str, Any]) -> str:
    """One property's JSON schema as a short phrase: type, allowed values, bounds."""
    if "$ref" in prop:
        return "mapping"
    if "oneOf" in prop:
        return "op (tables below)"
    if "anyOf" in prop:
        parts = [_type(p) for p in prop["anyOf"] if p.get("type") != "null"]
        return " or ".join(dict.fromkeys(parts))
    if "enum" in prop or "const" in prop:
        return " \\| ".join(f"`{v}`" for v in prop.get("enum", [prop.get("const")]))
    kind = prop.get("type", "any")
    text = NAMES.get(kind, kind)
    if kind == "array":
        text = f"list of {_type(prop.get('items', {}))}"
    bounds = [fmt.format(_num(prop[key])) for key, fmt in BOUNDS if key in prop]
    return text + (f" ({', '.join(bounds)})" if bounds else "")


def _num(value: Any) -> str:
    if isinstance(value, int) and abs(value) >= 100_000:
        exp = value.bit_length() - 1
        return f"2^{exp}" if value == 1 << exp else f"{value:,}".replace(",", "_")
    return str(value)


def _default(name: str, prop: dict[str, Any], required: list[str]) -> str:
    if name in required:
        return "required"
    if "default" not in prop or prop["default"] is None:
        return "-"
    return f"`{json.dumps(prop['default'])}`"


def table(model: type[BaseModel]) -> str:
    """The markdown table of ``model``'s keys."""
    js = model.model_json_schema()
    required = js.get("required", [])
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for name, prop in js["properties"].items():
        if name == "op":
            continue
        meaning = prop.get("description", "").replace("|", "\\|")
        rows.append(f"| `{name}` | {_type(prop)} | {_default(name, prop, required)} | {meaning} |")
    return "\n".join(rows)


def sections() -> list[tuple[str, type[BaseModel]]]:
    """:data:`SECTIONS`, ``compile:`` with the keys of the backends registered now (their
    compilers are loaded for it, so only here and not when this module is imported)."""
    owned = [name for name, keys in schema.backend_keys().items() if keys]
    marks = ", ".join(f"`{name}:` keys only with `backend: {name}`" for name in owned)
    compile_title = f"`compile:` ({marks})" if marks else "`compile:`"
    swap: dict[type[BaseModel], tuple[str, type[BaseModel]]] = {schema.Compile: (compile_title, schema.compile_model())}
    out = [swap.get(model, (title, model)) for title, model in SECTIONS]
    at = 1 + next(i for i, (_, model) in enumerate(out) if model is schema.Measure)
    own = [(f"`{name}:` (backend {name})", schema.section_model(name)) for name in schema.backend_sections()]
    return out[:at] + [(title, model) for title, model in own if model is not None] + out[at:]


def reference() -> str:
    """Every section's table, between the README markers."""
    blocks = [f"{title}:\n\n{table(model)}" for title, model in sections()]
    return "\n".join([BEGIN, "", "\n\n".join(blocks), "", END])


def splice(readme: str) -> str:
    """``readme`` with its generated block replaced by :func:`reference`."""
    head, sep, rest = readme.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise ValueError(f"README has no {BEGIN} ... {END} block")
    return head + reference() + tail

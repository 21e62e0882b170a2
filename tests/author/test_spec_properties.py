"""Property tests: whatever a sweep file holds, parsing it ends in a SweepSpec or a LoopError."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import yaml
from authored import TWO_CONV_RECIPE
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loop.author.sweepfile import parse
from loop.core.errors import LoopError

VALID: dict[str, Any] = {
    "sweep": "p",
    "base": "tiny.yaml",
    "seed": 0,
    "calibration": {"count": 4},
    "inputs": {"count": 2},
    "compile": {"bias_correction": False, "timeout_s": 5},
    "measure": {"frames": 4, "depth": [1, 2]},
    "params": {"height": 8},
    "variants": [
        {"name": "base"},
        {"name": "w", "perturb": [{"op": "scale_weights", "layer": "conv1", "factor": 1.5}]},
        {
            "name": "r",
            "perturb": [{"op": "force_range_out", "layer": "conv1", "range": [0, 4]}],
            "expect": {"allow": ["conv2:bias"]},
        },
    ],
}

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["conv1", "tiny.yaml", "hailo", "hailort", "$height", "/dev/zero", "", "."]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.text(max_size=8), st.integers()), inner, max_size=4)
    ),
    max_leaves=12,
)
FOLDER = Path(tempfile.mkdtemp(prefix="loop-prop-"))
(FOLDER / "tiny.yaml").write_text(TWO_CONV_RECIPE)


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in ``doc`` a value could be replaced."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def _replaced(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    copy = dict(doc) if isinstance(doc, dict) else list(doc)
    copy[path[0]] = _replaced(doc[path[0]], path[1:], value)
    return copy


def _parse_text(text: str | bytes) -> None:
    path = FOLDER / "s.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    try:
        parse(path)
    except LoopError as exc:
        assert "\n" not in exc.render()


FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(st.data())
def test_a_valid_sweep_with_any_value_anywhere_parses_or_is_a_loop_error(data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(_paths(VALID)))
    doc = _replaced(VALID, path, data.draw(VALUES))
    _parse_text(yaml.safe_dump(doc, allow_unicode=True))


@FAST
@given(st.dictionaries(st.sampled_from([*sorted(VALID), "x"]), VALUES, max_size=8))
def test_any_mapping_of_sweep_keys_parses_or_is_a_loop_error(doc: dict) -> None:
    _parse_text(yaml.safe_dump(doc, allow_unicode=True))


@FAST
@given(
    st.one_of(
        st.binary(max_size=200), st.text(alphabet=st.sampled_from(list("ab:-[]{}&*!?|>'\"#\n \t,%@`.0")), max_size=80)
    )
)
def test_arbitrary_bytes_and_yaml_punctuation_are_a_loop_error_at_worst(text: str | bytes) -> None:
    _parse_text(text)

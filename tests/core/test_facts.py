"""A run's facts are typed: a misspelt fact is an error, a recorded value of another shape is
refused where it is read, and the JSON a group writes is the JSON it reads."""

import pytest

from loop.core.facts import CompileFacts, Failure, Judgement, Where


def test_a_misspelt_fact_is_an_error_not_a_silent_none() -> None:
    with pytest.raises(TypeError):
        CompileFacts(wieghts={"bytes": 1})  # type: ignore[call-arg]
    with pytest.raises(AttributeError):
        CompileFacts().wieghts  # type: ignore[attr-defined]  # noqa: B018


def test_a_group_writes_what_it_found_and_reads_it_back() -> None:
    found = CompileFacts(host="h", warnings=("w",), removed_clamps={}, wide_grids={}, more={"newer": [1]})
    # an empty removed_clamps is a finding (the compiler removed none); an empty wide_grids is the default
    assert found.to_json() == {"host": "h", "warnings": ("w",), "removed_clamps": {}, "newer": [1]}
    assert CompileFacts.of({**found.to_json(), "warnings": ["w"]}) == found
    for group in (Where({"host": "h", "worker": None}), Judgement("why"), Failure(detail="died")):
        assert type(group).of(group.to_json()) == group
    assert Judgement().to_json() == {} and Judgement.of({"warnings": ["a compile's"]}) == Judgement()


@pytest.mark.parametrize(
    "info",
    [
        {"warnings": "one line"},
        {"host": 7},
        {"peak_bytes": "lots"},
        {"weights": {"bytes": 1.5}},
        {"weights": {"bytes": 1, "weights_by_bits": {"4": "x"}}},
        {"hef_residency": {"device_bytes": True}},
        {"bias_correction": ["kept"]},
    ],
)
def test_a_value_of_another_shape_is_refused_where_it_is_read(info: dict) -> None:
    with pytest.raises((TypeError, ValueError)):
        CompileFacts.of(info)


def test_the_bias_guard_is_read_from_the_correction_record() -> None:
    assert CompileFacts(bias_correction={"guard": "dropped"}).bias_guard == "dropped"
    assert CompileFacts().bias_guard is None


def test_every_fact_is_read_by_a_reader_its_annotation_names() -> None:
    """A fact whose annotation no reader knows (an ``Optional[str]``, a ``list[str]``) would be read
    unchecked: each field of each group resolves to a reader, or is ``Any`` on purpose."""
    from dataclasses import fields

    from loop.core import facts

    for group in (facts.CompileFacts, facts.Where, facts.Judgement, facts.Failure):
        for f in fields(group):
            kind = str(f.type)
            known = kind in facts._BY_TYPE or kind.startswith("Mapping") or f.name in facts._BY_NAME or kind == "Any"
            assert known or not f.repr, f"{group.__name__}.{f.name}: {kind}"

"""Property tests of footprint rules: a rule covers what it names, globs widen, bias covers rounding."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from loop.author.perturb import WHATS, Allow, parse_expect

LAYERS = st.text(
    alphabet=st.characters(blacklist_characters=":*?[]", blacklist_categories=("Cs",)), min_size=1, max_size=12
)


@given(LAYERS, st.sampled_from(WHATS))
def test_a_rule_covers_its_own_layer_and_what_and_a_bias_rule_covers_rounding(layer: str, what: str) -> None:
    assert Allow(layer, what).covers(layer, what) and Allow("*", what).covers(layer, what)
    assert Allow(layer, "bias").covers(layer, "bias-rounding")
    assert not Allow(layer, "bias-rounding").covers(layer, "bias")


@given(st.lists(st.tuples(LAYERS, st.sampled_from(WHATS)), max_size=5))
def test_expect_rules_round_trip(rules: list[tuple[str, str]]) -> None:
    text = [f"{layer}:{what}" for layer, what in rules]
    assert parse_expect({"allow": text, "deny": []}).allow == tuple(Allow(layer, what) for layer, what in rules)

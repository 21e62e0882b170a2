"""The target ``loop noise`` widens to (issue 42), as the sweep file sets it; the steps themselves
are measured in tests/judge/test_falls.py."""

from __future__ import annotations

from pathlib import Path

from authored import TWO_CONV_RECIPE

from loop.author.sweepfile import parse
from loop.flow.widen import target_for
from loop.judge.widen import Target


def test_the_target_follows_the_sweeps_ruined_line_where_the_file_sets_it(tmp_path: Path) -> None:
    (tmp_path / "tiny.yaml").write_text(TWO_CONV_RECIPE)
    head = "sweep: s\nbase: tiny.yaml\n"
    variants = "variants:\n  - name: base\n  - {name: own, measure: {ruined_snr_db: 20}}\n"
    (tmp_path / "set.yaml").write_text(head + "measure: {ruined_snr_db: 12}\n" + variants)
    (tmp_path / "unset.yaml").write_text(head + variants)
    given, unset = parse(tmp_path / "set.yaml").variants, parse(tmp_path / "unset.yaml").variants
    assert target_for(given[0], None) == Target(27.0, "measure.ruined_snr_db 12 + 15")
    assert target_for(given[1], None).db == 35.0 and target_for(unset[1], None).db == 35.0  # the variant's own
    assert target_for(unset[0], None) == Target(25.0, "default")
    assert target_for(given[0], 31.0) == Target(31.0, "--target-db")

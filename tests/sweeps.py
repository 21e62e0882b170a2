"""Running a sweep file in a test and reading back what the ledger recorded."""

from pathlib import Path

from loop.author.sweepfile import parse
from loop.flow.sweep import SweepOptions, run_sweep
from loop.store.ledger import Ledger


def runs_of(result, runs_dir: Path) -> dict[str, dict]:
    """The ledger's JSON of each run of a sweep result, by variant."""
    with Ledger(runs_dir / "ledger.sqlite") as ledger:
        return {o.variant: ledger.record(o.run_id).to_json() for o in result.outcomes}


def _sweep_runs(path, runs_dir, jobs: int = 1, **options) -> dict[str, dict]:
    return runs_of(run_sweep(parse(path), runs_dir, SweepOptions(jobs=jobs, progress=False, **options)), runs_dir)

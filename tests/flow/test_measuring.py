"""Measure as compiled: when no compile runs where the devices are, a candidate is measured
as soon as it and its reference are compiled; when they share a host, after every compile."""

from pathlib import Path

from authored import FAST_MEASURE

from loop.author.sweepfile import parse
from loop.flow import sweep as sweep_mod
from loop.flow.local_runner import LocalRunner
from loop.flow.runner import RunResult, RunTask
from loop.flow.sweep import SweepOptions, run_sweep

FOUR = "\n".join(
    ["  - name: base"]
    + [f"  - name: v{i}\n    perturb:\n      - {{op: scale_weights, layer: conv1, factor: 1.0{i}}}" for i in "123"]
)


class ElsewhereTestDouble(LocalRunner):
    """A TEST DOUBLE for a runner on another host (no second host exists here): it runs
    locally but says it measures elsewhere, and notes how many compiles had settled each
    time it was asked to run a task."""

    def __init__(self, settled: list[int], where: str) -> None:
        super().__init__()
        self.settled, self.where, self.seen = settled, where, list[int]()

    def hosts(self) -> set[str]:
        return {self.where}

    def run(self, task: RunTask) -> RunResult:
        self.seen.append(len(self.settled))
        return self._run(task)  # the other host's measuring lock is not this host's


def _sweep(write_sweep, tmp_path: Path, monkeypatch, where: str) -> list[int]:
    settled: list[int] = []
    real = sweep_mod.iter_compiled

    def counted(*args, **kwargs):
        for batch in real(*args, **kwargs):
            settled.extend(i for i, _ in batch)
            yield batch

    runner = ElsewhereTestDouble(settled, where)
    monkeypatch.setattr(sweep_mod, "iter_compiled", counted)
    monkeypatch.setattr(sweep_mod, "LocalRunner", lambda overlap=False: runner)
    path = write_sweep(f"sweep: piped\nbase: tiny.yaml\ninputs: {{count: 2}}\n{FAST_MEASURE}\nvariants:\n{FOUR}\n")
    result = run_sweep(parse(path), tmp_path / "runs", SweepOptions(jobs=1, progress=False))
    assert not result.failed and len(runner.seen) == 4
    return runner.seen


def test_devices_elsewhere_measure_as_compiles_arrive(write_sweep, tmp_path, monkeypatch):
    seen = _sweep(write_sweep, tmp_path, monkeypatch, "another-host.example")
    assert seen[0] < 4, seen  # the reference measured before the last compile was in


def test_devices_here_wait_for_every_compile(write_sweep, tmp_path, monkeypatch):
    import socket

    assert _sweep(write_sweep, tmp_path, monkeypatch, socket.gethostname()) == [4, 4, 4, 4]


def test_a_scorer_that_raises_fails_its_variant_and_the_sweep_goes_on(write_sweep, tmp_path):
    calls = []

    def scorer(**_):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("the user's scorer broke")
        return {"mine": 1.0}

    path = write_sweep(f"sweep: s\nbase: tiny.yaml\ninputs: {{count: 2}}\n{FAST_MEASURE}\nvariants:\n{FOUR}\n")
    result = run_sweep(parse(path), tmp_path / "runs", SweepOptions(jobs=1, progress=False, scorer=scorer))
    failed = {o.variant: (o.stage, o.error) for o in result.failed}
    assert failed == {"v1": ("score", "RuntimeError: the user's scorer broke")}
    assert [o.status for o in result.outcomes].count("ok") == 3


class QueueSeenTestDouble(LocalRunner):
    """A TEST DOUBLE that runs locally and notes, as each task ends, how many tasks the sweep had
    handed it by then (its first task ends late, so every compile is in)."""

    def __init__(self) -> None:
        super().__init__()
        self.handed, self.seen = 0, list[int]()

    def submit(self, task: RunTask):  # type: ignore[no-untyped-def]
        self.handed += 1
        return super().submit(task)

    def run(self, task: RunTask) -> RunResult:
        result = self._run(task)
        if not self.seen:
            import time

            time.sleep(1.0)
        self.seen.append(self.handed)
        return result


def _queued(write_sweep, tmp_path: Path, monkeypatch, score_only: bool) -> list[int]:
    runner = QueueSeenTestDouble()
    monkeypatch.setattr(sweep_mod, "LocalRunner", lambda overlap=False: runner)
    path = write_sweep(f"sweep: q\nbase: tiny.yaml\ninputs: {{count: 2}}\n{FAST_MEASURE}\nvariants:\n{FOUR}\n")
    options = SweepOptions(jobs=1, progress=False, score_only=score_only)
    assert not run_sweep(parse(path), tmp_path / "runs", options).failed
    return runner.seen


def test_answering_inputs_only_keeps_a_task_queued_for_the_device(write_sweep, tmp_path, monkeypatch):
    assert _queued(write_sweep, tmp_path, monkeypatch, score_only=True)[0] == 2  # the next one queued meanwhile


def test_a_measured_task_never_has_another_queued_beside_it(write_sweep, tmp_path, monkeypatch):
    seen = _queued(write_sweep, tmp_path, monkeypatch, score_only=False)
    assert all(handed == i + 1 for i, handed in enumerate(seen)), seen

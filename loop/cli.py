"""The command line: parsing and printing only; every command is a call into the library."""

from __future__ import annotations

import errno
import json
import sqlite3
import warnings
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click

from loop.core.errors import LoopError
from loop.core.registry import DEFAULT_CHIP, DEFAULT_LINK
from loop.core.text import for_person
from loop.store.files import StoreFault

if TYPE_CHECKING:
    from loop.core.record import RunRecord
    from loop.flow.sweep import SweepOptions

RUNS = click.option(
    "--runs",
    "runs",
    type=click.Path(path_type=Path),
    default=Path("runs"),
    show_default=True,
    help="Output folder holding ledger.sqlite and artifacts/.",
)
JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
AUDIT_KEYS = ("id", "sweep", "variant", "verdict", "changes")  # what ``loop audit --json`` shows of a run
# An error, warning or doctor line may quote a stored name or a folder's file names: escaped as
# the tables are, and cut at this length so a runaway name cannot flood the terminal.
LINE_LIMIT = 1000


FAULTS = (errno.ENOSPC, errno.EROFS, errno.EIO, getattr(errno, "EDQUOT", errno.ENOSPC))


class Failure(click.ClickException):
    """The user's error: one line on stderr, ``loop: ...``, exit 2."""

    exit_code = 2

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"loop: {for_person(self.format_message(), LINE_LIMIT)}", err=True)


class Fault(Failure):
    """The runs folder failed (a damaged ledger, a full or read-only disk), not the user: exit 1."""

    exit_code = 1


def _failure(exc: Exception) -> Failure | None:
    if isinstance(exc, StoreFault):
        return Fault(exc.render())
    if isinstance(exc, LoopError):
        return Failure(exc.render())
    if isinstance(exc, sqlite3.DatabaseError):
        return Fault(f"the ledger: {exc}")
    if isinstance(exc, OSError) and exc.errno in FAULTS:
        return Fault(str(exc))
    return None


class LoopCommand(click.Command):
    """A command whose returned int is the exit code and whose library errors are a :class:`Failure`
    (anything else is a bug, and keeps its traceback)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            code = super().invoke(ctx)
        except (LoopError, sqlite3.DatabaseError, OSError) as exc:
            failure = _failure(exc)
            if failure is None:
                raise
            raise failure from None
        if code:
            ctx.exit(code)
        return code


class LoopGroup(click.Group):
    command_class = LoopCommand


def _one_line_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    click.echo(f"loop: warning: {for_person(message, LINE_LIMIT)}", err=True)


@click.group(cls=LoopGroup)
@click.version_option(package_name="loop")
def main() -> None:
    """On-device evaluation loop for compile-and-score experiments on neural accelerators."""
    warnings.showwarning = _one_line_warning


@main.command()
@click.argument("sweep_file", type=click.Path(path_type=Path))
@RUNS
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Parallel compiles (default: the cores, cut to what free memory holds).",
)
@click.option("--scorer", default=None, help="A user scorer, module:function.")
@click.option("--cluster", default=None, help="Compile on a Dask cluster, tcp://HOST:PORT (needs loop[dask]).")
@click.option(
    "--device-cluster",
    default=None,
    help="Measure on a Dask cluster's workers that hold the device as a resource (dask worker --resources KIND=1).",
)
@click.option(
    "--stage-timeout",
    "stage_timeouts",
    multiple=True,
    metavar="STAGE=SECONDS",
    help="A device stage's timeout (open, inputs, measure, vendor-benchmark, health); repeatable.",
)
@click.option("--overlap", is_flag=True, help="Measure while compiles run (runs flagged host-contended).")
@click.option("--fresh", is_flag=True, help="Start a new sweep of this file instead of continuing it.")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@click.option(
    "--study", "study_name", default=None, metavar="NAME", help="Run the variants as study NAME's next generation."
)
@click.option(
    "--score-only",
    is_flag=True,
    help="Score and audit each variant on the inputs only: no time to first output, no rate.",
)
def sweep(
    sweep_file: Path,
    runs: Path,
    jobs: int | None,
    scorer: str | None,
    cluster: str | None,
    device_cluster: str | None,
    stage_timeouts: tuple[str, ...],
    overlap: bool,
    fresh: bool,
    quiet: bool,
    study_name: str | None,
    score_only: bool,
) -> int:
    """Author, optimize, compile, fingerprint, audit, run, score and record every variant."""
    from loop import report
    from loop.author import sweepfile as spec
    from loop.flow.runner import StageTimeouts
    from loop.flow.sweep import SweepOptions, run_sweep
    from loop.flow.widen import measure_flagged
    from loop.judge.score import load_scorer
    from loop.store import ledger

    try:
        timeouts = StageTimeouts.parse(stage_timeouts)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    options = SweepOptions(
        jobs=jobs,
        progress=not quiet,
        scorer=load_scorer(scorer) if scorer else None,
        overlap=overlap,
        fresh=fresh,
        cluster=cluster,
        device_cluster=device_cluster,
        timeouts=timeouts,
        score_only=score_only,
    )
    if study_name is not None:
        return _study_sweep(sweep_file, study_name, runs, options)
    parsed = spec.parse(sweep_file, check_backends=True, cluster=cluster is not None)
    result = run_sweep(parsed, runs, options)
    measure_flagged(parsed, result.outcomes, runs)  # a ruined base's printed variant, measured first
    with ledger.Ledger.of_runs(runs, readonly=True) as book:
        records = [book.record(o.run_id) for o in result.outcomes if o.run_id is not None]
    click.echo(report.sweep_summary(records))
    extra = report.ladders(records)
    if extra:
        click.echo("\n" + extra)
    reused = sum(1 for o in result.outcomes if o.resumed)
    if reused or result.skipped:
        click.echo(
            f"\nresumed: {reused} finished run(s) reused"
            + (f"; left to a live sweep: {', '.join(map(for_person, result.skipped))}" if result.skipped else "")
        )
    return 1 if result.failed else 0


def _study_sweep(path: Path, name: str, runs: Path, options: SweepOptions) -> int:
    """``loop sweep FILE --study NAME``: the file as the study's next generation."""
    from loop import report
    from loop.flow.sweep import SweepOptions
    from loop.study import from_sweep_file

    here = SweepOptions(options.jobs, options.progress, options.scorer, score_only=options.score_only)
    if options != here:
        raise click.UsageError(
            "--study runs here, with --jobs, --scorer, --quiet and --score-only: "
            "not a cluster, --overlap, --fresh or --stage-timeout"
        )
    _, results = from_sweep_file(
        path,
        name,
        measure=not options.score_only,
        runs=runs,
        jobs=options.jobs,
        scorer=options.scorer,
        progress=options.progress,
    )
    reused = sum(r.reused for r in results)
    click.echo(f"study {for_person(name)}: {len(results)} candidate(s), {reused} reused from earlier generations")
    click.echo(report.study_table(results))
    return 1 if any(r.status != "ok" for r in results) else 0


def _records(runs: Path, sweep: str | None) -> list[RunRecord]:
    from loop.store.ledger import Ledger

    with Ledger.of_runs(runs, readonly=True, existing=True) as book:
        found = [r for r in book.records() if sweep is None or r.in_sweep(sweep)]
        if sweep is not None and not found:
            names = sorted({r.sweep for r in book.records()})
            raise LoopError(f"no runs of sweep '{sweep}' in {runs} (its sweeps: {', '.join(names) or 'none'})")
        return found


@main.command("runs")
@RUNS
@JSON
@click.option("--sweep", default=None, help="Only this sweep (and its generations NAME-gN).")
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json", "jsonl", "csv"]), default="table", show_default=True
)
def runs_cmd(runs: Path, as_json: bool, sweep: str | None, fmt: str) -> None:
    """The runs in the ledger: a table, JSON (as --json), JSON lines, or CSV."""
    from loop import report

    records = _records(runs, sweep)
    fmt = "json" if as_json else fmt
    if fmt == "table":
        click.echo(report.runs_table(records))
    elif fmt == "json":
        click.echo(json.dumps([r.to_json() for r in records], indent=2))
    else:
        click.echo(report.runs_lines(records, fmt), nl=False)


@main.command("study")
@click.argument("name")
@RUNS
@JSON
@click.option("--best", "best", default=None, metavar="KEY", help="Only the best usable candidate by KEY (snr_db...).")
@click.option("--pareto", "pareto", default=None, metavar="A,B", help="Only the front on these keys, beyond noise.")
@click.option(
    "--sweep",
    "sweep_file",
    type=click.Path(path_type=Path),
    default=None,
    help="Start the study, if new, over this sweep file's base and shared settings (as graphs/qzo.py does).",
)
def study_cmd(
    runs: Path, name: str, as_json: bool, best: str | None, pareto: str | None, sweep_file: Path | None
) -> None:
    """A study's candidates: verdict, whether usable and why, scores, rate ratio to the reference.
    A search adds them (Study.evaluate in Python, graphs/*.py); --sweep starts one here."""

    from loop import report
    from loop.study import Study, sweep_settings

    if sweep_file is not None:
        base, backend, settings = sweep_settings(sweep_file)
        study = Study(name, base=base, backend=backend, runs=runs, **settings)
    else:
        _known_study(runs, name)
        study = Study(name, runs=runs)
    found = study.best(best) if best else None
    if best:
        results = [found] if found else []
    elif pareto:
        results = study.pareto(tuple(k.strip() for k in pareto.split(",")))
    else:
        results = study.results()
    if as_json:  # the best's own "tied" holds the candidates within noise of it
        click.echo(json.dumps([r.to_dict() for r in results], indent=2))
        return
    click.echo(report.study_table([*results, *(found.tied if found else [])]))
    if found is not None:
        tied = ", ".join(f"run {t.run_id}" for t in found.tied) or "none"
        click.echo(f"best by {best}: run {found.run_id}; within its noise: {tied}")


def _known_study(runs: Path, name: str) -> None:
    """A study asked for by name alone must exist: else one line naming those that do, and how
    to start one."""
    from loop.store.ledger import LEDGER_FILE, Ledger
    from loop.store.studies import study_names

    names = []
    if (runs / LEDGER_FILE).is_file():
        with Ledger.of_runs(runs, readonly=True) as ledger:
            names = study_names(ledger)
    if name not in names:
        raise LoopError(
            f"no study '{name}' under {runs} (its studies: {', '.join(names) or 'none'}): "
            f"start one with loop study {name} --sweep FILE, or from Python, Study('{name}', base=...)",
            field="name",
        )


@main.command("audit")
@RUNS
@JSON
@click.option("--sweep", default=None, help="Only this sweep.")
def audit_cmd(runs: Path, as_json: bool, sweep: str | None) -> None:
    """Which perturbations changed what, and the verdicts ('!' marks a change outside the footprint)."""
    from loop import report

    records = _records(runs, sweep)
    if as_json:
        click.echo(json.dumps([r.to_json(AUDIT_KEYS) for r in records], indent=2))
        return
    click.echo(report.audit_table(records))


@main.command("layers")
@click.argument("base", type=click.Path(path_type=Path))
@click.option(
    "--input-shape",
    "input_shape",
    multiple=True,
    metavar="NAME=D,D,...",
    help="A static shape for a dynamic input, as the sweep file's input_shapes (repeat per input).",
)
@JSON
def layers_cmd(base: Path, input_shape: tuple[str, ...], as_json: bool) -> None:
    """The quantized layers of BASE (an .onnx model or a recipe): the names ops take, the
    tensors a forced range lands on, and the removed clamps (Relu, Clip) whose work those grids do."""
    from loop.author.graphs import load, parse_input_shapes
    from loop.judge.structure import describe
    from loop.report import layers_table

    loaded = load(base, {}, parse_input_shapes(input_shape))
    rows = describe(loaded.structure)
    if not rows and not as_json and (compiled := _quantized_ops(loaded.path)):
        click.echo(
            f"{base} is quantized already ({compiled}): loop layers names the layers of a float base;"
            " a run's quantized layers are in loop runs --json (its layer prints) and loop audit"
        )
        return
    click.echo(json.dumps(rows, indent=2) if as_json else layers_table(rows))


def _quantized_ops(model: Path) -> str:
    """The quantized ops of a model, counted (empty where it has none), its graph alone read."""
    import collections

    from loop.core.modelfile import read_graph

    kinds = ("QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger", "MatMulNBits", "DequantizeLinear")
    graph = read_graph(model).graph
    found = collections.Counter(n.op_type for n in graph.node if n.op_type in kinds)
    return ", ".join(f"{op} x{n}" for op, n in found.most_common())


@main.command("check")
@click.argument("artifact", type=click.Path(path_type=Path))
@click.option("--device", default=None, help="Device to check on (default: by the artifact's suffix).")
def check_cmd(artifact: Path, device: str | None) -> int:
    """Self-test of the controlled-input path: sensitivity, determinism, undersized buffers."""
    from loop.core.registry import make_device
    from loop.measure.check import check
    from loop.store.artifacts import DEVICE_BY_SUFFIX, load_artifact

    loaded = load_artifact(artifact)
    results = check(make_device(device or DEVICE_BY_SUFFIX[artifact.suffix]), loaded, str(artifact))
    for r in results:
        click.echo(f"{'PASS' if r.passed else 'FAIL'}  {for_person(r.name)}: {for_person(r.detail, LINE_LIMIT)}")
    return 0 if all(r.passed for r in results) else 1


@main.command("compare")
@click.argument("run_a", type=int)
@click.argument("run_b", type=int, required=False)
@RUNS
@JSON
@click.option("--from-ledger", is_flag=True, help="Decide from recorded figures only; no re-measuring.")
@click.option("--rounds", type=click.IntRange(min=2), default=5, show_default=True, help="Interleaved rounds.")
@click.option("--a-a", "a_a", is_flag=True, help="Measure RUN_A against itself; report the false-call rate.")
@click.option("--pairs", type=click.IntRange(min=1), default=10, show_default=True, help="A/A pairs (with --a-a).")
@click.option(
    "--round-s",
    type=click.FloatRange(min=0.01),
    default=1.0,
    show_default=True,
    help="Seconds each side is timed in a round.",
)
@click.option("--quiet", is_flag=True, help="No progress on stderr.")
def compare_cmd(
    run_a: int,
    run_b: int | None,
    runs: Path,
    as_json: bool,
    from_ledger: bool,
    rounds: int,
    a_a: bool,
    pairs: int,
    round_s: float,
    quiet: bool,
) -> None:
    """Whether run B's rate differs from run A's beyond noise: re-measured interleaved with an
    A/A control (default), or from the ledger's figures (--from-ledger)."""
    from loop.measure import compare as cmp
    from loop.store.ledger import record_in

    if (run_b is None) != a_a:
        raise LoopError("give two runs, or one run with --a-a")
    a, b = record_in(runs, run_a), None if run_b is None else record_in(runs, run_b)
    spec = cmp.COMPARE_SPEC.model_copy(update={"min_duration_s": round_s})
    if b is None:
        result = cmp.a_a(a, pairs, spec, rounds, progress=not quiet)
        click.echo(json.dumps(result, indent=2) if as_json else _lines(cmp.describe_a_a(result)))
        return
    result = cmp.compare_runs(a, b, from_ledger, spec, rounds, progress=not quiet)
    click.echo(json.dumps(result, indent=2) if as_json else _lines(cmp.describe(result)))


def _lines(text: str) -> str:
    """Text made elsewhere that quotes runs' names: each line as a person may see it."""
    return "\n".join(for_person(line, LINE_LIMIT) for line in text.split("\n"))


@main.command("cache")
@RUNS
@click.option("--prune-older-than", "older", default=None, help="Remove entries unused this long: 90m, 12h, 7d.")
@click.option("--max-size", default=None, help="Then drop the least recently used until it fits: 500M, 2G.")
@JSON
def cache_cmd(runs: Path, older: str | None, max_size: str | None, as_json: bool) -> None:
    """List the compile cache, or prune it by age or size."""
    from dataclasses import asdict

    from loop.store.cache import Cache, parse_age, parse_size

    cache = Cache.for_runs(runs)
    pruning = older is not None or max_size is not None
    shown = (
        cache.prune(parse_age(older) if older else None, parse_size(max_size) if max_size else None)
        if pruning
        else cache.entries()
    )
    if as_json:
        click.echo(json.dumps([asdict(e) for e in shown], indent=2))
        return
    for e in shown:
        key, backend = for_person(e.key[:16]), for_person(e.backend or "?")
        click.echo(f"{'removed ' if pruning else ''}{key}  {e.size:>10,}  {backend}")
    click.echo(f"{len(shown)} entr{'y' if len(shown) == 1 else 'ies'} {'removed' if pruning else 'cached'}")


@main.command("doctor")
@RUNS
@click.option("--repair", is_flag=True, help="Repair what it can (never removes an ok run's artifact).")
def doctor_cmd(runs: Path, repair: bool) -> int:
    """Check the ledger, the artifacts and the cache; say what --repair would do, one line each."""
    from loop.store.doctor import examine, repair_all

    exam = examine(runs)
    for line in repair_all(runs, exam) if repair else [p.line() for p in exam.problems]:
        click.echo(for_person(line, LINE_LIMIT))
    left = sum(1 for p in exam.problems if not p.repaired)
    click.echo(
        f"{len(exam.problems)} problem(s){f', {len(exam.problems) - left} repaired' if repair else ''}"
        + (f"; a sweep is running ({exam.live[0]})" if exam.live else "")
    )
    return 1 if left else 0


@main.command()
@JSON
@click.option("--all", "show_all", is_flag=True, help="Also list the execution providers this ONNX Runtime lacks.")
def backends(as_json: bool, show_all: bool) -> None:
    """Every compiler and device, and whether it can run here (and why not). An ONNX Runtime
    execution provider this build lacks is counted, not listed, unless --all (--json lists all)."""
    from dataclasses import asdict

    from loop.core.registry import statuses

    found = statuses()
    if as_json:
        click.echo(json.dumps([asdict(s) for s in found], indent=2))
        return
    # a provider row (device:provider) that cannot run here says only that the build lacks it
    hidden = [s for s in found if ":" in s.name and not s.available and not show_all]
    shown = [s for s in found if s not in hidden]
    width = max(len(s.name) for s in shown)
    for s in shown:
        state = "available" if s.available else "unavailable"
        click.echo(f"{s.name:<{width}}  {s.kind:<9} {state:<12} {for_person(s.reason, LINE_LIMIT)}")
    if hidden:
        providers = len({s.name.split(":", 1)[1] for s in hidden})
        click.echo(f"({providers} execution providers not in this onnxruntime build: loop backends --all lists them)")


@main.command("report")
@RUNS
@click.option("--sweep", default=None, help="One sweep's runs (default: every run in the ledger).")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    default=None,
    help="A new or regular file outside the runs folder, or an .html file at its top. Default: RUNS/report.html.",
)
@click.option("--link", "link_name", default=DEFAULT_LINK, show_default=True, help="The roofline's link.")
@click.option(
    "--score",
    "scores",
    multiple=True,
    default=("snr_db",),
    show_default=True,
    help="Plot the generations by this score (repeat for more).",
)
def report_cmd(runs: Path, sweep: str | None, output: Path | None, link_name: str, scores: tuple[str, ...]) -> None:
    """Write one self-contained HTML report: verdicts, the three quantities, the audit as a
    grid per generation, a search's SNR against rate, ladders, the bus roofline, time to first
    output, generations, devices."""
    from loop.report.page import write_report

    click.echo(for_person(write_report(runs, sweep, output, link_name, scores), None))


@main.group(cls=LoopGroup)
def link() -> None:
    """The link as a model: fit one from a ladder, predict a run's rate on it."""


@link.command("fit")
@RUNS
@click.option("--sweep", required=True, help="The ladder sweep to fit (rungs measured at depth 1 give the round trip).")
@click.option("--name", required=True, help="Save the model under this name (in RUNS/links/).")
@JSON
def link_fit(runs: Path, sweep: str, name: str, as_json: bool) -> None:
    """Fit per-transfer time = bytes / bandwidth + fixed cost from a ladder in the ledger."""
    from loop.core.links import fit_warnings
    from loop.measure.link import fit_runs

    model = fit_runs(runs, sweep, name)
    doubts = fit_warnings(model)
    if as_json:
        click.echo(json.dumps({**model.to_json(), "warnings": doubts}, indent=2))
        return
    click.echo(
        f"{model.name}: {model.bandwidth_mb_s:.1f} MB/s, {model.per_transfer_ms:.3f} ms per transfer, "
        f"round trip {model.round_trip_ms:.3f} ms"
    )
    click.echo("residuals: " + ", ".join(f"{for_person(k)} {v:+.2f}%" for k, v in model.residuals_pct.items()))
    for line in doubts:
        click.echo(f"warning: {for_person(line, LINE_LIMIT)}", err=True)


@link.command("predict")
@click.argument("run_id", type=int)
@RUNS
@click.option(
    "--link", "link_name", required=True, help=f"A fitted link's name, {DEFAULT_LINK} (shipped), or 300MB/s+0.9ms."
)
@click.option("--depth", type=click.IntRange(min=1), default=None, help="Queue depth (default: the run's).")
@JSON
def link_predict(run_id: int, runs: Path, link_name: str, depth: int | None, as_json: bool) -> None:
    """A run's pipelined rate and time to first output had its bytes crossed LINK, and which
    of link or compute bounds it."""
    from loop.measure.fit import describe_load, weight_load
    from loop.measure.link import load, predict
    from loop.store.ledger import record_in

    run = record_in(runs, run_id)
    model = load(runs, link_name)
    p, weights = predict(model, run, depth), weight_load(model, run)
    if as_json:
        click.echo(json.dumps({**p.to_json(), "weights": weights and weights.to_json()}, indent=2))
        return
    click.echo(
        f"run {run_id} on {for_person(p.link)}: {p.rate_fps:.1f} fps at depth {p.depth}, {p.bound}-bound"
        f"{' (depth-limited)' if p.depth_limited else ''}; link busy {p.link_busy_ms:.3f} ms for "
        f"{p.bytes:,} B, compute {p.compute_ms:.3f} ms; first output {p.first_output_ms:.3f} ms"
    )
    if weights is not None:
        click.echo(describe_load(weights, p.link))


@main.command("inspect")
@click.argument("hef", type=click.Path(path_type=Path))
@click.option("--device", default=None, help="Say whether the HEF fits this device (hailo10h, hailo8, ...).")
@click.option(
    "--sweep",
    "sweep",
    type=click.Path(path_type=Path),
    default=None,
    help="Without --device: the device this sweep file's hailo backend compiles for.",
)
@JSON
def inspect_command(hef: Path, device: str | None, sweep: Path | None, as_json: bool) -> None:
    """What a HEF holds, read with no device and no Hailo software: size, format version,
    architecture, network groups, streams with shape, order, type and quantization."""
    from loop.api import inspect
    from loop.hailort.hef import describe

    info = inspect(hef, device, sweep)
    click.echo(json.dumps(info.to_json(), indent=2) if as_json else "\n".join(map(for_person, describe(info))))


@main.command("fit")
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--device", default=DEFAULT_CHIP, show_default=True, help="The device whose memory the weights must fit.")
@click.option(
    "--link",
    "link_name",
    default=DEFAULT_LINK,
    show_default=True,
    help="The link a load crosses: a shipped link, one fitted with 'loop link fit', or 300MB/s+0.9ms.",
)
@click.option("--run", "run_id", type=int, default=None, help="Also this run's weights as its compile recorded them.")
@RUNS
@JSON
def fit_cmd(model: Path, device: str, link_name: str, run_id: int | None, runs: Path, as_json: bool) -> None:
    """What MODEL's weights (.onnx, or a .hef) weigh against the device's memory: as stored and at
    bf16, int8 and int4 (int4 packed two to a byte), whether each fits, and its one load over the
    link when the model is created (HailoRT sends the whole HEF; nothing streams). A weight is every
    element of a floating-point initializer or Constant, and of each integer tensor a
    DequantizeLinear reads; counted from shapes, external data never read. A HEF is weighed as
    compiled: its own size."""
    from loop.api import fit
    from loop.measure.fit import describe

    report = fit(model, device, link_name, run_id, runs)
    click.echo(
        json.dumps(report.to_json(), indent=2)
        if as_json
        else "\n".join(for_person(x, LINE_LIMIT) for x in describe(report))
    )


@main.command("noise")
@click.argument("sweep_file", type=click.Path(path_type=Path))
@click.option("--variant", required=True, help="The variant to analyse, by its name in the sweep file.")
@RUNS
@JSON
@click.option(
    "--plot",
    "plot",
    type=click.Path(path_type=Path),
    default=None,
    help="Also write SNR per layer in graph order (SVG).",
)
@click.option(
    "--target-db",
    "target_db",
    type=float,
    default=None,
    help="The SNR the printed variant must reach [default: measure.ruined_snr_db + 15 where set, else 25].",
)
@click.option("--quiet", is_flag=True, help="No progress on stderr.")
def noise_cmd(
    sweep_file: Path, variant: str, runs: Path, as_json: bool, plot: Path | None, target_db: float | None, quiet: bool
) -> None:
    """Where quantization loses: every quantized tensor's local and accumulated SNR against the
    float model on the sweep's scoring frames, one line per layer, the layers that lose most first;
    and the 16-bit variants tried from there, each compiled and scored, until one meets the target."""
    from loop.api import noise

    report = noise(sweep_file, variant, runs, target_db, progress=not quiet)
    if plot is not None:
        from loop.report.noise_plot import noise_svg

        plot.write_text(noise_svg(report))
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
        return
    for line in report.lines():
        click.echo(for_person(line, LINE_LIMIT))


if __name__ == "__main__":
    main()

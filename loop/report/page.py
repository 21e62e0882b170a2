"""``loop report``: one self-contained HTML file a person looks at.

Everything is inline: the styles, and every plot as SVG from :mod:`loop.report.plots`; the
page loads nothing, so it opens the same with no network. Sections appear where the ledger
has their data, and say so where it has none.

The page is streamed: each section and each figure goes to the file as it is made, and a
figure is cleared once its SVG is written, so memory stays flat however long the ledger (every
figure held until the end took 1.2 GB at 2,000 runs). It is written to a temporary file beside
its target and renamed over it, and only to a new or regular file outside what loop keeps in
the runs folder. Every stored string is shown through :func:`~loop.core.text.for_person`, cut.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from loop.core.errors import LoopError
from loop.core.kinds import Flag, Status, Verdict
from loop.core.record import RunRecord
from loop.core.registry import DEFAULT_LINK
from loop.core.text import LIMIT, for_person
from loop.report import perturbed_named, ruined_lines
from loop.report.cells import esc, group_cell, interval, num, rows_table
from loop.report.glance import glance_parts
from loop.report.grid import audit_grid
from loop.report.searches import group_names, studies_of

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from loop.measure.results import Result

INSTALL = "loop report needs matplotlib: pip install 'loop[report]'"
STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0;font-size:13px}
th,td{border:1px solid #ddd;padding:.25em .5em;text-align:right}th{background:#f6f6f6}
td:first-child,th:first-child{text-align:left}
.confounded td{background:#fdecea}.apart{color:#666}.note{color:#555;font-size:13px}.bad{color:#b71c1c;font-weight:600}
.plots{display:flex;flex-wrap:wrap;gap:1em}.plots svg{max-width:100%;height:auto}
.grid{overflow-x:auto;margin:.5em 0}table.audit caption{text-align:left;font-weight:bold;padding:.25em 0}
table.audit td{min-width:2.6em;text-align:center;background:#f2f2f2;font-size:11px;white-space:nowrap}
table.audit td.inside{background:#4c9a6a;color:#fff}
table.audit td.outside{background:repeating-linear-gradient(45deg,#d62728 0 5px,#7f0000 5px 7px);color:#fff}
table.audit th.layer{writing-mode:vertical-rl;transform:rotate(180deg);font-weight:normal;font-size:11px}
table.audit th.upright{writing-mode:horizontal-tb;transform:none;overflow-wrap:anywhere;text-align:center}
table.audit th{font-weight:normal;font-size:12px}
table.study td:nth-child(4),table.study td:nth-child(5){white-space:nowrap}
pre.fix{background:#f6f6f6;border:1px solid #ddd;padding:.5em;font-size:12px;white-space:pre-wrap}
"""
GRID_ROWS = 200  # candidates in one audit grid; a bigger generation takes several
FIX_LINE = 2000  # characters of a ruined base's fix line shown: a precision entry names a whole node


FRONT = ["generation", "candidate", "rate ratio [95% CI]", "SNR dB", "ratio from"]


def _front_table(best: Sequence[Result]) -> Iterator[str]:
    """The front's candidates, fastest first, by name: on the plot their names covered one another."""
    rows, names = [], group_names(r.sweep for r in best)
    for r in sorted(best, key=lambda r: -(r.value("rate_ratio") or 0.0)):
        ratio, snr = num(r.rate_ratio, ".3f") + interval(r.interval("rate_ratio"), ".3f"), num(r.value("snr_db"), ".2f")
        rows.append([group_cell(r.sweep, names), esc(r.variant), ratio, snr, esc(r.ratio_basis)])
    yield "<p class='note'>On the front:</p>"
    yield from rows_table(FRONT, rows)


class Page:
    """The report's sections in order, each written to ``out`` as it is made; a section with
    nothing to show says why."""

    def __init__(
        self, runs: Sequence[RunRecord], link: str, runs_dir: Path, out: TextIO, scores: Sequence[str] = ("snr_db",)
    ) -> None:
        from loop.report.plots import svg

        self.runs, self.link, self.runs_dir, self.svg = list(runs), link, runs_dir, svg
        self.out, self.scores, self.studies = out, list(scores), studies_of(runs, runs_dir)
        self.drawn = 0  # figures so far: each takes its own id salt

    def section(self, title: str, body: Callable[[], Iterable[str]], missing: str) -> None:
        self.out.write(f"<h2>{esc(title)}</h2>")
        wrote = False
        for chunk in body():
            self.out.write(chunk)
            wrote = wrote or bool(chunk)
        if not wrote:
            self.out.write(f"<p class='note'>{esc(missing, 4 * LIMIT)}</p>")  # ours, whole

    def plots(self, figures: Iterable[Figure]) -> Iterator[str]:
        """Each figure's SVG as soon as it is drawn; the figure is cleared right after, so one
        figure at a time is in memory (``figures`` is best a generator)."""
        opened = False
        for fig in figures:
            if not opened:
                opened = True
                yield "<div class='plots'>"
            yield self.svg(fig, f"loop-{self.drawn}")
            self.drawn += 1
            fig.clear()
        if opened:
            yield "</div>"

    def audit(self) -> Iterator[str]:
        """One grid per sweep (a study's generation is a sweep), GRID_ROWS candidates a grid."""
        by_sweep: dict[str, list[RunRecord]] = {}
        for r in self.runs:
            if r.changes:
                by_sweep.setdefault(r.sweep, []).append(r)
        if not by_sweep:
            return
        from loop.report.plots import legend

        yield (
            "<p class='note'>A row per candidate, a column per layer; a cell says what changed there "
            f"({esc(legend(), 4 * LIMIT)}) and the largest magnitude (x the rounding "
            "bound, or the scale ratio): green inside the footprint, hatched red outside, grey where "
            "nothing changed. Each cell's changes in full are its tooltip. A grid wider than the page is wrapped: "
            "its layers go on in the next block, under the same rows. &#9660;: scored far below its reference.</p>"
        )
        names = group_names(by_sweep)
        for sweep, audited in by_sweep.items():
            for at in range(0, len(audited), GRID_ROWS):
                part = audited[at : at + GRID_ROWS]
                more = f" (rows {at + 1}-{at + len(part)} of {len(audited)})" if len(audited) > GRID_ROWS else ""
                yield from audit_grid(part, group_cell(sweep, names) + esc(more))

    def noise(self) -> Iterator[str]:
        """Each stored noise analysis (loop.flow.evaluate.where_lost) as SNR per tensor in graph order."""
        from loop.report.noise_plot import noise_figure

        def figures() -> Iterator[Figure]:
            for r in self.runs:
                found = r.judged.quantization_ruined or {}
                rows = found.get("series")
                if isinstance(rows, list) and rows:
                    falls = [str(w.get("layer")) for w in found.get("worst_layers") or [] if isinstance(w, dict)]
                    title = f"{r.sweep} / {r.variant} (run {r.id}): SNR per quantized tensor, graph order"
                    yield noise_figure(title, [_row(row) for row in rows if isinstance(row, list)], falls)

        yield from self.plots(figures())
        for r in self.runs:  # the fix the terminal printed, as measured, to paste into the sweep file
            if Flag.QUANTIZATION_RUINED in r.flags:
                lines = (esc(line[2:], FIX_LINE) for line in ruined_lines(r))  # each line whole, up to FIX_LINE
                yield "<pre class='fix'>" + "\n".join(lines) + "</pre>"

    def searches(self) -> Iterator[str]:
        from loop.measure.results import pareto
        from loop.report.plots import pareto as pareto_plot
        from loop.report.searches import search_results

        studies, notes = search_results(self.runs, self.runs_dir)
        studies = {k: v for k, v in studies.items() if any(r.value("rate_ratio") is not None for r in v)}
        if not studies:
            return
        yield (
            "<p class='note'>SNR against rate ratio to each generation's reference (the base compiled with "
            "the same options), from the generation's interleaved race where one ran, else from the two "
            "runs' own figures; intervals as bars where known. Confounded and host-busy candidates are "
            "drawn as x and kept off the front.</p>"
        )
        yield "".join(f"<p class='note'>{esc(n)}</p>" for n in notes)
        for name, found in studies.items():
            drawn = [r for r in found if r.value("rate_ratio") is not None and r.value("snr_db") is not None]
            best = pareto(drawn)
            yield from self.plots(pareto_plot(drawn, best, f"Search: {for_person(name[: LIMIT + 1])}") for _ in (1,))
            yield from _front_table(best)

    def ladders(self) -> Iterator[str]:
        from loop.measure.ladder import depth_knee, frame_ladder
        from loop.measure.link import fit, rungs_of
        from loop.report.plots import depth_ladder, link_ladder

        ok = [r for r in self.runs if r.status == Status.OK and r.measure.median_fps]
        rungs = frame_ladder(ok)  # one network at several frame sizes, not networks side by side

        def figures() -> Iterator[Figure]:
            if rungs:
                try:
                    model = fit("ladder", rungs_of(rungs), "this report's rungs")
                except LoopError:
                    model = None
                yield link_ladder(rungs, model)
            for r in ok:
                if len(r.measure.by_depth) > 1:
                    yield depth_ladder(r, depth_knee(r.measure.by_depth))

        yield from self.plots(figures())

    def roofline(self) -> Iterator[str]:
        from loop.measure.link import load
        from loop.report.plots import roofline

        raced = {c.result.run_id: c.result.rate_fps for s in self.studies for c in s.candidates if c.result.rate_fps}
        ok = [r for r in self.runs if r.status == Status.OK and r.measure.bytes_in]
        measured = [r for r in ok if r.measure.median_fps or raced.get(r.id)]
        if not measured:
            return
        model = load(self.runs_dir, self.link)
        yield (
            f"<p class='note'>Ceiling: {esc(model.name)} ({esc(model.source)}). A point under the line is "
            "compute-bound here; where the line passes below a point, that run would be link-bound on that link."
            f"{' A study candidate is at the rate its rounds timed, as in the table above.' if raced else ''}</p>"
        )
        yield from self.plots(roofline(measured, model, raced) for _ in (1,))

    def ttfo(self) -> Iterator[str]:
        from loop.report.plots import ttfo_bars

        timed = [r for r in self.runs if r.measure.ttfo_ms is not None]
        yield from self.plots(ttfo_bars(timed) for _ in (1,) if timed)

    def generations(self) -> Iterator[str]:
        from loop.report.plots import generations
        from loop.report.searches import study_of

        # finished runs only: a generation a killed process left is no step of the best so far
        gens = [
            r
            for r in self.runs
            if r.generation is not None and r.status == Status.OK and r.verdict != Verdict.REFERENCE
        ]
        if not gens:
            return
        have = sorted({k for r in gens for k, v in r.scores.data.items() if isinstance(v, (int, float))})
        asked = [k for k in self.scores if k in have]
        searches: dict[str, list[RunRecord]] = {}  # one chart per search: its own best so far
        for r in gens:
            searches.setdefault(study_of(r.sweep), []).append(r)
        yield from self.plots(generations(mine, key, name) for name, mine in searches.items() for key in asked)
        missing = [k for k in self.scores if k not in have]
        if missing or not asked:
            yield (
                f"<p class='note'>No generation has {esc(', '.join(missing) or 'the scores asked')}; "
                f"scores here: {esc(', '.join(have) or 'none')} (loop report --score KEY).</p>"
            )

    def devices(self) -> Iterator[str]:
        from loop.report.plots import device_bars

        many = [r for r in self.runs if r.scores.devices]
        yield from self.plots(device_bars(many) for _ in (1,) if many)


def _row(row: list[Any]) -> tuple[str, float | None, float | None]:
    """A stored ``[layer, accumulated, local]``, whatever the ledger holds (a hand-edited row is drawn, not trusted)."""
    num = lambda v: float(v) if isinstance(v, int | float) else None  # noqa: E731
    padded = [*row, None, None, None]
    return str(padded[0]), num(padded[1]), num(padded[2])


# why a measured study leaves the first-output section empty, where it would be; and the roofline,
# where its runs were raced before their bytes per inference were recorded
RACED = (
    "the study's rates above come from its generations' interleaved rounds, which time each candidate's rate "
    "but no first output (loop sweep on the same base measures all three quantities)"
)


def write_page(
    out: TextIO,
    runs: Sequence[RunRecord],
    title: str,
    link: str,
    runs_dir: Path,
    scores: Sequence[str] = ("snr_db",),
) -> None:
    """The report, section by section, to ``out``."""
    import matplotlib

    from loop.report.plots import RC

    page = Page(runs, link, runs_dir, out, scores)
    layers, studies = perturbed_named(runs), page.studies
    out.write(f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{esc(title)}</title>")
    out.write(f"<style>{STYLE}</style></head><body><h1>{esc(title)}</h1>")
    with matplotlib.rc_context(RC):  # every text made while the page is drawn is plain text
        glance_title = "The study at a glance" if studies else "The sweep at a glance"
        page.section(glance_title, lambda: glance_parts(runs, studies), "no runs")
        page.section(
            f"The audit{f' (perturbed: {for_person(layers[: LIMIT + 1])})' if layers else ''}",
            page.audit,
            "no run changed anything the audit sees",
        )
        page.section(
            "Where accuracy is lost",
            page.noise,
            "no run stored a noise analysis (a base flagged quantization-ruined does)",
        )
        page.section("Searches: SNR against rate", page.searches, "no study generation with a rate ratio here")
        page.section("Ladders", page.ladders, "no link ladder (rungs of two frame sizes or more) and no depth ladder")
        raced = any(c.result.rate_fps is not None for study in studies for c in study.candidates)
        why = f"; {RACED}" if raced else ""
        old = "; the study's runs were raced before loop recorded their bytes per inference" if raced else ""
        page.section("The bus roofline", page.roofline, f"no run with a rate and bytes per inference{old}")
        page.section("Time to first output", page.ttfo, f"no run measured a first output{why}")
        page.section("Generations", page.generations, "no study or loop.evaluate generations here")
        page.section("Devices side by side", page.devices, "every run here ran on one device")
    out.write("</body></html>")


def render(
    runs: Sequence[RunRecord], title: str, link: str, runs_dir: Path, scores: Sequence[str] = ("snr_db",)
) -> str:
    """The report as one string (for tests and callers that want it in memory)."""
    buf = io.StringIO()
    write_page(buf, runs, title, link, runs_dir, scores)
    return buf.getvalue()


def output_path(out: Path | None, runs_dir: Path) -> Path:
    """Where the report goes: ``out`` (default RUNS/report.html) if it may be written there. Refused,
    as the user's error naming ``-o``: a path that exists and is not a regular file (a folder, a
    device, a pipe, a link), and anything in the runs folder but an .html file at its top,
    since the rest is loop's own (the ledger, artifacts, cache, links, studies, generations)."""
    target = out or runs_dir / "report.html"
    named = for_person(target)
    try:
        mode: int | None = os.lstat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise LoopError(f"{named}: {exc.strerror}", field="-o") from None
    if mode is not None and not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "a link" if stat.S_ISLNK(mode) else "not a regular file"
        raise LoopError(f"{named} is {kind}; the report is written only to a new or a regular file", field="-o")
    where, runs = target.parent.resolve() / target.name, Path(runs_dir).resolve()
    inside = where.relative_to(runs).parts if where.is_relative_to(runs) else None
    if inside is not None and (len(inside) != 1 or where.suffix.lower() not in (".html", ".htm")):
        raise LoopError(
            f"{named} is in the runs folder {for_person(runs_dir)}, which holds loop's own files; "
            "write the report elsewhere, or as an .html file at its top",
            field="-o",
        )
    return target


@contextmanager
def _replacing(target: Path) -> Iterator[TextIO]:
    """A text file that becomes ``target`` when the block ends well: written under a temporary
    name beside it (never through a link), fsynced, renamed over it; removed on any failure,
    so a failed report leaves the old page, or none."""
    from loop.store.files import FLAGS, NOFOLLOW, temp_name

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / temp_name(target.name)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | FLAGS, 0o644)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_report(
    runs_dir: Path,
    sweep: str | None,
    out: Path | None,
    link: str = DEFAULT_LINK,
    scores: Sequence[str] = ("snr_db",),
) -> Path:
    """Render the ledger's runs (one sweep's with its generations ``NAME-gN``, or all) to ``out``
    (default RUNS/report.html), with the generations plotted by each of ``scores``."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise LoopError(INSTALL) from None
    from loop.measure.link import load
    from loop.store.ledger import Ledger, is_live

    target = output_path(out, runs_dir)
    load(runs_dir, link)  # an unknown link is refused before the page is begun, not halfway through it
    with Ledger.of_runs(runs_dir, readonly=True, existing=True) as book:
        dead = {e.run.id for e in book.running() if not is_live(e)}
        runs = [_trimmed(_ended(r, dead)) for r in book.records() if sweep is None or r.in_sweep(sweep)]
    if not runs:
        raise LoopError(f"no runs{f' of sweep {for_person(sweep)!r}' if sweep else ''} in {runs_dir}")
    title = f"loop report: {sweep or ', '.join(sorted(set(group_names(r.sweep for r in runs).values())))}"
    with _replacing(target) as f:
        write_page(f, latest(runs), title, link, runs_dir, scores)
    return target


def _ended(run: RunRecord, dead: Collection[int | None]) -> RunRecord:
    """A run still ``running`` whose process is gone, shown ``interrupted`` as a resume would mark
    it (the report only reads: the ledger keeps the row as it is until then)."""
    return replace(run, status=Status.INTERRUPTED) if run.status == Status.RUNNING and run.id in dead else run


def _trimmed(run: RunRecord) -> RunRecord:
    """The run with its long texts (error, stderr, change details) cut to what the page shows,
    so a 100 MB error read from the ledger is let go before the page is drawn, not held to the end."""
    cut = LIMIT + 1
    long = len(run.error or "") > cut or len(run.stderr_tail) > cut or any(len(c.detail) > cut for c in run.changes)
    if not long:
        return run
    changes = tuple(replace(c, detail=c.detail[:cut]) for c in run.changes)
    return replace(run, error=run.error and run.error[:cut], stderr_tail=run.stderr_tail[:cut], changes=changes)


def latest(runs: Sequence[RunRecord]) -> list[RunRecord]:
    """The last attempt of each variant of each sweep: a resumed or re-run sweep's earlier rows
    (failed, interrupted, superseded) stay in the ledger (``loop runs`` lists them), not beside
    the rerun under the same names."""
    last: dict[tuple[str, str], RunRecord] = {}
    for run in sorted(runs, key=lambda r: r.id):
        last[(run.sweep, run.variant)] = run
    return sorted(last.values(), key=lambda r: r.id)


__all__ = ["audit_grid", "output_path", "render", "write_page", "write_report"]

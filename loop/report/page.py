"""``loop report``: one self-contained HTML file a person looks at.

Everything is inline: the styles, and every plot as SVG from :mod:`loop.report.plots`; the
page loads nothing, so it opens the same with no network. Sections appear where the ledger
has their data, and say so where it has none.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from pathlib import Path

from loop.core.errors import LoopError
from loop.core.kinds import NOT_COMPARABLE, Status, Verdict
from loop.core.record import RunRecord
from loop.core.registry import DEFAULT_LINK
from loop.report import perturbed_layer

INSTALL = "loop report needs matplotlib: pip install 'loop[report]'"
STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0;font-size:13px}
th,td{border:1px solid #ddd;padding:.25em .5em;text-align:right}th{background:#f6f6f6}
td:first-child,th:first-child{text-align:left}
.confounded td{background:#fdecea}.apart{color:#666}.note{color:#555;font-size:13px}
.plots{display:flex;flex-wrap:wrap;gap:1em}.plots svg{max-width:100%;height:auto}
"""


def _esc(value: object) -> str:
    return html.escape("-" if value is None else str(value))


def _num(value: float | None, spec: str) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], classes: Sequence[str] = ()) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in headers)
    body = "".join(
        f"<tr class='{cls}'>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>"
        for row, cls in zip(rows, list(classes) + [""] * len(rows), strict=False)
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _glance_row(r: RunRecord, runs: Sequence[RunRecord]) -> list[str]:
    from loop.report.plots import label

    m, parts = r.measure, r.measure.data.get("ttfo_parts") or {}
    ci = m.rate.ci95 if m.rate else None
    split = " / ".join(_num(parts.get(k), ".2f") for k in ("open_ms", "transfer_ms", "first_ms"))
    return [
        _esc(label(r, runs)),
        _esc(r.verdict if r.status == Status.OK else f"{r.status} at {r.stage}"),
        f"{_num(m.ttfo_ms, '.2f')} <span class='note'>({split})</span>",
        _num(m.median_fps, ".1f") + (f" <span class='note'>[{ci[0]:.1f}, {ci[1]:.1f}]</span>" if ci else ""),
        _num(m.data.get("rate_fps", {}).get("frames") if m.data else None, ","),
        f"{_num(m.bytes_in, ',')} / {_num(m.bytes_out, ',')}",
        _num(r.scores.snr_db, ".1f"),
        _esc(", ".join(r.flags) or "-"),
    ]


GLANCE = [
    "variant",
    "verdict",
    "ttfo ms (open / transfer / first)",
    "rate fps [95% CI]",
    "frames",
    "bytes in / out",
    "SNR dB",
    "flags",
]


def glance(runs: Sequence[RunRecord]) -> str:
    used = [r for r in runs if r.status == Status.OK and r.verdict not in NOT_COMPARABLE]
    apart = [r for r in runs if r not in used]
    text = _table(GLANCE, [_glance_row(r, runs) for r in used])
    if apart:
        text += "<p class='apart'>Recorded, not used in comparisons (confounded, no reference, failed):</p>"
        text += _table(
            GLANCE,
            [_glance_row(r, runs) for r in apart],
            ["confounded" if r.verdict == Verdict.CONFOUNDED else "apart" for r in apart],
        )
        why = [
            "; ".join(f"{c.layer} {c.what}: {c.detail}" for c in r.changes if not c.allowed) or r.why_apart or r.verdict
            for r in apart
        ]
        text += (
            "<ul class='note'>"
            + "".join(f"<li>{_esc(r.variant)}: {_esc(w)}</li>" for r, w in zip(apart, why, strict=True))
            + "</ul>"
        )
    return text


class Page:
    """The report's sections in order; each is skipped with a line saying why when empty."""

    def __init__(self, runs: Sequence[RunRecord], link: str, runs_dir: Path) -> None:
        from loop.report.plots import svg

        self.runs, self.link, self.runs_dir, self.svg = list(runs), link, runs_dir, svg
        self.parts: list[str] = []
        self.drawn = 0  # figures so far: each takes its own id salt

    def section(self, title: str, body: Callable[[], str], missing: str) -> None:
        content = body()
        self.parts.append(f"<h2>{_esc(title)}</h2>" + (content or f"<p class='note'>{_esc(missing)}</p>"))

    def plots(self, figures: Sequence[object]) -> str:
        if not figures:
            return ""
        first, self.drawn = self.drawn, self.drawn + len(figures)
        drawn = (self.svg(f, f"loop-{first + i}") for i, f in enumerate(figures))  # type: ignore[arg-type]
        return "<div class='plots'>" + "".join(drawn) + "</div>"

    def audit(self) -> str:
        from loop.report.plots import audit_grid

        audited = [r for r in self.runs if r.changes]
        from loop.report.plots import label

        return self.plots([audit_grid(r, label(r, self.runs)) for r in audited])

    def ladders(self) -> str:
        from loop.measure.ladder import depth_knee, frame_ladder
        from loop.measure.link import fit, rungs_of
        from loop.report.plots import depth_ladder, link_ladder

        ok = [r for r in self.runs if r.status == Status.OK and r.measure.median_fps]
        rungs = frame_ladder(ok)  # one network at several frame sizes, not networks side by side
        figs = []
        if rungs:
            try:
                model = fit("ladder", rungs_of(rungs), "this report's rungs")
            except LoopError:
                model = None
            figs.append(link_ladder(rungs, model))
        figs += [depth_ladder(r, depth_knee(r.measure.by_depth)) for r in ok if len(r.measure.by_depth) > 1]
        return self.plots(figs)

    def roofline(self) -> str:
        from loop.measure.link import load
        from loop.report.plots import roofline

        measured = [r for r in self.runs if r.status == Status.OK and r.measure.median_fps and r.measure.bytes_in]
        if not measured:
            return ""
        model = load(self.runs_dir, self.link)
        note = (
            f"<p class='note'>Ceiling: {_esc(model.name)} ({_esc(model.source)}). A point under the line is "
            "compute-bound here; where the line passes below a point, that run would be link-bound on that link.</p>"
        )
        return note + self.plots([roofline(measured, model)])

    def ttfo(self) -> str:
        from loop.report.plots import ttfo_bars

        timed = [r for r in self.runs if r.measure.ttfo_ms is not None]
        return self.plots([ttfo_bars(timed)]) if timed else ""

    def generations(self) -> str:
        from loop.report.plots import generations

        gens = [r for r in self.runs if r.generation is not None and r.verdict != Verdict.REFERENCE]
        if not gens:
            return ""
        score = "snr_db" if any(r.scores.snr_db is not None for r in gens) else "output_mean"
        return self.plots([generations(gens, score)])

    def devices(self) -> str:
        from loop.report.plots import device_bars

        many = [r for r in self.runs if r.scores.devices]
        return self.plots([device_bars(many)]) if many else ""


def render(runs: Sequence[RunRecord], title: str, link: str, runs_dir: Path) -> str:
    page = Page(runs, link, runs_dir)
    layer = perturbed_layer(runs)
    page.section("The sweep at a glance", lambda: glance(runs), "no runs")
    page.section(
        f"The audit{f' (perturbed: {layer})' if layer else ''}", page.audit, "no run changed anything the audit sees"
    )
    page.section("Ladders", page.ladders, "no link ladder (rungs of two frame sizes or more) and no depth ladder here")
    page.section("The bus roofline", page.roofline, "no run with a rate and bytes")
    page.section("Time to first output", page.ttfo, "no run measured a first output")
    page.section("Generations", page.generations, "no loop.evaluate generations here")
    page.section("Devices side by side", page.devices, "every run here ran on one device")
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{_esc(title)}</title>"
        f"<style>{STYLE}</style></head><body><h1>{_esc(title)}</h1>{''.join(page.parts)}</body></html>"
    )


def write_report(runs_dir: Path, sweep: str | None, out: Path | None, link: str = DEFAULT_LINK) -> Path:
    """Render the ledger's runs (one sweep's with its ``loop.evaluate`` generations ``NAME-gN``,
    or all) to ``out`` (default RUNS/report.html)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise LoopError(INSTALL) from None
    from loop.store.files import atomic_write
    from loop.store.ledger import Ledger

    with Ledger.open_existing(runs_dir / "ledger.sqlite") as book:
        runs = [r for r in book.records() if sweep is None or r.in_sweep(sweep)]
    if not runs:
        raise LoopError(f"no runs{f' of sweep {sweep!r}' if sweep else ''} in {runs_dir}")
    title = f"loop report: {sweep or ', '.join(sorted({r.sweep for r in runs}))}"
    target = out or runs_dir / "report.html"
    return atomic_write(target, render(latest(runs), title, link, runs_dir).encode())


def latest(runs: Sequence[RunRecord]) -> list[RunRecord]:
    """The last attempt of each variant of each sweep: a resumed or re-run sweep's earlier rows
    (failed, interrupted, superseded) stay in the ledger (``loop runs`` lists them), not beside
    the rerun under the same names."""
    last: dict[tuple[str, str], RunRecord] = {}
    for run in sorted(runs, key=lambda r: r.id):
        last[(run.sweep, run.variant)] = run
    return sorted(last.values(), key=lambda r: r.id)

"""The report, a face: plain-text tables for the terminal (here), and ``loop report``'s one
self-contained HTML page (:mod:`loop.report.page`) with its plots (:mod:`loop.report.plots`)."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from typing import Any

from loop.core.kinds import NOT_COMPARABLE, Flag, Status, Verdict
from loop.core.record import PINNED, Change, RunRecord
from loop.core.text import LIMIT, cut, for_person, screen_width


def _fmt(value: Any, spec: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    try:
        return format(value, spec)
    except (TypeError, ValueError):
        return str(value)


NAME_LIMIT = 1000  # a name's characters read before it is cut to its column
NAME_MIN = 16  # a name or prose column is never cut narrower: past that a table may be wider than the screen


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    names: Sequence[int] = (0,),
    prose: Sequence[int] = (),
    width: int | None = None,
) -> str:
    """Aligned columns; every cell, names and stored strings among them, as a person may see it.
    The ``names`` columns (layers, variants, sweeps; cut in the middle) and ``prose`` columns
    (reasons, flags; cut at the end) are cut, widest first, so the table fits ``width``
    (default: the terminal's). Figures are never cut; JSON and CSV keep everything whole."""
    headers = [for_person(h) for h in headers]
    # a name keeps its end (the part that tells) until it is cut in the middle below
    rows = [[for_person(c, NAME_LIMIT if i in names else LIMIT) for i, c in enumerate(r)] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    cuttable = {*names, *prose}
    cap = _cap(widths, cuttable, width or screen_width())
    if cap is not None:
        widths = [min(w, cap) if i in cuttable else w for i, w in enumerate(widths)]
        headers = [cut(h, widths[i], i not in prose) for i, h in enumerate(headers)]
        rows = [[cut(c, widths[i], i not in prose) for i, c in enumerate(r)] for r in rows]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def _cap(widths: Sequence[int], cuttable: set[int], screen: int) -> int | None:
    """The widest a cuttable column may be for the table to fit ``screen`` (never below
    NAME_MIN); None when it fits as it is."""

    def total(cap: int) -> int:
        return sum(min(w, cap) if i in cuttable else w for i, w in enumerate(widths)) + 2 * (len(widths) - 1)

    cap = max((widths[i] for i in cuttable if i < len(widths)), default=0)
    if total(cap) <= screen:
        return None
    while cap > NAME_MIN and total(cap) > screen:
        cap -= 1
    return cap


def layers_table(rows: Sequence[dict[str, Any]]) -> str:
    """``loop layers``: each quantized layer, where its forced ranges land and the removed
    clamp each of those grids stands for."""
    if not rows:
        return "no quantized layers (Conv, ConvTranspose, Gemm or MatMul over weights or two activations)"
    end = lambda v, inf: inf if v is None else format(v, "g")  # noqa: E731
    clamp = lambda b: "-" if b is None else f"[{end(b[0], '-inf')}, {end(b[1], 'inf')}]"  # noqa: E731
    return table(
        ["layer", "op", "weights", "range in lands on", "clamp in", "range out lands on", "clamp out"],
        [
            [
                str(r["layer"]),
                str(r["op"]),
                f"{r['weight_count']:,}" if r["weights"] else "-",
                str(r["in_tensor"]),
                clamp(r["in_bounds"]),
                str(r["out_tensor"]),
                clamp(r["out_bounds"]),
            ]
            for r in rows
        ],
        # the layer column stays whole: it is what a sweep file's ``layer:`` is copied from,
        # and a cut in the middle drops the block number that tells EfficientNet's layers apart
        names=(3, 5),
    )


def perturbed_layer(runs: Sequence[RunRecord]) -> str | None:
    """The first layer any run perturbed; ``None`` where none was."""
    return next((run.perturbed_layers[0] for run in runs if run.perturbed_layers), None)


def perturbed_named(runs: Sequence[RunRecord], shown: int = 3) -> str:
    """Every layer the runs perturbed, in order, the first ``shown`` by name and the rest counted
    ('' where none was): a heading says what its section holds, not the first run's layer."""
    layers = list(dict.fromkeys(layer for run in runs for layer in run.perturbed_layers))
    more = f" and {len(layers) - shown} more" if len(layers) > shown else ""
    return ", ".join(layers[:shown]) + more


def summary_row(run: RunRecord, layer: str | None) -> list[str]:
    m, s = run.measure, run.scores
    differ = f"{s.bytes_differ:,}/{s.bytes_total:,}" if s.bytes_differ is not None else "-"
    shown = run.layer(layer)
    return [
        run.variant,
        run.status if run.status != Status.OK else _fmt(run.verdict),
        _fmt(run.kernel_sha)[:12],
        _fmt(shown.out_scale if shown else None, ".4g"),
        _fmt(run.stages.get("optimize_s"), ".2f"),
        _fmt(run.stages.get("compile_s"), ".3f"),
        _fmt(m.ttfo_ms, ".2f"),
        _rate(run),
        f"{_fmt(m.bytes_in, ',')}/{_fmt(m.bytes_out, ',')}",
        _fmt(s.output_mean, ".4f"),
        differ,
        _snr(s.snr_db, s.interval("snr_db")),
    ]


HEADER_NAME = 24  # a layer named in a column's header: the column holds numbers


def sweep_summary(runs: Sequence[RunRecord]) -> str:
    """One row per variant; confounded and failed runs are shown apart, with why."""
    # the perturbed layer's scale, else the first layer's: a column worth showing either way
    layer = perturbed_layer(runs) or (runs[0].layers[0].name if runs and runs[0].layers else None)
    headers = [
        "variant",
        "verdict",
        "kernel sha",
        f"{cut(for_person(layer, NAME_LIMIT), HEADER_NAME)} out scale",
        "optimize s",
        "compile s",
        "ttfo ms",
        "rate fps",
        "bytes in/out",
        "out mean",
        "bytes differ",
        "SNR dB (95% CI)",
    ]
    used = [r for r in runs if r.status == Status.OK and r.verdict not in NOT_COMPARABLE]
    apart = [r for r in runs if r.status != Status.OK or r.verdict in NOT_COMPARABLE]
    if layer is None:
        headers[3] = "out scale"
    text = table(headers, [summary_row(r, layer) for r in used])
    if apart:
        text += "\n\nRecorded, not used in comparisons:\n" + table(headers, [summary_row(r, layer) for r in apart])
        for r in apart:
            text += "\n" + _why(r)
    notes = [f"  {for_person(r.variant)}: {_one_line(w)}" for r in runs for w in (*r.warnings, *_score_warnings(r))]
    notes += [f"  {for_person(r.variant)}: {f}: {NOTED_FLAGS[f]}" for r in runs for f in r.flags if f in NOTED_FLAGS]
    notes += [host_busy_line(r) for r in runs if Flag.HOST_BUSY in r.flags]
    notes += [below_line(r) for r in runs if Flag.BELOW_REFERENCE in r.flags]
    notes += [line for r in runs if Flag.QUANTIZATION_RUINED in r.flags for line in ruined_lines(r)]
    if notes:
        text += "\n\nWarnings:\n" + "\n".join(notes)
    return text


def _score_warnings(run: RunRecord) -> list[str]:
    """What the scoring said of the SNR itself (a constant output), as recorded."""
    said = run.scores.data.get("warnings")
    return [str(w) for w in said] if isinstance(said, list) else []


NOTED_FLAGS = {Flag.CALIBRATION_WORSE: "scored far below the sweep's own calibration method"}


def ruined_lines(run: RunRecord) -> list[str]:
    """The base the default quantization ruined: by how much, the layers where its signal is lost
    (:mod:`loop.judge.falls`), and a variant that would try 16 bits there."""
    found = run.judged.quantization_ruined or {}
    snr, threshold = found.get("snr_db"), found.get("threshold_db")
    why = (
        [f"SNR {_fmt(snr, '.1f')} dB, below {_fmt(threshold, 'g')}"]
        if snr is not None and snr < (threshold or 0)
        else []
    )
    why += [
        f"top-1 agrees with the float model on {found['top1_agreement'][k]:.0%} of frames ({for_person(k)})"
        for k in found.get("collapsed", [])
    ]
    lines = [f"  {for_person(run.variant)}: flagged quantization-ruined: {'; '.join(why) or 'see its info'}"]
    worst = found.get("worst_layers") or []
    if worst:
        named = ", ".join(
            f"{for_person(w['layer'])} ({_fmt(w.get('before_db'), '.1f')} -> {_fmt(w.get('after_db'), '.1f')} dB)"
            for w in worst
        )
        lines.append(f"    the signal is lost at: {named}")
        measure = found.get("measure_with")
        widening = found.get("widening")
        if found.get("try_measured") and isinstance(widening, dict):
            lines += _measured_lines(widening)
        elif measure:  # the entries are the falls' regions, a first guess that may fall short
            if found.get("try_measured_error"):
                lines.append(f"    measuring it failed: {_one_line(str(found['try_measured_error']))}")
            lines.append(f"    a first guess, unmeasured (`{for_person(str(measure))}` measures it and widens")
            lines.append("    until a variant meets its target); to try 16 bits there, add a variant:")
        else:
            lines.append("    to try 16 bits there, add a variant:")
        lines += ["      - name: sixteen-bits", "        perturb:"]
        lines += [f"          - {entry}" for entry in found.get("try", [])]
    elif "worst_layers" in found:
        lines.append("    no layer loses 6 dB or more at once: the loss is spread (loop noise lists every layer)")
    elif found.get("worst_layers_error"):
        lines.append(f"    worst layers not found: {_one_line(str(found['worst_layers_error']))}")
    return lines


def _measured_lines(widening: dict[str, Any]) -> list[str]:
    """The printed variant as the sweep measured it: the step chosen, what it reached, its verdict."""
    steps = {s.get("index"): s for s in widening.get("steps") or [] if isinstance(s, dict)}
    chosen, target = steps.get(widening.get("chosen")), widening.get("target_db")
    if chosen is None:
        return ["    measured: no step could be compiled and scored (loop noise says why)"]
    how = "meets" if widening.get("met") == chosen.get("index") else "the best reached, short of"
    return [
        f"    measured: step {chosen.get('index')} ({for_person(str(chosen.get('why')))}) reached "
        f"{_fmt(chosen.get('snr_db'), '.1f')} dB, {how} the target {_fmt(target, 'g')} dB, "
        f"{for_person(str(chosen.get('verdict')))}; to keep those layers at 16 bits, add a variant:"
    ]


def below_line(run: RunRecord) -> str:
    """One line per run scored far below its reference: its verdict speaks of its footprint, this of its answer."""
    found = run.judged.below_reference or {}
    return (
        f"  {for_person(run.variant)}: flagged below-reference: SNR {_fmt(found.get('snr_db'), '.1f')} dB "
        f"against its reference's {_fmt(found.get('reference_snr_db'), '.1f')} dB, beyond its interval "
        f"over the frames: a {_fmt(run.verdict)} run whose answer is far worse"
    )


def host_busy_line(run: RunRecord) -> str:
    """One line per host-busy run, with the figure: the rate is of a shared machine."""
    return (
        f"  {for_person(run.variant)}: flagged host-busy: "
        f"other processes used {_fmt(run.measure.others_core_pct, '.0f')}% "
        "of a core while it was measured; compare it interleaved (loop compare) before trusting its rate"
    )


def _why(run: RunRecord) -> str:
    name = for_person(run.variant)
    if run.status != Status.OK:
        return f"  {name}: {_one_line(run.why_apart)}"
    if run.verdict != Verdict.CONFOUNDED:
        return f"  {name}: {run.verdict}: {_one_line(run.why_apart)}"
    lines = [f"  {name}: confounded; outside the footprint:"]
    lines += [f"    {_change(c)}" for c in run.changes if not c.allowed]
    inside = [c for c in run.changes if c.allowed and c.what in ("out_scale", "in_scale")]
    lines += [f"    (inside: {_change(c)})" for c in inside[:2]]
    return "\n".join(lines)


def _change(change: Change) -> str:
    """``layer what: detail``, each part as a person may see it (a layer is an ONNX node's name)."""
    return f"{for_person(change.layer)} {for_person(change.what)}: {_one_line(change.detail)}"


WHY_WIDTH = 72  # the table stays a line a run; `loop runs --json` has the whole text


ONE_LINE = 1000


def _one_line(text: object) -> str:
    """A stored string (an error, a compiler's warning) on one line, as a person may see it,
    cut first (a 100 MB error is not split whole) at the length a line is allowed."""
    return for_person(" ".join(str(text)[: ONE_LINE + 1].split()), ONE_LINE)


def _clip(text: str, width: int) -> str:
    one = _one_line(text)  # escaped before it is measured
    return one if len(one) <= width else one[: width - 3] + "..."


def _rate(run: RunRecord) -> str:
    """Its median rate, or why it has none where it was run score-only."""
    if run.measure.median_fps is None and Flag.SCORE_ONLY in run.flags:
        return str(Flag.SCORE_ONLY)
    return _fmt(run.measure.median_fps, ".1f")


def runs_table(runs: Sequence[RunRecord]) -> str:
    headers = ["id", "sweep", "variant", "status", "verdict", "kernel sha", "rate fps", "flags", "why apart"]
    rows = [
        [
            str(r.id),
            r.sweep,
            r.variant,
            r.status,
            _fmt(r.verdict),
            _fmt(r.kernel_sha)[:12],
            _rate(r),
            ",".join(r.flags) or "-",
            _clip(r.why_apart or "-", WHY_WIDTH),
        ]
        for r in runs
    ]
    return table(headers, rows, names=(1, 2), prose=(7, 8))


def runs_lines(runs: Sequence[RunRecord], fmt: str) -> str:
    """``jsonl``: the pinned JSON of each run on a line of its own; ``csv``: a row a run with
    the pinned keys as columns, the nested ones (layers, measure, scores...) as JSON text."""
    if fmt == "jsonl":
        return "".join(json.dumps(r.to_json(), separators=(",", ":")) + "\n" for r in runs)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(PINNED)
    for r in runs:
        row = r.to_json()
        writer.writerow(_cell(row[k]) for k in PINNED)
    return out.getvalue()


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def study_table(results: Sequence[Any]) -> str:
    """A study's results (:class:`loop.measure.results.Result`), a line each."""
    headers = ["run", "sweep", "candidate", "verdict", "SNR dB (95% CI)", "rate fps", "rate ratio (95% CI)", "stopped"]
    headers += ["reused", "why not usable"]
    rows = [
        [
            str(r.run_id),
            r.sweep or "-",
            r.variant,
            _fmt(r.verdict or r.status),
            _snr(r.value("snr_db"), r.run.scores.interval("snr_db")),
            _fmt(r.rate_fps, ".1f") if r.why_no_rate != Flag.SCORE_ONLY else str(Flag.SCORE_ONLY),
            _ratio(r.rate_ratio, r.rate_ratio_ci95),
            r.stopped or "-",
            "yes" if r.reused else "",
            _clip(r.why or "-", WHY_WIDTH),
        ]
        for r in results
    ]
    return table(headers, rows, names=(1, 2), prose=(9,)) if rows else "no candidates"


def _snr(snr: float | None, ci: tuple[float, float] | None) -> str:
    """An SNR with its 95% interval over the scoring frames, where it has one."""
    if snr is None:
        return "-"
    return f"{snr:.1f}" + (f" ({ci[0]:.1f}-{ci[1]:.1f})" if ci else "")


def _ratio(ratio: float | None, ci: tuple[float, float] | None) -> str:
    if ratio is None:
        return "-"
    return f"{ratio:.3f}" + (f" ({ci[0]:.3f}-{ci[1]:.3f})" if ci else "")


def audit_table(runs: Sequence[RunRecord]) -> str:
    blocks = []
    for r in runs:
        head = f"{r.id:>4}  {for_person(r.sweep)}/{for_person(r.variant)}: {r.verdict or r.status}"
        body = [f"        {'  ' if c.allowed else '! '}{_change(c)}" for c in r.changes]
        blocks.append("\n".join([head, *body]))
    return "\n".join(blocks)


def link_table(runs: Sequence[RunRecord]) -> str:
    """The seed's frame-ladder table: in/out MB, ms/frame, frames/s, MB/s; and the plateau."""
    from loop.measure.ladder import link_plateau, link_rate

    ok = [r for r in runs if r.status == Status.OK and r.measure.median_fps]
    text = table(
        ["frame", "bytes in", "bytes out", "ms/frame", "frames/s", "MB/s", "spread"],
        [_rung_row(r, r.measure.median_fps or math.nan, link_rate(r)) for r in ok],
    )
    plateau = link_plateau(ok)
    if plateau:
        text += f"\nthe link plateaus at {plateau[1]:.0f}-{plateau[2]:.0f} MB/s from {for_person(plateau[0])} on"
    else:
        text += "\nno plateau: MB/s is still climbing (or falling) across these frames"
    return text


def _rung_row(run: RunRecord, fps: float, mb_s: float) -> list[str]:
    m = run.measure
    return [
        run.variant,
        _fmt(m.bytes_in, ","),
        _fmt(m.bytes_out, ","),
        f"{1e3 / fps:.2f}",
        f"{fps:.1f}",
        f"{mb_s:.0f}",
        f"{_fmt(m.spread_pct, '.1f')}%",
    ]


def depth_table(run: RunRecord) -> str:
    from loop.measure.ladder import depth_knee

    by_depth = run.measure.by_depth
    rows = [
        [
            str(d.depth),
            f"{d.rate.median:.1f}",
            _fmt(d.rate.min, ".1f"),
            _fmt(d.rate.max, ".1f"),
            f"{d.spread_pct:.1f}%",
        ]
        for d in by_depth
    ]
    head = ["depth", "median fps", "min", "max", "spread"]
    text = f"{for_person(run.variant)}: rate by queue depth\n" + table(head, rows)
    knee = depth_knee(by_depth)
    return text + (f"\nthe rate stops climbing at depth {knee}" if knee is not None else "")


def device_disagreement(runs: Sequence[RunRecord]) -> str:
    """How far further devices (an emulator, say) disagree with the first on the same inputs."""
    rows = [
        [
            r.variant,
            d.device,
            _fmt(d.snr_db_vs_first, ".1f"),
            _fmt(d.max_abs_diff, ".4g"),
            f"{d.values_differ:,}/{d.values_total:,}",
        ]
        for r in runs
        for d in r.scores.devices
    ]
    if not rows:
        return ""
    return "Devices against the first device, same inputs:\n" + table(
        ["variant", "device", "SNR dB", "max |diff|", "values differ"], rows, names=(0, 1)
    )


def ladders(runs: Sequence[RunRecord]) -> str:
    """Ladder tables for a sweep whose variants are rungs (own bases) or measured at many depths."""
    parts = []
    from loop.measure.ladder import frame_ladder

    rungs = frame_ladder(runs)  # one network at several frame sizes, not networks side by side
    if rungs:
        parts.append(link_table(rungs))
    parts += [depth_table(r) for r in runs if r.status == Status.OK and len(r.measure.by_depth) > 1]
    parts.append(device_disagreement(runs))
    return "\n\n".join(p for p in parts if p)

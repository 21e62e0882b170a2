"""The terminal tables, on run records built here: what each table shows, and what it keeps apart."""

from dataclasses import replace

from loop.core.facts import CompileFacts, Judgement
from loop.core.record import Change, Measurement, RunRecord, Scores
from loop.core.text import CUT
from loop.core.vocab import LayerPrint
from loop.report import audit_table, host_busy_line, ladders, runs_table, sweep_summary


def figures(fps: float, bytes_in: int = 3072, spread: float = 1.0, **more: object) -> Measurement:
    rate = {"median": fps, "min": fps * 0.99, "max": fps * 1.01, "ci95": [fps * 0.98, fps * 1.02], "repeats": 3}
    return Measurement.from_dict(
        {"ttfo_ms": 12.346, "rate_fps": rate, "spread_pct": spread, "bytes_in": bytes_in, "bytes_out": 8192, **more}
    )


LAYERS = (
    LayerPrint("conv1", kernel_sha="k1", bias_sha="b1", in_scale=0.0039, out_scale=0.0039),
    LayerPrint("conv2", kernel_sha="k2", bias_sha="b2", in_scale=0.0039, out_scale=0.0056),
)
BASE = RunRecord(
    id=1,
    sweep="s",
    variant="base",
    status="ok",
    kernel_sha="c2a300f4f69f1281c0cf",
    stages={"optimize_s": 0.1349, "compile_s": 0.0056},
    layers=LAYERS,
    measure=figures(4955.87),
    scores=Scores.from_json({"output_mean": -0.00649, "snr_db": "inf"}),  # the ledger's inf, as JSON keeps it
    verdict="reference",
)
SCALE = replace(
    BASE,
    id=2,
    variant="scale",
    verdict="clean",
    layers=(replace(LAYERS[0], out_scale=0.0314), LAYERS[1]),
    perturb=({"op": "force_range_out", "layer": "conv1", "range": [0.0, 8.0]},),
    scores=Scores.from_json({"output_mean": 0.5, "snr_db": 21.04, "bytes_differ": 1234, "bytes_total": 8192}),
)
CONFOUNDED = replace(
    BASE,
    id=3,
    variant="w",
    verdict="confounded",
    changes=(
        Change("conv1", "out_scale", "x8.0"),
        Change("conv1", "bias", "moved 3 steps", allowed=False),
    ),
)
FAILED = RunRecord(id=4, sweep="s", variant="slow", status="failed", stage="compile", error="timed out after 1 s")


def test_sweep_summary_shows_the_perturbed_layer_and_keeps_the_rest_apart():
    text = sweep_summary([BASE, SCALE, CONFOUNDED, FAILED])
    used, apart = text.split("\n\nRecorded, not used in comparisons:\n")
    header, _, base, scale = used.splitlines()
    assert "conv1 out scale" in header and header.startswith("variant")
    assert base.split() == [
        "base",
        "reference",
        "c2a300f4f69f",
        "0.0039",
        "0.13",
        "0.006",
        "12.35",
        "4955.9",
        "3,072/8,192",
        "-0.0065",
        "-",
        "inf",
    ]
    assert scale.split()[:4] == ["scale", "clean", "c2a300f4f69f", "0.0314"]
    assert scale.split()[-2:] == ["1,234/8,192", "21.0"]
    assert "  w: confounded; outside the footprint:\n    conv1 bias: moved 3 steps\n" in apart
    assert "    (inside: conv1 out_scale: x8.0)" in apart
    assert "  slow: failed at compile: timed out after 1 s" in apart
    table_rows = [line.split()[0] for line in apart.splitlines()[2:4]]
    assert table_rows == ["w", "slow"] and "Warnings" not in text


def test_long_names_are_cut_so_each_table_fits_the_screen_and_lines_stay_whole(monkeypatch):
    from loop.report import runs_lines

    monkeypatch.setenv("COLUMNS", "120")
    layer = "/model" + "/encoder_layer_stack" * 8 + "/attention/out_proj/MatMul"
    variant = "force_range_out" + "_" + layer
    layers = (replace(LAYERS[0], name=layer), LAYERS[1])
    perturb = ({"op": "force_range_out", "layer": layer, "range": [0.0, 8.0]},)
    long = replace(SCALE, variant=variant, layers=layers, perturb=perturb)
    shown = runs_table([BASE, long])
    assert max(map(len, shown.splitlines())) <= 120, shown
    assert "force_range_out…" in shown and "out_proj/MatMul" in shown
    # the summary's figures alone take ~140 columns: its names are cut so they add nothing past NAME_MIN
    summary = sweep_summary([BASE, long])
    short = replace(long, variant=variant[:16], layers=(replace(LAYERS[0], name=layer[:24]), LAYERS[1]))
    short = replace(short, perturb=({**perturb[0], "layer": layer[:24]},))
    assert max(map(len, summary.splitlines())) == max(map(len, sweep_summary([BASE, short]).splitlines()))
    assert "force…" in summary and "/model/…/out_proj/MatMul out scale" in summary
    assert all(variant in line for line in runs_lines([long], "jsonl").splitlines())
    assert variant in runs_lines([long], "csv")


def test_sweep_summary_warns_once_per_flagged_run():
    busy = replace(
        SCALE, flags=("host-busy", "calibration-worse"), measure=figures(1.0, host={"others_core_pct": 48.0})
    )
    noted = replace(BASE, compiled=CompileFacts(warnings=("USB power limit reached",)))
    text = sweep_summary([noted, busy])
    warned = text.split("\n\nWarnings:\n")[1].splitlines()
    assert warned[0] == "  base: USB power limit reached"
    assert warned[1] == "  scale: calibration-worse: scored far below the sweep's own calibration method"
    assert warned[2] == host_busy_line(busy) and "48% of a core" in warned[2] and len(warned) == 3


def test_sweep_summary_says_when_a_constant_output_makes_the_snr_mean_nothing():
    said = "output 0 of 1 is constant over the scoring frames (every value 0 in all 8): SNR measures nothing"
    dead = replace(BASE, scores=Scores.from_json({"snr_db": "inf", "warnings": [said]}))
    assert sweep_summary([dead]).split("\n\nWarnings:\n")[1].splitlines() == [f"  base: {said}"]


def test_without_a_perturbed_layer_or_a_ladder():
    bare = RunRecord(id=1, sweep="s", variant="a", status="ok", verdict="n/a", measure=figures(1.0))
    text = sweep_summary([bare, replace(bare, variant="b")])
    assert text.splitlines()[0].split()[4:6] == ["out", "scale"] and "None" not in text
    assert ladders([bare, replace(bare, variant="b")]) == ""  # same bytes: two compile options, not a ladder


def test_runs_table_one_row_a_run():
    lines = runs_table([BASE, replace(FAILED, flags=("power-limited",))]).splitlines()
    header = ["id", "sweep", "variant", "status", "verdict", "kernel", "sha", "rate", "fps", "flags", "why", "apart"]
    assert lines[0].split() == header
    assert set(lines[1]) == {"-", " "}
    assert lines[2].split() == ["1", "s", "base", "ok", "reference", "c2a300f4f69f", "4955.9", "-", "-"]
    assert lines[3].split()[:8] == ["4", "s", "slow", "failed", "-", "-", "-", "power-limited"]
    assert lines[3].endswith("failed at compile: timed out after 1 s")


def test_runs_table_says_why_a_run_has_no_reference_and_clips_to_a_line(monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    why = "the reference 'base' failed at stage compile: " + "timed out " * 20
    lone = RunRecord(id=5, sweep="s", variant="w", status="ok", verdict="no-reference", judged=Judgement(why))
    row = runs_table([lone]).splitlines()[2]
    assert "the reference 'base' failed at stage" in row and row.endswith(CUT) and len(row) <= 120
    assert runs_table([replace(lone, judged=Judgement())]).endswith("the base it is audited against did not finish")


def test_audit_table_marks_changes_outside_the_footprint():
    assert audit_table([BASE, CONFOUNDED, FAILED]) == (
        "   1  s/base: reference\n"
        "   3  s/w: confounded\n"
        "          conv1 out_scale: x8.0\n"
        "        ! conv1 bias: moved 3 steps\n"
        "   4  s/slow: failed"
    )


def rung(name: str, bytes_in: int, fps: float) -> RunRecord:
    return replace(BASE, variant=name, verdict="n/a", measure=figures(fps, bytes_in=bytes_in, spread=1.0))


def test_ladders_show_the_link_plateau_the_depth_knee_and_devices():
    link = [rung("512p", 1_048_576, 207), rung("720p", 3_686_400, 63), rung("1080p", 8_294_400, 29)]
    depths = [
        {"depth": d, "rate_fps": {"median": r, "min": r - 1, "max": r + 1}, "spread_pct": 1.0}
        for d, r in ((1, 724.0), (8, 2000.0), (16, 2060.0), (32, 2094.0))
    ]
    # a sweep has one reference: the depth and device rows are variants of it
    deep = replace(BASE, variant="deep", verdict="clean", measure=figures(2094.0, by_depth=depths))
    devices = {
        "hailo-emulator": {"snr_db_vs_first": 35.5, "max_abs_diff": 0.25, "values_differ": 3, "values_total": 1000}
    }
    two = replace(BASE, variant="two", verdict="clean", scores=Scores.from_json({"devices": devices}))
    link_text, depth_text, device_text = ladders([*link, deep, two]).split("\n\n")
    rows = link_text.splitlines()
    assert rows[2].split() == ["512p", "1,048,576", "8,192", "4.83", "207.0", "219", "1.0%"]
    assert rows[-1].startswith("the link plateaus at ") and rows[-1].endswith(" MB/s from 512p on")
    assert depth_text.splitlines()[0] == "deep: rate by queue depth"
    assert depth_text.splitlines()[3].split() == ["1", "724.0", "723.0", "725.0", "1.0%"]
    assert depth_text.endswith("the rate stops climbing at depth 16")
    assert device_text.splitlines()[-1].split() == ["two", "hailo-emulator", "35.5", "0.25", "3/1,000"]


def test_a_link_still_climbing_says_so():
    climbing = [rung("a", 800_000, 1), rung("b", 1_600_000, 5)]
    assert ladders(climbing).endswith("no plateau: MB/s is still climbing (or falling) across these frames")


def test_why_apart_says_only_what_is_known():
    assert replace(FAILED, status="running", stage=None, error=None).why_apart is None
    assert replace(FAILED, status="interrupted", stage=None, error=None).why_apart == "interrupted"
    assert replace(BASE, verdict="confounded").why_apart == "confounded"


# clear the screen, retitle the terminal, back to the line's start, and a right-to-left override
HOSTILE = "\x1b[2J\x1b]0;TITLE\x07\rtxt\u202eexe"


def test_every_table_shows_hostile_names_and_stored_strings_escaped(monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # wide enough that no name is cut: each escape is seen whole
    layers = (replace(LAYERS[0], name=HOSTILE), LAYERS[1])
    perturb = ({"op": "force_range_out", "layer": HOSTILE, "range": [0.0, 8.0]},)
    changes = (Change(HOSTILE, "bias", HOSTILE, allowed=False), Change(HOSTILE, "out_scale", HOSTILE))
    bad = replace(CONFOUNDED, sweep=HOSTILE, variant=HOSTILE, layers=layers, perturb=perturb, changes=changes)
    depths = [{"depth": d, "rate_fps": {"median": 10.0 * d}, "spread_pct": 1.0} for d in (1, 2)]
    noted = replace(bad, verdict="clean", compiled=CompileFacts(warnings=(HOSTILE,)), flags=("host-busy",))
    deep = replace(bad, id=5, verdict="clean", measure=figures(20.0, by_depth=depths))
    failed = replace(FAILED, variant=HOSTILE, error=HOSTILE)
    sizes = ((1_048_576, 207), (3_686_400, 63), (8_294_400, 29))  # a ladder that plateaus, named from its first
    rungs = [rung(f"{HOSTILE}{i}", size, fps) for i, (size, fps) in enumerate(sizes)]
    texts = [
        sweep_summary([BASE, bad, noted, failed]),
        runs_table([bad, failed]),
        audit_table([bad, failed]),
        ladders([deep, *rungs]),
    ]
    for text in texts:
        assert not [c for c in ("\x1b", "\x07", "\r", "\u202e") if c in text], repr(text)
        assert "\\x1b[2J" in text and "\\u202e" in text, text
    assert "MB/s from \\x1b[2J" in texts[3]


def test_a_multi_line_error_or_warning_is_one_line_of_the_summary():
    failed = replace(FAILED, error="onnxruntime refused the model:\n  Node (conv1)\tbad input")
    noted = replace(BASE, compiled=CompileFacts(warnings=("first\nsecond",)))
    lines = sweep_summary([noted, failed]).splitlines()
    assert "  slow: failed at compile: onnxruntime refused the model: Node (conv1) bad input" in lines
    assert "  base: first second" in lines

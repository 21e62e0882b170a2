"""Run records with known figures, for the report's tests: the seed's ladder, a confounded run, raced candidates."""

from __future__ import annotations

from loop.core.record import Change, Measurement, RunRecord, Scores
from loop.core.vocab import LayerPrint
from loop.measure.results import Result
from loop.store.studies import Ratio, RatioRow


def run(name: str, fps: float, bytes_in: int, bytes_out: int = 0, **kw) -> RunRecord:
    data = {
        "rate_fps": {"median": fps, "ci95": [fps * 0.98, fps * 1.02], "repeats": 5, "frames": 500},
        "bytes_in": bytes_in,
        "bytes_out": bytes_out,
        "depth": 4,
        "ttfo_ms": 12.0,
        "ttfo_parts": {"open_ms": 8.0, "transfer_ms": None, "first_ms": 4.0},
        **kw.pop("measure", {}),
    }
    return RunRecord(
        id=kw.pop("id", 1),
        sweep="s",
        variant=name,
        status="ok",
        verdict=kw.pop("verdict", "n/a"),
        measure=Measurement.from_dict(data),
        **kw,
    )


# the seed's frame ladder: in + out bytes, frames/s
SEED = [
    run("512p", 207.0, 1_050_000, 260_000),
    run("720p", 63.5, 3_690_000, 920_000),
    run("1080p", 29.8, 8_290_000, 2_070_000),
    run("4K", 6.9, 33_180_000, 8_290_000),
]


def confounded() -> RunRecord:
    layers = (LayerPrint("conv1"), LayerPrint("conv2"))
    changes = (
        Change("conv1", "out_scale", "t: scale 0.1 -> 0.2 (2.00x), zero point 0 -> 0"),
        Change("conv2", "kernel", "kernel aaaa -> bbbb", allowed=False),
        Change(
            "conv2",
            "bias",
            "max |Δ| 0.3 at channel 1 = 7.5x the rounding bound 0.04; 3/8 channels beyond it",
            allowed=False,
        ),
    )
    return run("scale", 10.0, 100, verdict="confounded", layers=layers, changes=changes)


def ledger(runs_dir, records) -> None:
    """``records`` written into ``runs_dir/ledger.sqlite`` as a sweep writes them (begin, finish)."""
    from loop.store.ledger import Ledger

    runs_dir.mkdir(parents=True, exist_ok=True)
    with Ledger(runs_dir / "ledger.sqlite") as book:
        for r in records:
            book.finish(book.begin(r.sweep, r.sweep, r.variant, "0" * 64, "onnxruntime", r.generation), r)


def generation(sweep: str, g: int, candidates: int, start_id: int = 1, layers: int = 3) -> list[RunRecord]:
    """Study generation ``g`` as sweep ``sweep``: its ``base`` reference at 100 fps, then
    candidates ``c0``... at 100 + i fps with SNR 20 + i, each with an output scale moved on one layer."""
    from dataclasses import replace

    from loop.core.record import Scores

    names = tuple(LayerPrint(f"conv{k}") for k in range(layers))
    base = run("base", 100.0, 100, id=start_id, verdict="reference", generation=g, layers=names)
    out = [replace(base, sweep=sweep)]
    for i in range(candidates):
        moved = (Change(f"conv{i % layers}", "out_scale", "t: scale 0.1 -> 0.2 (2.00x), zero point 0 -> 0"),)
        r = run(f"c{i}", 100.0 + i, 100, id=start_id + 1 + i, verdict="clean", generation=g, layers=names,
                changes=moved, scores=Scores.from_json({"snr_db": 20.0 + i, "output_mean": 0.5 + i}))  # fmt: skip
        out.append(replace(r, sweep=sweep))
    return out


def raced(index: int, snr: float, ratio: tuple[float, float, float], verdict: str = "clean", **kw) -> Result:
    """A candidate's result whose rate ratio (low, value, high) came from interleaved rounds
    with no A/A floor, so its interval is the one given."""
    record = RunRecord(
        id=kw.pop("id", index),
        sweep="s-g0",
        variant=f"c{index}",
        status="ok",
        verdict=verdict,
        scores=Scores.from_json({"snr_db": snr}),
        **kw,
    )
    low, value, high = ratio
    return Result(index, record, race=RatioRow(record.id, 0, Ratio(value, low, high), 10, None, None, (), None, 3.0))

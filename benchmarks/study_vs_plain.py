"""A study's generation against the plain script it replaces, side by side in one run.

The same 12 candidates as ``study_ratios.py`` (squeezenet1_1 at 64 px, ``scale_weights`` on the
first convolution at 12 factors, ``bias_correction: false``), two ways, alternating, three times:

- **study**: ``loop.Study.evaluate`` in a fresh runs folder (nothing cached): author, quantize,
  fingerprint, audit, controlled inputs, scores, the ledger, then the generation's rounds to
  +-3 % ratio intervals;
- **plain**: what a user writes without ``loop``: scale the weights, ``quantize_static`` (QDQ,
  the same 16 seeded calibration frames), then time each candidate in 0.1 s chunks until its
  rate's 95 % interval is within +-3 % (no reference, no audit, no record).

Prints each pass, then min/median/max of study / plain and candidates per minute.

Run: ``python benchmarks/study_vs_plain.py squeezenet1_1.onnx [--passes 3]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
from study_ratios import LAYER, MEASURE, candidates

from loop.measure.stats import t95
from loop.study import Study

TARGET_PCT, CHUNK_S, CALIBRATION, BUDGET_S = 3.0, 0.1, 16, 120.0  # the study's defaults


class Frames(CalibrationDataReader):
    def __init__(self, name: str, shape: list[int]) -> None:
        rng = np.random.default_rng(0)
        self.frames = iter([{name: rng.random(shape, dtype=np.float32)} for _ in range(CALIBRATION)])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.frames, None)


def scaled(model: onnx.ModelProto, factor: float) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    weight = next(n.input[1] for n in out.graph.node if n.name == LAYER)
    init = next(i for i in out.graph.initializer if i.name == weight)
    init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) * np.float32(factor), weight))
    return out


def half_pct(rates: list[float]) -> float:
    return 100 * t95(len(rates) - 1) * statistics.stdev(rates) / len(rates) ** 0.5 / statistics.fmean(rates)


def timed(path: Path, feed: dict[str, np.ndarray]) -> bool:
    """Chunks of about 0.1 s until the rate's 95 % interval is within the target, or the
    candidate's share of the study's budget is spent (on a busy host an absolute rate may
    never settle); whether it settled."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    for _ in range(10):
        session.run(None, feed)
    rates: list[float] = []
    started = time.perf_counter()
    while len(rates) < 3 or half_pct(rates) > TARGET_PCT:
        if time.perf_counter() - started > BUDGET_S / 12:
            return False
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < CHUNK_S:
            session.run(None, feed)
            n += 1
        rates.append(n / (time.perf_counter() - t0))
    return True


def plain(model_path: Path, tmp: Path) -> tuple[float, int]:
    model = onnx.load(str(model_path))
    name = model.graph.input[0].name
    shape = [d.dim_value or 1 for d in model.graph.input[0].type.tensor_type.shape.dim]
    feed = {name: np.random.default_rng(1).random(shape, dtype=np.float32)}
    t0, settled = time.perf_counter(), 0
    for i, ops in enumerate(candidates()):
        src, dst = tmp / f"c{i}.onnx", tmp / f"c{i}.q.onnx"
        onnx.save(scaled(model, ops[0]["factor"]), str(src))
        quantize_static(
            str(src), str(dst), Frames(name, shape), quant_format=QuantFormat.QDQ,
            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True,
        )  # fmt: skip
        settled += timed(dst, feed)
    return time.perf_counter() - t0, settled


def study(model_path: Path, tmp: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    results = Study(
        "plain",
        base=model_path,
        runs=tmp / "runs",
        compile={"bias_correction": False},
        calibration={"count": CALIBRATION},
        inputs={"count": 4},
        measure=MEASURE,
    ).evaluate(candidates())
    seconds = time.perf_counter() - t0
    within = [r.interval("rate_ratio") for r in results if r.rate_ratio is not None]
    return seconds, sum(1 for lo, hi in within if (hi - lo) / 2 <= TARGET_PCT / 100)


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("model", type=Path)
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    ratios = []
    for p in range(args.passes):
        seconds, settled = {}, {}
        for how in ("study", "plain") if p % 2 == 0 else ("plain", "study"):
            with tempfile.TemporaryDirectory() as tmp:
                seconds[how], settled[how] = (study if how == "study" else plain)(args.model, Path(tmp))
        ratios.append(seconds["study"] / seconds["plain"])
        print(
            f"pass {p}: study {seconds['study']:.1f} s ({60 * 12 / seconds['study']:.1f} candidates/min, "
            f"{settled['study']}/12 within +-{TARGET_PCT:g}%), plain {seconds['plain']:.1f} s "
            f"({60 * 12 / seconds['plain']:.1f}/min, {settled['plain']}/12 within), study/plain {ratios[-1]:.2f}"
        )
    print(f"study/plain: min {min(ratios):.2f} median {statistics.median(ratios):.2f} max {max(ratios):.2f}")


if __name__ == "__main__":
    main()

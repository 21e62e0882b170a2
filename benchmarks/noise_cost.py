"""What ``loop noise`` costs against the compile it analyses (the aim: at most 2x).

For the base of each sweep file given (graphs/variants.yaml's unless others are: a sweep file of
your own names a real model, its input shapes and its calibration and scoring frames), in one run
and in alternating order, each round times:

* compile: ``optimize`` + ``compile`` (what a sweep spends on the variant);
* noise: what ``loop noise`` spends once the variant is authored (``loop.flow.noise.of_authored``:
  ``optimize`` again, ``Compiler.noise`` on the scoring frames, the falls); and the analysis alone
  (``Compiler.noise`` of a quantization already made).

It prints the medians and the two ratios to the compile, and for each model where its signal is
lost (the largest falls of accumulated SNR, loop.judge.falls) and the sweep lines that would put
those regions at 16 bits.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loop.author.author import Authored, author, with_reference
from loop.author.sweepfile import SweepSpec, parse
from loop.compilers.onnxruntime import OnnxRuntimeCompiler
from loop.core.capture import captured_stderr
from loop.flow.noise import of_authored

EXAMPLE = Path(__file__).resolve().parents[1] / "graphs" / "variants.yaml"
TINY = ["--rounds", "1"]


def authored(path: Path, variant: str) -> Authored:
    spec = parse(path)
    return author(spec, next(v for v in with_reference(spec) if v.name == variant), True)


def timed_round(spec: SweepSpec, a: Authored, noise_first: bool) -> dict[str, float]:
    compiler, out = OnnxRuntimeCompiler(), {}
    model, calibration, inputs = a.model_path, a.calibration(), a.inputs()
    quantized_once = compiler.optimize(model, calibration, a.options)

    def compile_side() -> None:
        t0 = time.perf_counter()
        quantized = compiler.optimize(model, calibration, a.options)
        compiler.compile(quantized, a.options)
        out["compile"] = time.perf_counter() - t0

    def noise_side() -> None:
        t0 = time.perf_counter()
        of_authored(spec, a)  # what loop noise does once the sweep file is parsed and the variant authored
        t1 = time.perf_counter()
        compiler.noise(quantized_once, inputs)  # the analysis alone, of the quantization a run made
        out["noise"], out["analysis"] = t1 - t0, time.perf_counter() - t1

    for side in (noise_side, compile_side) if noise_first else (compile_side, noise_side):
        side()
    return out


def measure(path: Path, variant: str, rounds: int) -> dict[str, Any]:
    with captured_stderr():
        a = authored(path, variant)
        times = [timed_round(parse(path), a, i % 2 == 1) for i in range(rounds)]
        report, _ = of_authored(parse(path), a)
    med = {k: statistics.median(t[k] for t in times) for k in times[0]}
    return {
        "sweep": path.name,
        "variant": variant,
        "compile_s": med["compile"],
        "noise_s": med["noise"],
        "analysis_s": med["analysis"],
        "noise_ratio": med["noise"] / med["compile"],
        "analysis_ratio": med["analysis"] / med["compile"],
        "tensors": len(report.layers),
        "falls": [f.line() for f in report.falls],
        "sixteen_bits": report.to_try(),
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("sweeps", nargs="*", type=Path, default=[EXAMPLE], help="sweep files (default: the example)")
    parser.add_argument("--variant", default="base", help="the variant of each analysed")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)  # the quantizer's advice to pre-process, once per optimize
    rows = []
    for path in args.sweeps:
        row = measure(path, args.variant, args.rounds)
        print(
            f"{path.name}: compile {row['compile_s']:.2f} s, loop noise {row['noise_s']:.2f} s "
            f"({row['noise_ratio']:.2f}x), analysis alone {row['analysis_s']:.2f} s "
            f"({row['analysis_ratio']:.2f}x), {row['tensors']} quantized tensors"
        )
        print("\n".join(["  where the signal is lost:", *row["falls"]]) if row["falls"] else "  nothing falls 6 dB")
        print("\n".join(f"    - {line}" for line in row["sixteen_bits"]))
        rows.append(row)
    logging.disable(logging.NOTSET)
    return {"sweeps": rows}

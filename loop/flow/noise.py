"""``loop noise``: one variant of a sweep file quantized again, as the sweep quantizes it, and
analysed layer by layer on the sweep's scoring frames by its compiler (:meth:`Compiler.noise`)."""

from __future__ import annotations

from pathlib import Path

import onnx

from loop.author.author import Authored, author, references, with_reference
from loop.author.frames import count
from loop.author.sweepfile import SweepSpec, VariantSpec
from loop.core.capture import captured_stderr
from loop.core.errors import LoopError
from loop.core.registry import compiler_class
from loop.core.vocab import LayerPrint, Quantized
from loop.judge import fingerprint as fp
from loop.judge.falls import falls, float_inputs, with_falls
from loop.judge.noise import NoiseReport, worst_first
from loop.store.ledger import LEDGER_FILE, Ledger


def of_variant(spec: SweepSpec, chosen: VariantSpec, runs: Path | None = None) -> NoiseReport:
    """Author ``chosen`` of ``spec``, optimize it with the sweep's compile options and calibration
    frames, and measure every quantized tensor on the sweep's ``inputs:``. With ``runs``, a note
    when the run of that variant recorded there was quantized otherwise."""
    if not compiler_class(spec.backend).analyses_noise():
        raise LoopError(
            f"the {spec.backend} compiler has no per-layer noise analysis", file=str(spec.path), field="backend"
        )
    refs = references(spec, with_reference(spec)).values()
    authored = author(spec, chosen, any(chosen is r for r in refs))
    report, quantized = of_authored(spec, authored)
    if runs is not None:  # fingerprinted only to compare with a recorded run
        report.notes = _run_note(runs, spec, chosen.name, compiler_class(spec.backend)().fingerprint(quantized))
    return report


def of_authored(spec: SweepSpec, authored: Authored) -> tuple[NoiseReport, Quantized]:
    """The noise analysis of one authored variant, quantized again as the sweep quantizes it, and
    that quantization."""
    compiler = compiler_class(spec.backend)()
    with captured_stderr():  # the quantizer's advice to pre-process, as a sweep's compile keeps it
        quantized = compiler.optimize(authored.model_path, authored.calibration(), authored.options)
        frames = authored.inputs()
        found = compiler.noise(quantized, frames)
    if found is None:
        raise LoopError(
            f"the {spec.backend} compiler has no per-layer noise analysis", file=str(spec.path), field="backend"
        )
    reads = float_inputs(onnx.load(str(authored.model_path)))  # shape inference once, for both
    found = with_falls(found, reads)
    report = NoiseReport(spec.name, authored.variant.name, spec.backend, count(frames), worst_first(found))
    report.falls = falls(found, reads)
    return report, quantized


def variant_named(spec: SweepSpec, name: str) -> VariantSpec:
    found = {v.name: v for v in with_reference(spec)}
    if name not in found:
        raise LoopError(
            f"no variant named '{name}' (its variants: {', '.join(found)})", file=str(spec.path), field="variants"
        )
    return found[name]


def _run_note(runs: Path, spec: SweepSpec, variant: str, layers: list[LayerPrint]) -> list[str]:
    """One line when the latest finished run of ``variant`` in ``runs`` holds other kernels or biases
    than the quantization analysed here (nothing when there is no such run)."""
    if not (Path(runs) / LEDGER_FILE).exists():
        return []
    with Ledger.of_runs(runs, readonly=True) as book:
        run = book.latest(spec.name, lambda r: r.kernel_sha is not None).get(variant)
    if run is None:
        return []
    pairs = (("kernel", fp.kernel_sha(layers), run.kernel_sha), ("bias", fp.bias_sha(layers), run.bias_sha))
    moved = [f"{what}_sha {str(theirs)[:12]} there, {mine[:12]} here" for what, mine, theirs in pairs if mine != theirs]
    if not moved:
        return []
    return [
        f"note: run {run.id} of {variant} in {runs} was quantized otherwise ({'; '.join(moved)}); "
        "these figures are of the quantization made now"
    ]

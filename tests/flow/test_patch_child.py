"""Scale-only patches compiled in a child kept across them (loop.flow.patch_child): it makes what
a compile in this process makes, holds its base across patches, and a child that dies or hangs
fails that patch alone, the next patch starting another."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from loop.author.graphs import build_recipe
from loop.compilers.base import run_compile
from loop.compilers.onnxruntime import OnnxRuntimeCompiler
from loop.core.vocab import CompileOptions, Quantized, Rescale
from loop.flow.patch_child import PatchProcess
from loop.store.codec import decode

REAL = "loop.compilers.onnxruntime:OnnxRuntimeCompiler"
MISBEHAVING = "compile_fakes:PatchMisbehavingTestDouble"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Quantized:
    from authored import TWO_CONV_RECIPE

    recipe = tmp_path_factory.mktemp("patch") / "tiny.yaml"
    recipe.write_text(TWO_CONV_RECIPE)
    model = build_recipe(recipe).SerializeToString()
    calibration = np.random.default_rng(0).random((8, 3, 8, 8), dtype=np.float32)
    return OnnxRuntimeCompiler().optimize(model, calibration, CompileOptions(bias_correction=False))


def _edit(factor: float, timeout_s: float | None = None) -> CompileOptions:
    factors = tuple(np.linspace(factor, factor * 1.05, 8).tolist())
    return CompileOptions(bias_correction=False, rescales=(Rescale("conv1", "weights", factors),), timeout_s=timeout_s)


def _scales(result, layer: str) -> tuple[float, ...]:
    return next(p.weight_scale for p in result.layers if p.name == layer)


@pytest.fixture
def process():
    made = PatchProcess()
    yield made
    made.stop()


def test_a_patch_is_what_a_compile_here_makes_and_its_entry_is_what_it_was_read_from(base: Quantized, process):
    options = _edit(1.1)
    result, entry = process.call(REAL, "base", base, options, "entry-key")
    here = run_compile(OnnxRuntimeCompiler(), b"", {}, options, base)
    assert result.ok and here.ok
    assert result.artifact is not None and here.artifact is not None and result.artifact.sha == here.artifact.sha
    assert result.layers == here.layers
    assert result.info.quantized_from == "cache" and "rescale_s" in result.stages
    assert entry is not None
    stored, extra = decode(*entry)
    assert stored.layers == result.layers and extra["key"] == "entry-key"


def test_the_child_holds_its_base_across_patches(base: Quantized, process):
    process.call(REAL, "base", base, _edit(1.1), "a")
    pid = process._child.pid  # type: ignore[union-attr]
    second, _ = process.call(REAL, "base", base, _edit(0.9), "b")
    assert second.ok and process._child.pid == pid  # type: ignore[union-attr]
    scales = _scales(second, "conv1")
    first = _scales(process.call(REAL, "base", base, _edit(1.1), "c")[0], "conv1")
    assert np.allclose(np.divide(scales, first), 0.9 / 1.1)  # each patch starts from the base, not the last patch


def test_a_patch_that_kills_its_child_fails_alone_and_the_next_starts_another(base: Quantized, process):
    died, entry = process.call(MISBEHAVING, "base", base, _edit(13.0), "x")
    assert not died.ok and died.stage == "rescale" and entry is None
    assert died.error == "compile process died (exit code 139)"
    after, _ = process.call(MISBEHAVING, "base", base, _edit(1.1), "y")
    assert after.ok  # a new child, sent the base again


def test_a_patch_that_hangs_is_killed_at_its_timeout(base: Quantized, process):
    hung, _ = process.call(MISBEHAVING, "base", base, _edit(7.0, timeout_s=3.0), "x")
    assert not hung.ok and hung.stage == "rescale" and hung.error == "timeout after 3 s"
    assert process.call(MISBEHAVING, "base", base, _edit(1.1), "y")[0].ok


def test_a_patch_child_is_one_process_and_goes_with_its_owner(base: Quantized):
    made = PatchProcess()
    made.call(REAL, "base", base, _edit(1.1), "a")
    pid = made._child.pid  # type: ignore[union-attr]
    made.stop()
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()


def test_a_child_holding_two_bases_drops_the_one_its_parent_drops(base: Quantized, process):
    """Both sides keep the two bases used last, in the same order: the parent never skips sending
    a base the child has dropped (that child would fail a patch it was never sent the base of)."""
    assert all(process.call(REAL, key, base, _edit(1.1), key)[0].ok for key in ("a", "b", "a", "c", "a", "b"))

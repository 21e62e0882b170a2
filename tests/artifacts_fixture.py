"""A compiled ONNX Runtime artifact of the tiny two-conv recipe, for device-level tests."""

from __future__ import annotations

from pathlib import Path

from loop.author.frames import seeded
from loop.author.graphs import build_recipe
from loop.compilers.base import run_compile
from loop.compilers.onnxruntime import OnnxRuntimeCompiler
from loop.core.vocab import Artifact, CompileOptions


def tiny_artifact(recipe: Path, **options: object) -> Artifact:
    result = run_compile(
        OnnxRuntimeCompiler(),
        build_recipe(recipe).SerializeToString(),
        seeded((1, 3, 8, 8), 8, 0),
        CompileOptions(**options),
    )
    assert result.ok and result.artifact is not None, result.error
    return result.artifact

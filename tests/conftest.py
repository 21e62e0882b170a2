"""Shared fixtures: tiny ONNX models authored here, and sweep files written per test."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest
from authored import TWO_CONV_RECIPE, exported_classifier


@pytest.fixture(autouse=True, scope="session")
def _own_host_locks(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Host locks of this test session only: another suite or sweep running on the machine
    must neither wait on these tests nor be waited on (subprocesses inherit it)."""
    os.environ["LOOP_LOCK_DIR"] = str(tmp_path_factory.mktemp("locks"))


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(TWO_CONV_RECIPE)
    return path


@pytest.fixture
def write_sweep(tmp_path: Path, recipe: Path) -> Callable[[str], Path]:
    """Write a sweep file (dedented) beside the tiny recipe and return its path."""

    def write(text: str, name: str = "sweep.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write


@pytest.fixture
def exported_onnx(tmp_path: Path) -> Path:
    path = tmp_path / "exported.onnx"
    onnx.save(exported_classifier(), str(path))
    return path


@pytest.fixture
def artifact(recipe: Path):
    from artifacts_fixture import tiny_artifact

    return tiny_artifact(recipe)

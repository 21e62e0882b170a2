"""Fixtures for compiler tests: a FAKE hailo_sdk_client (see hailo_fakes.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest


def load_hailo_fakes() -> ModuleType:
    """Load hailo_fakes.py by path once (tests/ is not a package)."""
    name = "loop_tests_hailo_fakes"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("hailo_fakes.py"))
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture()
def fake_hailo_sdk_client(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A fresh FakeHailoSdkClient installed as ``hailo_sdk_client`` for one test."""
    fake = load_hailo_fakes().FakeHailoSdkClient()
    for name, module in fake.modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    return fake

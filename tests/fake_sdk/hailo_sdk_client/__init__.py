"""A FAKE ``hailo_sdk_client`` importable by path, for child processes (isolated compiles)
that cannot see a module patched into the test's own ``sys.modules``. It is
tests/compilers/hailo_fakes.py's FakeHailoSdkClient (a test double of Hailo's Dataflow
Compiler, not Hailo's code), with the HEF bytes ``compile()`` returns taken from
``$LOOP_FAKE_HEF`` (or a HEF of ``$LOOP_FAKE_HEF_SIZE`` bytes that is never made) and the
layers whose bias it keeps in float from ``$LOOP_FAKE_FLOAT_BIAS``
(comma-separated DFC layer names); ``$LOOP_FAKE_EDITS_REACH_HEF=1`` turns on the double's switch
``edits_reach_hef`` and ``$LOOP_FAKE_HEF_PARAMS=1`` makes its HEF carry the params it compiled."""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "loop_tests_hailo_fakes_child", Path(__file__).resolve().parents[2] / "compilers" / "hailo_fakes.py")
_fakes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fakes)
_fake = _fakes.FakeHailoSdkClient()
if os.environ.get("LOOP_FAKE_HEF"):
    _fake.hef = os.environ["LOOP_FAKE_HEF"].encode()
if os.environ.get("LOOP_FAKE_HEF_SIZE"):  # a HEF of that many bytes, never made (SizedHef)
    _fake.hef = int(os.environ["LOOP_FAKE_HEF_SIZE"])
_fake.float_bias = {n for n in os.environ.get("LOOP_FAKE_FLOAT_BIAS", "").split(",") if n}
_fake.edits_reach_hef = os.environ.get("LOOP_FAKE_EDITS_REACH_HEF") == "1"
_fake.hef_carries_params = os.environ.get("LOOP_FAKE_HEF_PARAMS") == "1"
sys.modules.update(_fake.modules())

"""The one real HEF the tests read (tests/data/hailo/README.md says where it came from)."""

from __future__ import annotations

import hashlib
from pathlib import Path

REAL_HEF = Path(__file__).resolve().parent / "data" / "hailo" / "arcface_mobilefacenet.hef"
REAL_HEF_SHA256 = "9771881bc4af47f2f32ade8aed6d892ff9fa8dc04bc42d0618884333c48050ce"


def real_hef_sha256() -> str:
    return hashlib.sha256(REAL_HEF.read_bytes()).hexdigest()

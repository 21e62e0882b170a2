"""Compile results as data: a round trip loses nothing, and every part is checked when read."""

from __future__ import annotations

import numpy as np
import pytest

from loop.core.facts import CompileFacts
from loop.core.vocab import Artifact, CompileOptions, CompileResult, LayerPrint, RangeOverride, TensorLayout
from loop.store.codec import Damaged, decode, encode, options_from_json, options_to_json

LAYOUT = TensorLayout("x", (1, 3, 8, 8), "uint8", 0.5, 3)
LAYER = LayerPrint(
    "conv1",
    "Conv",
    "k" * 64,
    None,
    (0.25, 0.5),
    (0, 0),
    "x",
    0.1,
    0,
    "y",
    float("inf"),
    128,
    bias=(1.0, -2.0),
    bias_step=(0.01, 0.02),
)


def _result() -> CompileResult:
    artifact = Artifact("hailo", b"hef bytes", ".hef", (LAYOUT,), (LAYOUT,), extras={"har": b"har bytes"})
    return CompileResult(
        ok=True,
        stages={"optimize_s": 0.5},
        artifact=artifact,
        layers=[LAYER],
        info=CompileFacts(versions={"compiler": "x"}, peak_bytes=np.int64(5), more={"ids": np.arange(3)}),
        compiled_on="tcp://10.0.0.2:4000",
        stderr_tail="note\n",
    )


def test_round_trip_keeps_every_field() -> None:
    result = _result()
    meta, blob = encode(result, {"key": "abc"})
    back, extra = decode(meta, blob)
    assert extra == {"key": "abc"} and back.artifact == result.artifact and back.layers == result.layers
    assert back.info == CompileFacts(versions={"compiler": "x"}, peak_bytes=5, more={"ids": [0, 1, 2]})
    assert (back.ok, back.stages, back.compiled_on, back.stderr_tail) == (
        True,
        {"optimize_s": 0.5},
        result.compiled_on,
        "note\n",
    )


def test_a_failure_has_no_bytes() -> None:
    meta, blob = encode(CompileResult(ok=False, stage="optimize", error="boom"))
    back, _ = decode(meta, blob)
    assert blob == b"" and (back.ok, back.stage, back.error, back.artifact) == (False, "optimize", "boom", None)


@pytest.mark.parametrize(
    "where, why",
    [
        ("meta", "does not match its hash"),
        ("artifact", "artifact bytes"),
        ("har", "extra:har bytes"),
        ("header", "not a loop result"),
    ],
)
def test_every_part_is_checked(where: str, why: str) -> None:
    meta, blob = encode(_result())
    if where == "meta":
        meta = meta.replace(b'"compiled_on": "tcp', b'"compiled_on": "udp')
    elif where == "artifact":
        blob = blob.replace(b"hef bytes", b"HEF bytes")
    elif where == "har":
        blob = blob.replace(b"har bytes", b"HAR bytes")
    else:
        meta = b"\x80\x05pickle" + meta
    with pytest.raises(Damaged, match=why):
        decode(meta, blob)


def test_trailing_bytes_are_refused() -> None:
    meta, blob = encode(_result())
    with pytest.raises(Damaged, match="longer"):
        decode(meta, blob + b"x")


def test_options_round_trip() -> None:
    options = CompileOptions(
        bias_correction=False,
        overrides=(RangeOverride("conv1", "out", "t", 0.0, 8.0),),
        timeout_s=30.0,
        backend_options=(("hw_arch", "hailo8"), ("optimization_level", 2)),
    )
    assert options_from_json(options_to_json(options)) == options


def test_a_stored_artifact_travels_as_its_file_and_hashes_never_into_the_cache(tmp_path) -> None:
    """A worker or patch child that stored the artifact itself sends its path and hashes; a cache
    entry that names a file instead of holding its artifact is damaged, never a hit."""
    from dataclasses import replace

    from loop.store.cache import verified

    result = _result()
    stored = replace(
        result.artifact,
        data=b"",
        path=str(tmp_path / "a.onnx"),
        stored_sha="ab" * 32,
        extras={"har": b""},
        extras_sha={"har": "cd" * 32},
    )
    back = decode(*encode(replace(result, artifact=stored)))[0].artifact
    assert (back.data, back.path, back.stored_sha, back.extras_sha, back.extras) == (
        b"",
        stored.path,
        stored.stored_sha,
        stored.extras_sha,
        {"har": b""},
    )
    with pytest.raises(Damaged, match="names a file"):
        verified("k", *encode(replace(result, artifact=stored), {"key": "k"}))

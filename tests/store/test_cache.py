"""The compile cache: what its key covers, round trips, corruption, listing and pruning."""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from authored import TWO_CONV_RECIPE
from filesystems import fill, small_filesystem
from hostile import Planted

from loop.author.frames import frames_sha as calibration_sha
from loop.author.graphs import build_recipe
from loop.core.hashing import bytes_sha
from loop.core.vocab import CompileOptions, CompileResult, RangeOverride
from loop.flow.compile_pool import compile_job
from loop.store.cache import Cache, key_of
from loop.store.files import StoreWarning

VERSIONS = {"compiler": "onnxruntime", "onnxruntime": "1.0"}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, np.ndarray, CompileResult]:
    path = tmp_path_factory.mktemp("recipe") / "tiny.yaml"
    path.write_text(TWO_CONV_RECIPE)
    model = build_recipe(path).SerializeToString()
    frames = np.random.default_rng(0).random((4, 3, 8, 8), dtype=np.float32)
    return model, frames, compile_job("onnxruntime", model, frames, CompileOptions(threads=1))


def _key(
    model: bytes = b"onnx",
    frames: np.ndarray | None = None,
    options: CompileOptions = CompileOptions(),  # noqa: B008 - frozen
    backend: str = "onnxruntime",
    versions: dict[str, str] = VERSIONS,
) -> str:
    frames = np.zeros((2, 3), np.float32) if frames is None else frames
    return key_of(bytes_sha(model), calibration_sha(frames), options, backend, versions)


def test_key_covers_what_changes_the_output() -> None:
    base = _key()
    changed = [
        _key(model=b"onnx!"),
        _key(frames=np.ones((2, 3), np.float32)),
        _key(frames=np.zeros((3, 2), np.float32)),
        _key(frames=np.zeros((2, 3), np.float64)),
        _key(options=CompileOptions(bias_correction=False)),
        _key(options=CompileOptions(overrides=(RangeOverride("c", "out", "t", 0.0, 6.0),))),
        _key(options=CompileOptions(backend_options=(("opt_level", 2),))),
        _key(backend="hailo"),
        _key(versions={**VERSIONS, "onnxruntime": "1.1"}),
    ]
    assert len({base, *changed}) == len(changed) + 1


def test_key_ignores_speed_only_options() -> None:
    assert _key() == _key(options=CompileOptions(threads=2, timeout_s=30.0))


def test_calibration_sha_covers_dtype_and_shape() -> None:
    frames = np.zeros((2, 4), np.uint8)
    assert (
        len({calibration_sha(frames), calibration_sha(frames.view(np.int8)), calibration_sha(frames.reshape(4, 2))})
        == 3
    )


def test_round_trip_is_a_marked_copy(tmp_path: Path, compiled: tuple) -> None:
    _, _, result = compiled
    cache = Cache.for_runs(tmp_path)
    assert cache.lookup("k") is None
    assert cache.store("k", result)
    hit = cache.lookup("k")
    assert hit is not None and hit is not result and hit.cache_hit and not result.cache_hit
    assert hit.artifact == result.artifact and hit.layers == result.layers
    [entry] = cache.entries()
    assert (entry.key, entry.backend) == ("k", "onnxruntime") and entry.info["artifact_sha"] == result.artifact.sha
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["k.blob", "k.meta.json"]


def test_failures_are_not_stored(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    assert not cache.store("k", CompileResult(ok=False, stage="optimize", error="boom"))
    assert cache.entries() == [] and cache.lookup("k") is None


@pytest.mark.parametrize("part", ["k.meta.json", "k.blob"])
@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage"])
def test_corrupt_entry_is_a_miss_with_a_warning_and_removed(
    tmp_path: Path, compiled: tuple, damage: str, part: str
) -> None:
    cache = Cache(tmp_path)
    cache.store("k", compiled[2])
    path = tmp_path / part
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip":
        data[-10] ^= 0xFF
    else:
        data = bytearray(b"not a cache entry")
    path.write_bytes(bytes(data))
    with pytest.warns(StoreWarning, match="cache entry k: .*a miss"):
        assert cache.lookup("k") is None
    assert list(tmp_path.iterdir()) == [] and cache.entries() == []
    assert cache.store("k", compiled[2]) and cache.lookup("k") is not None  # the next compile rewrites it


def test_a_checksummed_pickle_planted_in_every_cache_file_runs_nothing(tmp_path: Path, compiled: tuple) -> None:
    cache, marker = Cache(tmp_path / "cache"), tmp_path / "ran"
    cache.store("k", compiled[2])
    payload = pickle.dumps(Planted(marker))
    planted = b"loop-cache-1\n" + hashlib.sha256(payload).digest() + payload  # the old format, checksum and all
    for name in ("k.meta.json", "k.blob", "k.pkl", "k.json"):
        (tmp_path / "cache" / name).write_bytes(planted)
    with pytest.warns(StoreWarning):
        assert cache.lookup("k") is None
    assert not marker.exists()
    pickle.loads(payload)  # the payload is live: unpickling it is what would have run it
    assert marker.exists()


def test_an_entry_copied_under_another_key_is_a_miss(tmp_path: Path, compiled: tuple) -> None:
    cache = Cache(tmp_path)
    cache.store("base", compiled[2])
    for suffix in (".meta.json", ".blob"):
        shutil.copy(tmp_path / f"base{suffix}", tmp_path / f"weights{suffix}")
    with pytest.warns(StoreWarning, match="another key"):
        assert cache.lookup("weights") is None
    assert cache.lookup("base") is not None


def test_a_full_disk_leaves_no_entry_and_no_temporary_file(tmp_path: Path, compiled: tuple) -> None:
    root = tmp_path / "cache"
    with small_filesystem(root, 64 * 1024):
        filler = fill(root, leave=1024)
        cache = Cache(root)
        with pytest.warns(StoreWarning, match="not stored.*No space left"):
            assert not cache.store("k", compiled[2])
        assert list(root.iterdir()) == [filler] and cache.lookup("k") is None


def _aged(cache: Cache, result: CompileResult, ages: dict[str, float]) -> None:
    now = time.time()
    for key, age in ages.items():
        cache.store(key, result)
        os.utime(cache.root / f"{key}.meta.json", (now - age, now - age))


def test_prune_by_age(tmp_path: Path, compiled: tuple) -> None:
    cache = Cache(tmp_path)
    _aged(cache, compiled[2], {"old": 7200, "new": 10})
    assert [e.key for e in cache.entries()] == ["old", "new"]
    assert [e.key for e in cache.prune(older_than_s=3600)] == ["old"]
    assert [e.key for e in cache.entries()] == ["new"] and not (tmp_path / "old.meta.json").exists()


def test_prune_by_size_removes_least_recently_used_first(tmp_path: Path, compiled: tuple) -> None:
    cache = Cache(tmp_path)
    _aged(cache, compiled[2], {"a": 300, "b": 200, "c": 100})
    assert cache.lookup("a") is not None  # a use makes "a" the newest
    size = cache.entries()[0].size
    removed = cache.prune(max_bytes=size + size // 2)
    assert [e.key for e in removed] == ["b", "c"] and [e.key for e in cache.entries()] == ["a"]
    assert cache.prune(max_bytes=10 * size) == []


def test_stored_copy_is_not_marked_a_hit(tmp_path: Path, compiled: tuple) -> None:
    cache = Cache(tmp_path)
    cache.store("k", replace(compiled[2], cache_hit=True, compiled_on="tcp://10.0.0.2:4000"))
    hit = cache.lookup("k")
    assert hit is not None and hit.cache_hit and hit.compiled_on == "tcp://10.0.0.2:4000"
    assert cache.entries()[0].info["compiled_on"] == "tcp://10.0.0.2:4000"


def test_ages_and_sizes_for_the_cli() -> None:
    from loop.core.errors import LoopError
    from loop.store.cache import parse_age, parse_size

    assert (parse_age("90"), parse_age("15m"), parse_age("7d")) == (90, 900, 7 * 86400)
    assert (parse_size("1024"), parse_size("500M"), parse_size("2GiB")) == (1024, 500 * 2**20, 2 * 2**30)
    for bad in ("soon", "-1h", "12q"):
        with pytest.raises(LoopError):
            parse_age(bad)

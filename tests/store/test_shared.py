"""ONNX artifacts that share their unchanged weights (loop.store.shared): a candidate that keeps
its base's integers stores its graph; the join is the artifact as compiled, checked by its hash."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from loop.core.errors import LoopError
from loop.core.vocab import Artifact, CompileResult, TensorLayout
from loop.store.artifacts import load_artifact, read_checked
from loop.store.cache import Cache, entry_bytes
from loop.store.codec import Damaged, decode
from loop.store.files import StoreFault, StoreWarning, check_runs
from loop.store.shared import FOLDER, SHARE_FROM, TensorStore, join, names, read_whole, split, store_artifact


def model(scale: float) -> bytes:
    """An int8 kernel of 64 KiB (shared) behind a DequantizeLinear whose scale (inline) differs."""
    kernel = np.random.default_rng(0).integers(-127, 128, (256, 256), dtype=np.int8)
    inits = [
        numpy_helper.from_array(kernel, "w"),
        numpy_helper.from_array(np.array(scale, np.float32), "w_scale"),
    ]
    nodes = [
        helper.make_node("DequantizeLinear", ["w", "w_scale"], ["wf"]),
        helper.make_node("MatMul", ["x", "wf"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 256])],
        inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    layout = m.metadata_props.add()
    layout.key, layout.value = "loop.layout", '{"inputs": [], "outputs": []}'
    return m.SerializeToString()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_two_candidates_that_keep_their_integers_store_them_once(tmp_path: Path) -> None:
    a, b = model(0.01), model(0.02)
    pa, pb = store_artifact(tmp_path, sha(a), ".onnx", a), store_artifact(tmp_path, sha(b), ".onnx", b)
    tensors = list((tmp_path / "artifacts" / FOLDER).iterdir())
    assert len(tensors) == 1 and tensors[0].stat().st_size == 256 * 256 >= SHARE_FROM
    assert pa.stat().st_size < 1024 and pb.stat().st_size < 1024  # each its graph and its scale
    assert read_checked(pa, sha(a)) == a and read_checked(pb, sha(b)) == b
    assert names(pa.read_bytes()) == names(pb.read_bytes()) == [tensors[0].name]
    assert store_artifact(tmp_path, sha(a), ".onnx", a) == pa and len(list(tensors[0].parent.iterdir())) == 1


def test_onnx_runtime_opens_a_split_artifact_where_it_lies(tmp_path: Path) -> None:
    data = model(0.01)
    path = store_artifact(tmp_path, sha(data), ".onnx", data)
    x = np.ones((1, 256), np.float32)
    split_out = ort.InferenceSession(str(path)).run(None, {"x": x})[0]
    whole_out = ort.InferenceSession(data).run(None, {"x": x})[0]
    assert np.array_equal(split_out, whole_out)
    assert load_artifact(path).data == data  # `loop check` on the file joins it


def test_a_damaged_or_swapped_tensor_is_caught_as_a_whole_artifact_would_be(tmp_path: Path) -> None:
    a, b = model(0.01), model(0.02)
    path = store_artifact(tmp_path, sha(a), ".onnx", a)
    (tensor,) = (tmp_path / "artifacts" / FOLDER).iterdir()
    raw = bytearray(tensor.read_bytes())
    raw[100] ^= 1
    tensor.write_bytes(bytes(raw))
    with pytest.raises(StoreFault, match="does not match its hash"):
        read_checked(path, sha(a))
    assert not tensor.exists()  # a stored tensor that is not what its name says is dropped
    assert read_whole(path, sha(a)) is None
    # stored again: the tensor is written anew and the artifact reads back whole
    with pytest.warns(UserWarning, match="did not match its hash"):
        again = store_artifact(tmp_path, sha(a), ".onnx", a)
    assert read_checked(again, sha(a)) == a
    assert read_whole(path, sha(b)) is None  # another artifact's hash never passes


def test_a_location_out_of_the_tensor_folder_is_never_read(tmp_path: Path) -> None:
    graph = onnx.load_from_string(split(model(0.01), TensorStore(tmp_path / "t")) or b"")
    secret = tmp_path / "secret"
    secret.write_bytes(b"x" * 65536)
    for t in graph.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = f"{FOLDER}/../../secret"
    assert names(graph.SerializeToString()) == [] and join(graph.SerializeToString(), TensorStore(tmp_path)) is None


def test_a_model_that_would_not_come_back_exactly_is_stored_whole(tmp_path: Path) -> None:
    small = model(0.01)[:100]  # not an ONNX model at all
    assert split(small + b"\0" * 70000, TensorStore(tmp_path)) is None
    assert not (tmp_path / "t").exists()


def test_a_cache_entry_holds_the_graph_and_is_damaged_without_its_tensors(tmp_path: Path) -> None:
    data = model(0.01)
    layout = (TensorLayout("x", (1, 256), "float32"),)
    result = CompileResult(ok=True, artifact=Artifact("onnxruntime", data, ".onnx", layout, layout))
    cache = Cache.for_runs(tmp_path)
    meta, blob = entry_bytes("k", result, cache.tensors)
    assert len(blob) < 1024
    assert decode(meta, blob, cache.tensors)[0].artifact.data == data
    with pytest.raises(Damaged, match="runs folder"):
        decode(meta, blob)
    for t in cache.tensors.folder.iterdir():
        t.unlink()
    with pytest.raises(Damaged, match="shared tensors"):
        decode(meta, blob, cache.tensors)


def test_a_tensor_that_states_its_location_keeps_the_artifact_whole(tmp_path: Path) -> None:
    """onnx leaves ``data_location: DEFAULT`` on a model it read from external data; a join never
    writes it back, so such a model is stored whole rather than split unreadably."""
    m = onnx.load_from_string(model(0.01))
    m.graph.initializer[0].data_location = TensorProto.DEFAULT
    data = m.SerializeToString()
    assert split(data, TensorStore(tmp_path / "t")) is None
    path = store_artifact(tmp_path, sha(data), ".onnx", data)
    assert path.read_bytes() == data and read_checked(path, sha(data)) == data


def test_pruning_the_cache_frees_the_tensors_nothing_reads_any_more(tmp_path: Path, monkeypatch) -> None:
    from loop.store import shared

    layout = (TensorLayout("x", (1, 256), "float32"),)
    cache = Cache.for_runs(tmp_path)
    kept, pruned = model(0.01), model(0.02)
    other = onnx.load_from_string(pruned)
    other.graph.initializer[0].raw_data = bytes(reversed(other.graph.initializer[0].raw_data))  # its own kernel
    pruned = other.SerializeToString()
    for key, data in (("kept", kept), ("pruned", pruned)):
        cache.store(key, CompileResult(ok=True, artifact=Artifact("onnxruntime", data, ".onnx", layout, layout)))
    assert len(list(cache.tensors.folder.iterdir())) == 2
    monkeypatch.setattr(shared, "SPARED_S", 0.0)
    old = cache.path("pruned", ".meta.json")
    os.utime(old, (old.stat().st_atime - 3600, old.stat().st_mtime - 3600))
    assert [e.key for e in cache.prune(older_than_s=60)] == ["pruned"]
    (left,) = cache.tensors.folder.iterdir()  # the kept entry's kernel; the pruned one's is gone
    assert names(cache.path("kept", ".blob").read_bytes()) == [left.name]
    assert cache.lookup("kept").artifact.data == kept


def test_a_worker_splits_an_artifact_once_for_its_cache_entry_and_its_file(tmp_path: Path, monkeypatch) -> None:
    """keep_here stores one artifact twice (cache entry, file): one split, and the file's store
    still flushes the tensors the cache's wrote without flushing."""
    from loop.store import shared
    from loop.store.artifacts import keep_here

    data = model(0.01)
    layout = (TensorLayout("x", (1, 256), "float32"),)
    result = CompileResult(ok=True, artifact=Artifact("onnxruntime", data, ".onnx", layout, layout))
    splits, synced = [], []
    real_split, real_sync = shared._split, shared.TensorStore.sync
    monkeypatch.setattr(shared, "_split", lambda d, s: splits.append(1) or real_split(d, s))
    monkeypatch.setattr(shared.TensorStore, "sync", lambda self, n: synced.extend(n) or real_sync(self, n))
    runs = tmp_path / "runs"
    assert keep_here(runs, runs / "cache", "k", result)
    assert len(splits) == 1 and len(synced) == 1 and not result.artifact.data
    assert read_checked(Path(result.artifact.path), sha(data)) == data
    assert Cache.for_runs(runs).lookup("k").artifact.data == data
    assert split(data, TensorStore(tmp_path / "t")) is not None and len(splits) == 2  # outside it: split anew


# Not ONNX: stored as they are, under their hash.
DATA = b"artifact bytes"
SHA = hashlib.sha256(DATA).hexdigest()


def test_a_dangling_link_in_artifacts_does_not_take_the_artifact_outside(tmp_path: Path) -> None:
    runs, outside = tmp_path / "runs", tmp_path / "elsewhere" / "a.onnx"
    (runs / "artifacts").mkdir(parents=True)
    (runs / "artifacts" / f"{SHA[:32]}.onnx").symlink_to(outside)
    with pytest.warns(StoreWarning, match="did not match its hash; rewritten"):
        path = store_artifact(runs, SHA, ".onnx", DATA)
    assert path == runs.resolve() / "artifacts" / f"{SHA[:32]}.onnx" and not path.is_symlink()
    assert path.read_bytes() == DATA and not outside.exists()


def test_a_folder_that_is_a_link_is_refused(tmp_path: Path) -> None:
    runs, elsewhere = tmp_path / "runs", tmp_path / "elsewhere"
    runs.mkdir()
    elsewhere.mkdir()
    (runs / "artifacts").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(StoreFault, match="symbolic link"):
        store_artifact(runs, SHA, ".onnx", DATA)
    with pytest.raises(LoopError, match="symbolic link"):
        check_runs(runs)
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("damage", ["flip", "swap"])
def test_a_damaged_artifact_is_rewritten(tmp_path: Path, damage: str) -> None:
    path = store_artifact(tmp_path, SHA, ".onnx", DATA)
    path.write_bytes(b"artifact bytez" if damage == "flip" else b"another variant's artifact")
    with pytest.warns(StoreWarning, match="rewritten"):
        assert store_artifact(tmp_path, SHA, ".onnx", DATA) == path
    assert path.read_bytes() == DATA


def test_bytes_are_stored_only_under_their_own_hash(tmp_path: Path) -> None:
    with pytest.raises(StoreFault, match="do not match their hash"):
        store_artifact(tmp_path, SHA, ".onnx", b"other bytes")
    assert not (tmp_path / "artifacts").exists() or list((tmp_path / "artifacts").iterdir()) == []

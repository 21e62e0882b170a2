"""A base whose weights lie in external data, through every stage of a sweep (issue 49): author,
optimize, rescale, compile, fingerprint, audit, run, the cache and doctor, as the same model
self-contained goes, with each variant writing only the tensors it changes."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from authored import FAST_MEASURE
from onnx import TensorProto, helper, numpy_helper
from sweeps import _sweep_runs

from loop.author import graphs
from loop.core.record import RunRecord
from loop.core.vocab import CompileOptions
from loop.store.doctor import examine
from loop.store.ledger import Ledger

HIDDEN, BLOCKS = 64, 2
KERNEL_BYTES = HIDDEN * 4 * HIDDEN * 4  # one h x 4h float32 kernel


def stack() -> onnx.ModelProto:
    """MatMul h->4h with a bias Add (what bias correction moves), Relu, MatMul 4h->h and a residual
    Add, twice: the big_model benchmark's shape, with an exporter's linear bias."""
    rng = np.random.default_rng(3)
    nodes, inits, x = [], [], "x"
    for b in range(BLOCKS):
        for name, shape in ((f"b{b}.up", (HIDDEN, 4 * HIDDEN)), (f"b{b}.down", (4 * HIDDEN, HIDDEN))):
            w = rng.standard_normal(shape).astype(np.float32) / np.sqrt(shape[0])
            inits.append(numpy_helper.from_array(w.astype(np.float32), name))
        inits.append(numpy_helper.from_array(rng.standard_normal(4 * HIDDEN).astype(np.float32) * 0.1, f"b{b}.bias"))
        nodes += [
            helper.make_node("MatMul", [x, f"b{b}.up"], [f"b{b}.m"], name=f"b{b}/up"),
            helper.make_node("Add", [f"b{b}.m", f"b{b}.bias"], [f"b{b}.u"], name=f"b{b}/bias"),
            helper.make_node("Relu", [f"b{b}.u"], [f"b{b}.r"], name=f"b{b}/relu"),
            helper.make_node("MatMul", [f"b{b}.r", f"b{b}.down"], [f"b{b}.d"], name=f"b{b}/down"),
            helper.make_node("Add", [x, f"b{b}.d"], [f"b{b}.o"], name=f"b{b}/add"),
        ]
        x = f"b{b}.o"
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 8, HIDDEN]) for n in ("x", x)]
    graph = helper.make_graph(nodes, "stack", io[:1], io[1:], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


SWEEP = f"""\
sweep: external
base: BASE
calibration: {{count: 8}}
inputs: {{count: 3}}
{FAST_MEASURE}
variants:
  - name: base
  - {{name: weights, perturb: [{{op: scale_weights, layer: b0/up, factor: 1.05}}]}}
  - {{name: grid, perturb: [{{op: scale_grid, layer: b1/down, of: weights, factor: 1.05}}]}}
  - {{name: four, perturb: [{{op: precision, layer: b0/up, weights: 4}}]}}
  - {{name: forced, perturb: [{{op: force_range_out, layer: b0/up, range: [-1, 1]}}]}}
"""


def _written(folder: Path, external: bool) -> Path:
    folder.mkdir()
    path = folder / "stack.onnx"
    onnx.save(stack(), str(path), save_as_external_data=external, location="stack.data")
    (folder / "sweep.yaml").write_text(SWEEP.replace("BASE", path.name))
    return folder / "sweep.yaml"


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict], dict[str, dict]]:
    folder = tmp_path_factory.mktemp("external")
    external = _sweep_runs(_written(folder / "external", True), folder / "external" / "runs")
    plain = _sweep_runs(_written(folder / "plain", False), folder / "plain" / "runs")
    return folder, external, plain


def test_an_external_data_base_sweeps_as_the_same_model_self_contained(both) -> None:
    _, external, plain = both
    assert {v: r["status"] for v, r in external.items()} == dict.fromkeys(plain, "ok")
    assert {v: r["verdict"] for v, r in external.items()} == {v: r["verdict"] for v, r in plain.items()}
    assert external["grid"]["verdict"] == external["four"]["verdict"] == "clean"
    runs = both[0] / "external" / "runs"
    corrected = _record(runs, external["base"]["id"]).compiled.bias_correction
    assert corrected["guard"] in ("kept", "dropped") and corrected["guard_gain"] is not None  # the float ran
    assert all(
        lp.float_sha for run in external.values() for lp in _record(runs, run["id"]).layers
    )  # read from the files
    for variant, run in external.items():  # the same integers, scales and floats: the same compile
        ours, theirs = run["layers"], plain[variant]["layers"]
        assert [(p["kernel_sha"], p["bias_sha"], p["out_scale"]) for p in ours] == [
            (p["kernel_sha"], p["bias_sha"], p["out_scale"]) for p in theirs
        ], variant
        assert run["scores"]["snr_db"] == pytest.approx(plain[variant]["scores"]["snr_db"], abs=1e-6)


def test_a_variant_writes_only_the_tensors_it_changes(both) -> None:
    _, external, _ = both
    variant = next(graphs.models_folder().glob(f"*/{external['weights']['onnx_sha']}.onnx"))
    folder = variant.parent  # the base's, which holds it and every variant of it
    assert sorted(p.name for p in folder.glob("*.onnx")) == sorted(
        f"{external[v]['onnx_sha']}.onnx" for v in ("base", "weights")
    )
    data = sorted(p.stat().st_size for p in folder.glob("*.data"))
    total = sum(t.ByteSize() for t in stack().graph.initializer)
    # the base's tensors once; the scaled variant's own file holds its one kernel
    assert data[0] == KERNEL_BYTES and data[1] == pytest.approx(total, rel=0.01) and len(data) == 2


def test_a_scale_only_candidate_stores_its_graph_not_the_model(both) -> None:
    """``scale_grid`` keeps its base's integers: its artifact and its cache entry are graphs that
    name the base's stored kernels (loop.store.shared), and read back as the artifact compiled."""
    from loop.store.artifacts import load_artifact
    from loop.store.cache import Cache
    from loop.store.shared import tensors_read

    folder, external, _ = both
    runs = folder / "external" / "runs"
    base, grid = (_record(runs, external[v]["id"]) for v in ("base", "grid"))
    base_file, grid_file = (runs / "artifacts" / Path(r.artifact).name for r in (base, grid))
    kernels = set(tensors_read(base_file))
    assert len(kernels) == 2 * BLOCKS  # every kernel at 8 bits, 16 KiB each
    assert set(tensors_read(grid_file)) == kernels  # the same integers, not copies
    int8_kernel = KERNEL_BYTES // 4
    assert grid_file.stat().st_size < int8_kernel  # its graph and its scales: less than one kernel
    assert load_artifact(grid_file, grid.artifact_sha).sha == grid.artifact_sha
    key = next(e.key for e in Cache.for_runs(runs).entries() if e.info.get("artifact_sha") == grid.artifact_sha)
    assert Cache.for_runs(runs).path(key, ".blob").stat().st_size < int8_kernel


def test_the_cache_and_doctor_cover_an_external_data_model(both) -> None:
    folder, external, _ = both
    runs = folder / "external" / "runs"
    assert [p.line() for p in examine(runs).problems] == []
    # a new process: another models folder, and the one the cached quantized model names is gone
    shutil.rmtree(graphs.models_folder())
    graphs._MODELS.clear()
    graphs._load.cache_clear()
    sweep = folder / "external" / "again.yaml"
    sweep.write_text(
        SWEEP.replace("BASE", "stack.onnx").replace(
            "factor: 1.05}]}\n  - {name: four", "factor: 1.07}]}\n  - {name: four"
        )
    )
    again = _sweep_runs(sweep, runs)
    assert again["base"]["cache_hit"] and not again["grid"]["cache_hit"]
    grid = _record(runs, again["grid"]["id"])
    assert grid.status == "ok" and grid.compiled.quantized_from == "cache"
    first = _record(runs, external["grid"]["id"])
    assert [lp.kernel_int_sha for lp in grid.layers] == [lp.kernel_int_sha for lp in first.layers]
    assert grid.layers[3].weight_scale != first.layers[3].weight_scale  # 1.07, not 1.05
    assert all(lp.float_sha for lp in grid.layers)  # its float source found anew


def _record(runs: Path, run_id: int) -> RunRecord:
    with Ledger(runs / "ledger.sqlite", readonly=True) as ledger:
        return ledger.record(run_id)


def test_dask_compiles_an_external_data_model_from_the_folder_it_shares(both) -> None:
    """A model in external data goes to a Dask worker as its path (the folder shared, as on one
    host or a shared runs folder), never as one pickled bytes; a self-contained one as its bytes."""
    distributed = pytest.importorskip("distributed", reason="dask is an optional extra (loop[dask])")
    from loop.flow.compile_pool import compile_all, compile_job, iter_compiled
    from loop.store.artifacts import materialize

    model = both[0] / "external" / "stack.onnx"
    frames = np.random.default_rng(0).standard_normal((8, 8, HIDDEN)).astype(np.float32)
    item = (model, frames, CompileOptions(bias_correction=False))
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None, worker_dashboard_address=None
    ) as cluster:
        (remote,) = compile_all("onnxruntime", [item], jobs=1, cache=None, cluster=cluster.scheduler_address)
        runs = both[0] / "runs"
        runs.mkdir()
        batches = iter_compiled("onnxruntime", [item], jobs=1, cache=None, cluster=cluster.scheduler_address, runs=runs)
        [(_, stored)] = [pair for batch in batches for pair in batch]
    assert remote.ok, remote.error
    assert remote.compiled_on != "local"
    assert [lp.kernel_sha for lp in remote.layers] == [lp.kernel_sha for lp in compile_job("onnxruntime", *item).layers]
    # a worker on this host that sees the runs folder stores the artifact there, as a local one does
    assert stored.ok and stored.compiled_on != "local" and stored.artifact is not None
    assert not stored.artifact.data and Path(stored.artifact.path).parent == runs / "artifacts"
    assert materialize(stored.artifact).data == remote.artifact.data


def test_a_cluster_that_does_not_see_the_runs_folder_sends_artifacts_back(tmp_path: Path) -> None:
    """Only workers that see the very folder store through it: another folder, or none, is not it."""
    distributed = pytest.importorskip("distributed", reason="dask is an optional extra (loop[dask])")
    from loop.flow.compile_pool import _sees_runs

    cluster = distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None)
    with cluster, distributed.Client(cluster) as client:
        assert _sees_runs(client, tmp_path)
        assert not _sees_runs(client, tmp_path / "not-made")


def test_a_large_models_float_reference_runs_apart_with_the_same_outputs(tmp_path: Path, monkeypatch) -> None:
    """Past ``APART_FROM`` the float reference runs in a child, so the sweep's process never holds the
    float weights; its outputs are the ones a run here makes (the limit lowered to see it)."""
    from loop.flow import evaluate

    path = tmp_path / "stack.onnx"
    onnx.save(stack(), str(path), save_as_external_data=True, location="stack.data")
    inputs = np.random.default_rng(1).standard_normal((3, 8, HIDDEN)).astype(np.float32)
    here = evaluate._float_outputs(path, inputs)
    apart, ran = evaluate._float_apart, []
    monkeypatch.setattr(evaluate, "APART_FROM", 0)
    monkeypatch.setattr(evaluate, "_float_apart", lambda m, i: ran.append(1) or apart(m, i))
    there = evaluate._float_outputs(path, inputs)
    assert ran and there.names == here.names
    assert all(
        np.array_equal(a, b) for x, y in zip(there.raw, here.raw, strict=True) for a, b in zip(x, y, strict=True)
    )

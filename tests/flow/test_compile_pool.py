"""compile_all: cached, deduplicated, parallel, isolated compiles; real ORT, loky and Dask."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from authored import TWO_CONV_RECIPE

from loop.author.graphs import build_recipe
from loop.core.errors import LoopError
from loop.core.registry import COMPILERS
from loop.core.vocab import CompileOptions
from loop.flow.compile_pool import Job, compile_all, compile_job, iter_compiled
from loop.judge import fingerprint as fp
from loop.store.cache import Cache

FAKES = "compile_fakes:MisbehavingCompiler"


@pytest.fixture
def misbehaving(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setitem(COMPILERS, "misbehaving", FAKES)
    return "misbehaving"


def _model(tmp_path: Path, seed: int) -> bytes:
    path = tmp_path / f"tiny{seed}.yaml"
    path.write_text(TWO_CONV_RECIPE.replace("seed: 0", f"seed: {seed}"))
    return build_recipe(path).SerializeToString()


def _calibration(count: int = 4) -> np.ndarray:
    return np.random.default_rng(0).random((count, 3, 8, 8), dtype=np.float32)


def _options(**backend: object) -> CompileOptions:
    return CompileOptions(threads=1, timeout_s=60, backend_options=tuple(sorted(backend.items())))


def _group_alive(pgid: int) -> bool:
    """Whether any process of the group is still running (zombies awaiting a reaper count as gone)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def test_in_order_once_per_key_and_rerun_compiles_nothing(tmp_path: Path, misbehaving: str) -> None:
    log = tmp_path / "compiles.log"
    models = [_model(tmp_path, seed) for seed in (1, 2, 3)]
    items = [(m, _calibration(), _options(log=str(log))) for m in models]
    items.append(items[0])  # a repeat within one call compiles once
    cache, ticks = Cache(tmp_path / "cache"), list[int]()
    first = compile_all(misbehaving, items, jobs=2, cache=cache, progress=ticks.append)
    assert [r.ok for r in first] == [True] * 4
    assert [r.cache_hit for r in first] == [False, False, False, True]
    assert len(log.read_text().split()) == 3 and sum(ticks) == 4
    expected = [compile_job("onnxruntime", m, c, o) for m, c, o in items]
    assert [fp.kernel_sha(r.layers) for r in first] == [fp.kernel_sha(e.layers) for e in expected]
    assert len({fp.kernel_sha(r.layers) for r in first}) == 3
    assert all(r.compiled_on == "local" and r.info.versions["compiler"] == "misbehaving" for r in first)

    again = compile_all(misbehaving, items, jobs=2, cache=cache)
    assert all(r.cache_hit for r in again) and len(log.read_text().split()) == 3
    assert [r.artifact and r.artifact.sha for r in again] == [r.artifact and r.artifact.sha for r in first]


def test_timeout_kills_the_whole_group_and_others_finish(tmp_path: Path, misbehaving: str) -> None:
    pidfile = tmp_path / "hang.pid"
    hang = CompileOptions(threads=1, timeout_s=5, backend_options=(("misbehave", "hang"), ("pidfile", str(pidfile))))
    items = [
        (_model(tmp_path, 1), _calibration(), _options()),
        (_model(tmp_path, 2), _calibration(), hang),
        (_model(tmp_path, 3), _calibration(), _options()),
    ]
    results = compile_all(misbehaving, items, jobs=2, cache=Cache(tmp_path / "cache"))
    assert [r.ok for r in results] == [True, False, True]
    timed_out = results[1]
    assert (timed_out.stage, timed_out.error) == ("optimize", "timeout after 5 s")
    assert "most recent call first" in timed_out.stderr_tail  # its stacks, dumped before the kill
    pgid, child, _helper = map(int, pidfile.read_text().split())
    assert pgid == child and not _group_alive(pgid)
    assert len(Cache(tmp_path / "cache").entries()) == 2  # failures are not cached


@pytest.mark.parametrize(
    "how, error",
    [("segv", "compile process died (signal 11, SIGSEGV)"), ("exit", "compile process died (exit code 139)")],
)
def test_crash_is_a_value(tmp_path: Path, misbehaving: str, how: str, error: str) -> None:
    items = [
        (_model(tmp_path, 1), _calibration(), _options(misbehave=how)),
        (_model(tmp_path, 2), _calibration(), _options()),
    ]
    crashed, fine = compile_all(misbehaving, items, jobs=2, cache=None)
    assert (crashed.ok, crashed.stage, crashed.error) == (False, "optimize", error)
    assert fine.ok and fine.artifact is not None
    if how == "segv":
        assert "Segmentation fault" in crashed.stderr_tail and "optimize" in crashed.stderr_tail


def test_unknown_backend_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(LoopError, match="unknown backend"):
        compile_all("nope", [], jobs=1, cache=None)


def test_missing_dask_says_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)
    item = (_model(tmp_path, 1), _calibration(), _options())
    with pytest.raises(LoopError, match=r"install loop\[dask\]"):
        compile_all("onnxruntime", [item], jobs=1, cache=None, cluster="tcp://127.0.0.1:1")


def test_dask_cluster_compiles_and_reports_the_worker(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed", reason="dask is an optional extra (loop[dask])")
    items = [(_model(tmp_path, seed), _calibration(), _options()) for seed in (1, 2, 3)]
    cache = Cache(tmp_path / "cache")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, worker_dashboard_address=None
    ) as cluster:
        workers = set(cluster.scheduler_info["workers"])
        results = compile_all("onnxruntime", items, jobs=2, cache=cache, cluster=cluster.scheduler_address)
        again = compile_all("onnxruntime", items, jobs=2, cache=cache, cluster=cluster.scheduler_address)
    assert all(r.ok and r.compiled_on in workers for r in results)
    assert [fp.kernel_sha(r.layers) for r in results] == [
        fp.kernel_sha(compile_job("onnxruntime", *item).layers) for item in items
    ]
    assert all(r.cache_hit for r in again) and len(cache.entries()) == 3


@contextlib.contextmanager
def _pool(kind: str) -> Iterator[str | None]:
    """No cluster (loky workers here), or a one-worker, one-thread Dask LocalCluster."""
    if kind == "loky":
        yield None
        return
    distributed = pytest.importorskip("distributed", reason="dask is an optional extra (loop[dask])")
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None, worker_dashboard_address=None
    ) as cluster:
        yield cluster.scheduler_address


@pytest.mark.parametrize("kind", ["loky", "dask"])
def test_one_window_serves_both_pools(tmp_path: Path, kind: str) -> None:
    """One worker: two compiles in flight, so only two jobs have loaded their bytes when the
    first result comes back; every job loads once, and all come back."""
    loaded: list[int] = []

    def job(seed: int) -> Job:
        model = _model(tmp_path, seed)

        def load() -> tuple[bytes, np.ndarray]:
            loaded.append(seed)
            return model, _calibration()

        return Job(f"model{seed}", "calib", _options(), load)

    with _pool(kind) as cluster:
        batches = iter_compiled("onnxruntime", [job(s) for s in range(5)], jobs=1, cache=None, cluster=cluster)
        first = next(batches)
        assert len(loaded) == 2 and len(first) == 1
        settled = first + [pair for batch in batches for pair in batch]
    assert sorted(loaded) == list(range(5)) and sorted(i for i, _ in settled) == list(range(5))
    assert all(r.ok for _, r in settled)


OOM_CHILD = """
import json, sys
sys.path[:0] = sys.argv[2:4]
from test_compile_pool import _calibration, _model, _options, FAKES
from pathlib import Path
from loop.core.registry import COMPILERS
from loop.flow.compile_pool import compile_all
COMPILERS["misbehaving"] = FAKES
tmp = Path(sys.argv[1])
items = [(_model(tmp, 1), _calibration(), _options(misbehave="hog")), (_model(tmp, 2), _calibration(), _options())]
print(json.dumps([[r.ok, r.stage, r.error] for r in compile_all("misbehaving", items, jobs=1, cache=None)]))
"""


def _memory_cgroup(tmp_path: Path, limit: int) -> Path:
    """A memory cgroup of its own under this process's, holding at most ``limit`` bytes
    (v1 or v2); a skip where this process may not make one (not root, a read-only cgroup fs)."""
    from loop.core import memory

    parent = memory._cgroup_folder()
    if parent is None:
        pytest.skip("no memory cgroup here")
    group = parent / f"loop-test-{tmp_path.name}"
    try:
        group.mkdir()
        limit_file = group / ("memory.max" if (group / "memory.max").exists() else "memory.limit_in_bytes")
        limit_file.write_text(str(limit))
    except OSError as exc:
        pytest.skip(f"cannot make a memory cgroup here: {exc}")
    return group


def test_a_compile_killed_for_memory_says_out_of_memory(tmp_path: Path) -> None:
    """The kernel's own out-of-memory killer, in a cgroup of 1.5 GB, on a compile that wants 4:
    that compile fails saying so, at its stage, and the next compile runs."""
    import json
    import subprocess

    group = _memory_cgroup(tmp_path, 1_500_000_000)
    here = str(Path(__file__).parent)
    enter = f'echo $$ > {group / "cgroup.procs"} && exec "$@"'
    try:
        done = subprocess.run(
            ["sh", "-c", enter, "sh", sys.executable, "-c", OOM_CHILD, str(tmp_path), here, str(Path(here).parent)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        with contextlib.suppress(OSError):
            group.rmdir()
    assert done.returncode == 0, done.stderr[-2000:]
    hog, fine = json.loads(done.stdout.strip().splitlines()[-1])
    assert hog[:2] == [False, "optimize"] and hog[2].startswith("out of memory"), hog
    assert fine[0] is True


def test_a_local_worker_stores_the_artifact_and_its_cache_entry_itself(tmp_path: Path) -> None:
    """With a runs folder, what a compile made never comes back whole: the worker stores the artifact
    under runs/artifacts and writes the cache entry, and the result names the file."""
    from loop.store.artifacts import materialize

    items = [(_model(tmp_path, seed), _calibration(), _options()) for seed in (1, 2)]
    cache, runs = Cache(tmp_path / "runs" / "cache"), tmp_path / "runs"
    results = [r for batch in iter_compiled("onnxruntime", items, jobs=1, cache=cache, runs=runs) for _, r in batch]
    assert all(r.ok and r.artifact is not None and not r.artifact.data for r in results)
    assert all(Path(r.artifact.path).parent == runs / "artifacts" for r in results)  # type: ignore[union-attr,arg-type]
    assert len(cache.entries()) == 2 and all(r.quantized is None for r in results)
    again = compile_all("onnxruntime", items, jobs=1, cache=cache)
    assert all(r.cache_hit for r in again)
    assert [materialize(r.artifact).data for r in results] == [r.artifact.data for r in again]  # type: ignore[union-attr,arg-type]


def test_a_scale_grid_base_stays_in_the_cache_and_its_patches_read_it_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a runs folder and a cache, the worker that optimizes a scale_grid base leaves the
    quantized model in the cache and the patch child reads it there: this process never encodes
    it (it would hold the model twice while sending it). Without a cache it is carried, as before."""
    from loop.core.vocab import Rescale
    from loop.store import codec

    model = tmp_path / "tiny.onnx"  # a file, as a sweep hands its models: the base names it as its source
    model.write_bytes(_model(tmp_path, 1))
    grid = _options().model_copy(update={"rescales": (Rescale("conv1", "weights", (1.05,)),)})
    items = [(model, _calibration(), _options()), (model, _calibration(), grid)]
    sent: list[int] = []
    real = codec.encode_quantized  # what the parent's side of a patch child (or a compile child) encodes with
    monkeypatch.setattr(codec, "encode_quantized", lambda q, *a: sent.append(1) or real(q, *a))
    cache, runs = Cache(tmp_path / "runs" / "cache"), tmp_path / "runs"
    batches = iter_compiled("onnxruntime", items, jobs=1, cache=cache, runs=runs)
    base, patched = (r for batch in batches for _, r in batch)
    assert base.ok and patched.ok, (base.error, patched.error)
    assert sent == [] and patched.info.quantized_from == "cache"
    [stashed] = [e.key for e in cache.entries() if e.info.get("kind") == "quantized"]
    assert cache.lookup_quantized(stashed).prints == tuple(base.layers)  # its patches start from them
    moved = [np.array(b.weight_scale) * (1.05 if b.name == "conv1" else 1) for b in base.layers]
    assert all(np.allclose(m, p.weight_scale, rtol=1e-6) for m, p in zip(moved, patched.layers, strict=True))
    # the next batch (a search's next generation) finds the base in the cache and never reads it here
    read: list[str] = []
    monkeypatch.setattr(Cache, "lookup_quantized", lambda self, key: read.append(key))
    again = grid.model_copy(update={"rescales": (Rescale("conv1", "weights", (1.07,)),)})
    batches = iter_compiled("onnxruntime", [(model, _calibration(), again)], jobs=1, cache=cache, runs=runs)
    [(_, later)] = [pair for batch in batches for pair in batch]
    assert later.ok and later.info.quantized_from == "cache" and read == [] and sent == []
    other = [(_model(tmp_path, 2), _calibration(), o) for o in (_options(), grid)]
    alone = compile_all("onnxruntime", other, jobs=1, cache=None)  # no cache: carried, and sent
    assert alone[1].ok and sent

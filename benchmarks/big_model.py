"""Models the seed is about: transformer-like stacks with float32 weights in external data.

Each block is MatMul h->4h, Relu, MatMul 4h->h and a residual Add, on tokens [1, T, h]; the
weights lie in one external-data file beside the model, as exporters write models past 2 GiB.
``write_stack`` makes one of about the bytes asked; ``main`` sweeps it (base, ``scale_weights``,
two ``scale_grid`` candidates, ``weights: 4``) beside plain ``quantize_static`` and one session,
and reports each process's peak, the process tree's summed PSS peak, what each variant wrote
(its model files and its artifact) and each stage's time. The models are written under ``--work``
(a temporary folder unless given: at 4.3 GB, put it where the disk has room).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TOKENS = 16
TINY = ["--gb", "0.002", "--jobs", "1"]


def shape_for(weight_bytes: float, hidden: int = 0) -> tuple[int, int]:
    """(hidden, blocks) for about ``weight_bytes`` of float32: 8 h^2 weights a block, h a multiple of 64."""
    if not hidden:
        hidden = max(64, int((weight_bytes / 4 / 8 / 8) ** 0.5) // 64 * 64)  # about eight blocks
    return hidden, max(1, round(weight_bytes / (32 * hidden * hidden)))


def write_stack(path: Path, weight_bytes: float, seed: int = 0, hidden: int = 0) -> dict[str, int]:
    """A stack of about ``weight_bytes`` at ``path``, its weights in ``path.stem + '.data'``,
    written a block at a time so the writer never holds the whole model."""
    h, blocks = shape_for(weight_bytes, hidden)
    rng = np.random.default_rng(seed)
    data = path.with_suffix(".data")
    nodes, inits, x = [], [], "x"
    with open(data, "wb") as out:
        for b in range(blocks):
            for name, shape in ((f"b{b}.up", (h, 4 * h)), (f"b{b}.down", (4 * h, h))):
                w = (rng.standard_normal(shape, dtype=np.float32) * (1 / np.sqrt(shape[0]))).astype(np.float32)
                t = numpy_helper.from_array(np.zeros((1,), np.float32), name)
                t.ClearField("raw_data")
                del t.dims[:]
                t.dims.extend(shape)
                offset = out.tell()
                out.write(w.tobytes())
                for key, value in (("location", data.name), ("offset", str(offset)), ("length", str(w.nbytes))):
                    t.external_data.add(key=key, value=value)
                t.data_location = TensorProto.EXTERNAL
                inits.append(t)
            nodes += [
                helper.make_node("MatMul", [x, f"b{b}.up"], [f"b{b}.u"], name=f"b{b}/up"),
                helper.make_node("Relu", [f"b{b}.u"], [f"b{b}.r"], name=f"b{b}/relu"),
                helper.make_node("MatMul", [f"b{b}.r", f"b{b}.down"], [f"b{b}.d"], name=f"b{b}/down"),
                helper.make_node("Add", [x, f"b{b}.d"], [f"b{b}.y"], name=f"b{b}/residual"),
            ]
            x = f"b{b}.y"
    graph = helper.make_graph(
        nodes,
        "stack",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, TOKENS, h])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, TOKENS, h])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return {"hidden": h, "blocks": blocks, "weight_bytes": data.stat().st_size}


PEER = """
import resource, sys, time, numpy as np, onnxruntime as ort
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static
src, dst, h, tokens = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
frames = np.random.default_rng(1).standard_normal((8, 1, tokens, h)).astype(np.float32)
class R(CalibrationDataReader):
    def __init__(self): self.left = [{"x": f} for f in frames]
    def get_next(self): return self.left.pop() if self.left else None
t0 = time.perf_counter()
quantize_static(src, dst, R(), quant_format=QuantFormat.QDQ, per_channel=True, use_external_data_format=True)
t1 = time.perf_counter()
ort.InferenceSession(dst, providers=["CPUExecutionProvider"]).run(None, {"x": frames[0]})
t2 = time.perf_counter()
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, t1 - t0, t2 - t1)
"""


def peer(model: Path, out: Path, hidden: int) -> dict[str, float]:
    """Plain ``quantize_static`` (QDQ, per channel, external data) and one session, in a child."""
    done, tree = sampled([sys.executable, "-c", PEER, str(model), str(out / "peer.onnx"), str(hidden), str(TOKENS)])
    done.check_returncode()
    peak, quantize_s, session_s = (float(v) for v in done.stdout.split())
    return {"peak_bytes": peak, "tree_pss_bytes": tree, "quantize_s": quantize_s, "session_s": session_s}


def sweep_text(model: Path) -> str:
    return (
        f"sweep: big\nbase: {model}\ncalibration: {{count: 8}}\ninputs: {{count: 2}}\n"
        "measure: {warmup: 1, frames: 4, repeats: 1, ttfo_repeats: 1, latency_frames: 2, min_duration_s: 0}\n"
        "variants:\n  - name: base\n"
        "  - {name: weights, perturb: [{op: scale_weights, layer: b0/up, factor: 1.05}]}\n"
        "  - {name: grid, perturb: [{op: scale_grid, layer: b0/up, of: weights, factor: 1.05}]}\n"
        "  - {name: grid2, perturb: [{op: scale_grid, layer: b1/down, of: weights, factor: 1.05}]}\n"
        "  - {name: four, perturb: [{op: precision, layer: b0/up, weights: 4}]}\n"
    )


SWEEP = """
import json, resource, sys
from pathlib import Path
from loop.author.sweepfile import parse
from loop.flow.sweep import SweepOptions, run_sweep
from loop.store.ledger import Ledger
from loop.author.graphs import models_folder
jobs = int(sys.argv[3]) or None
result = run_sweep(parse(Path(sys.argv[1])), Path(sys.argv[2]), SweepOptions(jobs=jobs, progress=False))
with Ledger.of_runs(Path(sys.argv[2]), existing=True) as book:
    runs = book.records()
artifact = lambda r: (Path(sys.argv[2]) / r.artifact).stat().st_size if r.artifact else 0
models = {f.name: f.stat().st_size for f in models_folder().rglob("*") if f.is_file()}
size = lambda d: sum(f.stat().st_size for f in (Path(sys.argv[2]) / d).glob("*") if f.is_file())
print(json.dumps({"parent_peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    "models_written": models, "shared_tensors_bytes": size("artifacts/tensors"), "cache_bytes": size("cache"),
    "runs": {r.variant: {"status": r.status.value, "verdict": r.verdict.value if r.verdict else None,
    "stages": r.stages, "compile_peak_bytes": r.compiled.peak_bytes, "onnx_sha": r.onnx_sha,
    "artifact_bytes": artifact(r)} for r in runs}}))
"""


def tree_pss(root: int) -> int:
    """The summed proportional set size of ``root`` and every process under it (Linux, /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree, grew = tree | more, bool(more)
    total = 0
    for pid in tree:
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        total += next((int(line.split()[1]) * 1024 for line in rollup.splitlines() if line.startswith("Pss:")), 0)
    return total


def sampled(command: list[str]) -> tuple[subprocess.CompletedProcess[str], int]:
    """``command`` run to its end, its process tree's summed PSS sampled every 0.25 s: the result
    and the largest sum seen."""
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak, done = 0, threading.Event()

    def watch() -> None:
        nonlocal peak
        while not done.wait(0.25):
            peak = max(peak, tree_pss(child.pid))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    out, err = child.communicate()
    done.set()
    watcher.join()
    return subprocess.CompletedProcess(command, child.returncode, out, err), peak


def loop_sweep(model: Path, out: Path, jobs: int | None) -> dict[str, object]:
    """The four variants swept in a child (``run_sweep``): its own peak, each run's stages,
    verdict and compile peak, and the largest peak among its descendants."""
    sweep = out / "sweep.yaml"
    sweep.write_text(sweep_text(model))
    t0 = time.perf_counter()
    done, tree = sampled([sys.executable, "-c", SWEEP, str(sweep), str(out / "runs"), str(jobs or 0)])
    found = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else {"stderr": done.stderr[-800:]}
    found["seconds"] = time.perf_counter() - t0
    found["tree_pss_bytes"] = tree
    found["largest_descendant_bytes"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return found


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--gb", type=float, nargs="+", default=[0.13])
    parser.add_argument("--work", type=Path, help="where the models and runs are written (default: a temporary folder)")
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--no-sweep", action="store_true", help="the peer alone")
    args = parser.parse_args(argv)
    report = []
    with tempfile.TemporaryDirectory(prefix="big-model-", dir=args.work) as work:
        for gb in args.gb:
            folder = Path(work) / f"{gb:g}gb"
            folder.mkdir(parents=True)
            made = write_stack(folder / "big.onnx", gb * 1e9)
            row: dict[str, object] = {"gb": gb, **made, "peer": peer(folder / "big.onnx", folder, made["hidden"])}
            if not args.no_sweep:
                row["loop"] = loop_sweep(folder / "big.onnx", folder, args.jobs)
            report.append(row)
            print(json.dumps(row), flush=True)
    return {"sizes": report}

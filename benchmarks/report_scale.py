"""Time and peak memory of ``loop report`` over a large ledger, and beside it the code of a revision.

Builds a ledger of a study's generations with the store API (``--generations`` sweeps
``scale-gN``, each a ``base`` reference and candidates whose audits changed a few of
``--layers`` layers; a tenth confounded, a twentieth measured on a busy host), optionally one
failed run holding an ``--error-mb`` MB error text, then writes the report from it in a child
process, once with this tree's ``loop`` and once with the ``loop`` of ``--old`` (a git
revision, exported to a temporary folder), and prints each one's wall time, peak RSS (from
``resource.getrusage(RUSAGE_CHILDREN)`` in a process of its own per measurement, with the CPU
time, which a shared machine disturbs less than the wall time) and page size. ``--old`` is
optional: the figures of this tree's report stand alone.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from loop.core.record import Change, Measurement, RunRecord, Scores
from loop.core.vocab import LayerPrint
from loop.store.ledger import Ledger

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--runs", "40", "--generations", "2", "--error-mb", "1"]
# a process of its own per measurement, so one report's peak is not another's
MEASURE = """
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
wall = time.perf_counter() - t0
used = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps([wall, used.ru_utime + used.ru_stime, used.ru_maxrss, done.returncode, done.stderr]))
"""
REPORT = "import sys; from pathlib import Path; import loop.report.page as p; " \
    "p.write_report(Path(sys.argv[1]), None, Path(sys.argv[2])); print(p.__file__, file=sys.stderr)"  # fmt: skip


def candidate(sweep: str, generation: int, i: int, layers: int) -> RunRecord:
    """Candidate ``i``: a scale moved on one layer (inside), a tenth with a kernel moved outside."""
    names = [f"/backbone/stage{k}/conv" for k in range(layers)]
    hit = names[i % layers]
    changes = [
        Change(hit, "out_scale", f"t: scale 0.1 -> 0.{2 + i % 7} ({2 + i % 7}.00x), zero point 0 -> 0"),
        Change(names[(i + 1) % layers], "bias-rounding", "max |Δ| 0.01 = 0.4x the rounding bound 0.02"),
    ]
    confounded = i % 10 == 3
    if confounded:
        changes.append(Change(names[(i + 2) % layers], "kernel", "kernel aaaa -> bbbb", allowed=False))
    fps = 400.0 * (1 + ((i * 37) % 21 - 10) / 100)
    return RunRecord(
        id=0,
        sweep=sweep,
        variant=f"c{i}",
        status="ok",
        generation=generation,
        verdict="confounded" if confounded else "clean",
        layers=tuple(LayerPrint(n, "Conv") for n in names),
        changes=tuple(changes),
        flags=("host-busy",) if i % 20 == 7 else (),
        measure=Measurement.from_dict(
            {
                "rate_fps": {"median": fps, "ci95": [fps * 0.98, fps * 1.02], "repeats": 5, "frames": 500},
                "bytes_in": 150_528,
                "bytes_out": 4_000,
                "ttfo_ms": 30.0,
                "ttfo_parts": {"open_ms": 20.0, "transfer_ms": 2.0, "first_ms": 8.0},
            }
        ),
        scores=Scores.from_json({"snr_db": 20.0 + (i * 13) % 17, "output_mean": 0.5}),
    )


def build(runs: Path, total: int, generations: int, layers: int, error_mb: int) -> None:
    per = max(total // generations, 2)
    with Ledger.of_runs(runs) as book:
        for g in range(generations):
            sweep = f"scale-g{g}"
            base = candidate(sweep, g, 0, layers)
            rows = [replace(base, variant="base", verdict="reference", changes=())]
            rows += [candidate(sweep, g, i, layers) for i in range(1, per)]
            for r in rows:
                run_id = book.begin(r.sweep, sweep, r.variant, "0" * 64, "onnxruntime", g)
                book.finish(run_id, r)
        if error_mb:
            run_id = book.begin("scale-g0", "scale-g0", "huge-error", "0" * 64, "onnxruntime", 0)
            huge = "E" * (error_mb * 2**20)
            book.finish(run_id, RunRecord(0, "scale-g0", "huge-error", "failed", error=huge, stage="compile"))


def old_tree(rev: str, into: Path) -> Path:
    """The ``loop`` package as it was at ``rev``, exported (not checked out: the tree is shared)."""
    archive = into / "old.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), rev, "loop"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "old", filter="data")
    return into / "old"


def measure(code_root: Path, runs: Path, out: Path) -> dict[str, object]:
    env_path = f"PYTHONPATH={code_root}"
    report = [sys.executable, "-c", REPORT, str(runs), str(out)]
    probe = [sys.executable, "-c", MEASURE, "env", env_path, *report]
    # run from the code's own folder: ``python -c`` puts the working folder first on the path
    done = subprocess.run(probe, capture_output=True, text=True, check=True, cwd=code_root)
    wall, cpu, rss_kb, rc, err = json.loads(done.stdout)
    lines = err.strip().splitlines() or [""]
    size = out.stat().st_size if out.exists() else 0
    return {
        "wall_s": round(float(wall), 1),
        "cpu_s": round(float(cpu), 1),
        "peak_mb": round(int(rss_kb) / 1024),
        "html_mb": round(size / 2**20, 1),
        "rc": rc,
        "code": lines[-1] if rc == 0 else "",
        "error": "" if rc == 0 else err[-300:],
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--generations", type=int, default=20)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--error-mb", type=int, default=0, help="one failed run with an error text this large")
    parser.add_argument("--old", default=None, help="a git revision whose loop report to time too")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        runs = folder / "runs"
        runs.mkdir()
        t0 = time.perf_counter()
        build(runs, args.runs, args.generations, args.layers, args.error_mb)
        found: dict[str, object] = {"ledger_built_s": round(time.perf_counter() - t0, 1), "args": vars(args)}
        found["new"] = measure(ROOT, runs, folder / "new.html")
        if args.old:
            found["old"] = measure(old_tree(args.old, folder), runs, folder / "old.html")
    print(json.dumps(found, indent=2))
    return found

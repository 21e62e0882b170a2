"""The runs folders whose reports are rendered in Chromium (tests/report/test_rendered.py) and
photographed for docs/report.md (tools/report_screenshots.py): the example sweep, a study of three
candidates on the example graph, and a base the default quantization ruins.

No real-weight model is available offline in CI, so the ruined base is a model authored here that
the flag fires on at its default threshold: a LayerNorm written out as ``E[x^2] - E[x]^2`` (as
jax2tf exported it in magika, whose real model the flag fired on, 1.9 dB: benchmarks/RETIRED.md),
under the long node names of a real export, which share a 40-character prefix."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import yaml
from authored import FAST_MEASURE, layer_norm_written_out, ln_frames
from sweeps import _sweep_runs

ROOT = Path(__file__).resolve().parents[1]
MEASURE = yaml.safe_load(FAST_MEASURE)["measure"]
LN, HEAD = "/encoder/layer.0/attention/output/LayerNorm/", "/encoder/layer.0/attention/output/dense/"


def example_sweep(folder: Path) -> Path:
    """graphs/variants.yaml as it is, but for its measure line (the short one the tests use):
    base, weights (clean), scale (confounded)."""
    text = (ROOT / "graphs" / "variants.yaml").read_text()
    text = re.sub(r"(?m)^measure: .*$", FAST_MEASURE, text).replace("base: two_conv.yaml", "base: two_conv_base.yaml")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "two_conv_base.yaml").write_text((ROOT / "graphs" / "two_conv.yaml").read_text())
    (folder / "variants.yaml").write_text(text)
    _sweep_runs(folder / "variants.yaml", folder / "runs")
    return folder / "runs"


def study_of_three(folder: Path) -> Path:
    """Study ``range`` on graphs/two_conv.yaml: three candidates in generation 0 (one clean, two
    confounded), then generation 1 asking one of them again (reused), a new one and one with compile
    options of its own (a group of its own, ``range-g1-o<hash>``: an output grid 8 times as coarse,
    clean and far below its reference); and two rows a killed process left ``running`` in a
    generation it never finished."""
    from loop.study import Study

    runs = folder / "runs"
    study = Study("range", base=ROOT / "graphs" / "two_conv.yaml", runs=runs, inputs={"count": 4},
                  measure={**MEASURE, "budget_s": 3})  # fmt: skip
    forced = [{"op": "force_range_out", "layer": "conv1", "range": [0.0, 4.0]}]
    study.evaluate([forced, [{"op": "scale_weights", "layer": "conv2", "factor": 1.1}],
                    [{"op": "force_range_out", "layer": "conv1", "range": [0.0, 8.0]}]])  # fmt: skip
    coarse = {"perturb": [{"op": "scale_grid", "layer": "conv1", "of": "output", "factor": 8.0}],
              "compile": {"bias_correction": False}}  # fmt: skip
    study.evaluate([forced, [{"op": "scale_weights", "layer": "conv1", "factor": 1.05}], coarse])
    study.close()
    _dead_rows(runs / "ledger.sqlite", "range-g2", ("base", "c0"))
    return runs


def _dead_rows(ledger_path: Path, sweep: str, variants: tuple[str, ...]) -> None:
    """Rows left ``running`` by a process that is gone, as a ``kill -9`` leaves them."""
    from loop.store.ledger import Ledger

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    with Ledger(ledger_path) as ledger:
        ids = [ledger.begin(sweep, "killed", name, "sha", "onnxruntime", 2) for name in variants]
        with ledger.write() as db:
            db.executemany("UPDATE runs SET pid=? WHERE id=?", [(int(gone.stdout), i) for i in ids])


def ruined(folder: Path) -> Path:
    """A base flagged quantization-ruined at the default threshold, with its noise analysis stored,
    and a variant that scales the head's weights."""
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(layer_norm_written_out(ln=LN, head=HEAD), folder / "net.onnx")
    np.save(folder / "calib.npy", ln_frames(32, 1))
    np.save(folder / "score.npy", ln_frames(8, 2))
    doc = {
        "sweep": "layernorm",
        "base": "net.onnx",
        "calibration": {"path": "calib.npy"},
        "inputs": {"path": "score.npy"},
        "measure": MEASURE,
        "variants": [
            {"name": "base"},
            {"name": "head", "perturb": [{"op": "scale_weights", "layer": f"{HEAD}MatMul", "factor": 1.1}]},
        ],
    }
    (folder / "sweep.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    runs = _sweep_runs(folder / "sweep.yaml", folder / "runs")
    assert "quantization-ruined" in runs["base"]["flags"], runs["base"]["scores"]
    return folder / "runs"


FOLDERS = {"sweep": example_sweep, "study": study_of_three, "ruined": ruined}
PICTURES = {  # the sections docs/report.md shows, of each folder's report
    "sweep": ("The sweep at a glance", "The audit", "The bus roofline", "Time to first output"),
    "study": ("The study at a glance", "Searches: SNR against rate", "Generations"),
    "ruined": ("Where accuracy is lost",),
}


def reports(root: Path) -> dict[str, Path]:
    """Each folder built under ``root`` and its report written, by name."""
    from loop.report.page import write_report

    os.environ.setdefault("LOOP_LOCK_DIR", str(root / "locks"))  # this run's host locks alone
    return {name: write_report(build(root / name), None, root / f"{name}.html") for name, build in FOLDERS.items()}

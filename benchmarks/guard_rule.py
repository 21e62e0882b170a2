"""Which bias-correction guard rule holds on real models: each model's base compiled three
ways (the default guard, bias correction always, bias correction off) beside plain
``quantize_static``, scored on frames the guard never saw, and every candidate rule applied
to the guard's own fold estimates from the calibration frames.

    python benchmarks/guard_rule.py --manifest /tmp/realmodels/manifest.json --runs DIR [--only NAME ...]

The manifest is ``benchmarks/real_frames.py``'s. A rule keeps the pass (the model then scores
what "always" scores) or drops it (what "off" scores); it holds on a model when that is at
least off's SNR - 0.5 dB and plain ``quantize_static``'s - 0.5 dB (the better of the shipped
file and the model as loop loads it is not asked: each is checked). Prints one JSON line per
model as it goes, then the table.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_exports import MEASURE, run
from real_models import plain_loaded_snr, plain_snr

from loop.store.ledger import Ledger

COMPILES = {
    "default": {},
    "always": {"bias_correction_guard": False},
    "off": {"bias_correction": False},
}
MARGIN_DB = 0.5


def sweep_doc(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    return {
        "sweep": f"guard-{name}",
        "base": str(Path(entry["onnx"]).resolve()),
        "input_shapes": entry["input_shapes"],
        "calibration": {"path": entry["calibration"]},
        "inputs": {"path": entry["scoring"]},
        "measure": MEASURE,
        "variants": [{"name": k, **({"compile": c} if c else {})} for k, c in COMPILES.items()],
    }


def measure(name: str, entry: dict[str, Any], runs: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    recorded = {r["variant"]: r for r in run(sweep_doc(name, entry), runs)}
    found: dict[str, Any] = {"model": name, "package": entry.get("package", "")}
    for k in COMPILES:
        r = recorded[k]
        found[k] = (r.get("scores") or {}).get("snr_db") if r["status"] == "ok" else None
    with Ledger(runs / "ledger.sqlite") as ledger:  # the compile's info is the ledger's, not the pinned JSON's
        correction = ledger.record(recorded["default"]["id"]).compiled.bias_correction or {}
    found["guard"] = correction.get("guard")
    found["folds"] = correction.get("guard_folds") or []
    found["compile_s"] = {k: (recorded[k].get("stages") or {}).get("optimize_s") for k in COMPILES}
    found["plain_shipped"] = _or_none(lambda: plain_snr(entry)[0])
    found["plain_loaded"] = _or_none(lambda: plain_loaded_snr(entry))
    found["wall_s"] = round(time.perf_counter() - t0, 1)
    return found


def _or_none(score: Callable[[], float]) -> float | None:
    """The plain quantizer's SNR, or None where ONNX Runtime's own tool fails on the file (ddddocr's
    old recogniser: a KeyError inside quantize_static on the shipped file)."""
    try:
        return score()
    except Exception as exc:
        print(f"plain quantize_static failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None


def _mean_se(folds: Sequence[float]) -> tuple[float, float]:
    mean = sum(folds) / len(folds)
    spread = math.sqrt(sum((f - mean) ** 2 for f in folds) / (len(folds) - 1)) if len(folds) > 1 else math.inf
    return mean, spread / math.sqrt(len(folds))


RULES: dict[str, Callable[[Sequence[float]], bool]] = {
    "any gain (sum of folds)": lambda f: sum(f) > 0,
    "every fold gains": lambda f: min(f) > 0,
    "every fold, mean 1 SE clear (loop's)": lambda f: min(f) > 0 and _mean_se(f)[0] - _mean_se(f)[1] > 0,
    "mean 2 SE clear": lambda f: _mean_se(f)[0] - 2 * _mean_se(f)[1] > 0,
    "never (plain quantizer)": lambda f: False,
}


def holds(row: dict[str, Any], keep: bool) -> tuple[float | None, bool]:
    got = row["always"] if keep else row["off"]
    if got is None:
        return None, False
    floors = [row[k] for k in ("off", "plain_shipped", "plain_loaded") if row[k] is not None]
    return got, all(got >= f - MARGIN_DB for f in floors)


def _db(value: float | None) -> str:
    return "failed" if value is None else f"{value:.1f}"


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| model | plain (shipped / loaded) | off | always | folds (share of held-out error removed) "
        "| loop's guard | **default** | holds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    failed = [r["model"] for r in rows if r["off"] is None or r["always"] is None]
    rows = [r for r in rows if r["model"] not in failed]
    for r in rows:
        folds = ", ".join(f"{f:+.3f}" for f in r["folds"])
        got, ok = holds(r, r["guard"] == "kept")
        lines.append(
            f"| {r['model']} | {_db(r['plain_shipped'])} / {_db(r['plain_loaded'])} "
            f"| {r['off']:.1f} | {r['always']:.1f} "
            f"| {folds} | {r['guard']} | **{got:.1f}** | {'yes' if ok else 'NO'} |"
        )
    if failed:
        lines += ["", "Failed to quantize at every setting (left out): " + ", ".join(failed)]
    lines += ["", "| rule | holds on | models it fails | mean dB over off |", "|---|---|---|---|"]
    for name, rule in RULES.items():
        outcome = [(r, *holds(r, bool(r["folds"]) and rule(r["folds"]))) for r in rows]
        fails = [r["model"] for r, _, ok in outcome if not ok]
        gain = sum((got or 0) - r["off"] for r, got, _ in outcome) / max(1, len(outcome))
        lines.append(f"| {name} | {len(rows) - len(fails)} of {len(rows)} | {', '.join(fails) or '-'} | {gain:+.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--manifest", type=Path, default=Path("/tmp/realmodels/manifest.json"))
    parser.add_argument("--runs", type=Path, required=True)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--table", type=Path, default=None, help="only print the table of a JSONL file of rows")
    args = parser.parse_args(argv)
    if args.table:
        print(table([json.loads(line) for line in args.table.read_text().splitlines() if line.strip()]))
        return 0
    models = json.loads(args.manifest.read_text())["models"]
    args.runs.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.only or list(models):
        rows.append(measure(name, models[name], args.runs))
        print(json.dumps(rows[-1]), flush=True)
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

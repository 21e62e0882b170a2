"""A study written by the file layout before issue 34 (``studies/NAME.json``, ``generations/
NAME-gN*.yaml``, ``studies/NAME-gN*.race.json``), read once into the ledger's study tables when the
study is first opened by this code; the files are left where they are and never read again."""

from __future__ import annotations

import json
import re
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from loop.core.errors import LoopError
from loop.store.files import safe_component
from loop.store.races import as_rows, read_race
from loop.store.studies import DONE, StudyStore

KeyOf = Callable[[Sequence[Mapping[str, Any]], Mapping[str, Any], Mapping[str, Any]], str]


def import_files(store: StudyStore, runs: Path, key_of: KeyOf) -> dict[str, Any] | None:
    """The study's settings as its file held them, its generations and ratios written into the
    ledger in one transaction; None when there is no such file (a new study)."""
    path = runs / "studies" / safe_component(f"{store.name}.json", "name")
    if not path.is_file():
        return None
    kept = json.loads(path.read_text())
    kept.pop("race", None)  # kept apart by studies older than measure.target_ratio_pct
    study_compile = (kept.get("settings") or {}).get("compile") or {}
    with store.ledger.write():
        found = store.start(kept, None)
        for number, files in _generations(runs, store.name).items():
            _generation(store, number, files, study_compile, key_of)
        for race in sorted((runs / "studies").glob(f"{glob_escape(store.name)}-g*.race.json")):
            try:
                rows = read_race(race)
            except LoopError as exc:  # its runs keep the ledger's own figures, as before
                warnings.warn(str(exc), UserWarning, stacklevel=2)
                continue
            store.put_ratios(as_rows(rows).values())
    return found


def _generations(runs: Path, name: str) -> dict[int, list[Path]]:
    """Each generation's files (one per group of compile options), by number."""
    pattern = re.compile(re.escape(name) + r"-g(\d+)(?:-o[0-9a-f]+)?\.yaml$")
    found: dict[int, list[Path]] = {}
    folder = runs / "generations"
    for path in sorted(folder.glob(f"{glob_escape(name)}-g*.yaml")) if folder.is_dir() else []:
        matched = pattern.match(path.name)
        if matched:
            found.setdefault(int(matched[1]), []).append(path)
    return dict(sorted(found.items()))


def _generation(
    store: StudyStore, number: int, files: list[Path], study_compile: Mapping[str, Any], key_of: KeyOf
) -> None:
    db, idx = store.ledger, 0
    with db.write() as conn:
        conn.execute(
            "INSERT OR IGNORE INTO generations (study, number, state, claimed) VALUES (?,?,?,?)",
            (store.name, number, DONE, time.time()),
        )
        for path in files:
            doc = yaml.safe_load(path.read_text())
            runs = db.latest(str(doc["sweep"]))
            ref = runs.get("base")
            for v in doc.get("variants") or []:
                run = runs.get(v["name"])
                if v["name"] == "base" or run is None:
                    continue
                key = key_of(v.get("perturb") or [], doc.get("compile") or {}, study_compile)
                conn.execute(
                    "INSERT OR IGNORE INTO candidates (study, generation, idx, key, sweep, variant, run_id, ref_run_id,"
                    " state) VALUES (?,?,?,?,?,?,?,?,?)",
                    (store.name, number, idx, key, doc["sweep"], v["name"], run.id, ref and ref.id, DONE),
                )
                idx += 1


def glob_escape(text: str) -> str:
    """``text`` as a literal in a glob pattern."""
    return re.sub(r"([*?\[])", r"[\1]", text)


__all__ = ["import_files"]

"""A generation's sweep file (:func:`loop.api.evaluate`, :class:`loop.study.Study`): built from an
optimizer's candidates, checked in memory before anything is written, then written once under
``runs/generations``, with the arrays it names under ``runs/arrays``. The sweep runs the value that
was checked, under the generation's name; the file is for people and for ``loop sweep``, and is not
read back.

A candidate's numpy arrays become references to ``runs/arrays/<sha>.npy`` (the ledger records the
same hash), held in memory while the document is validated, so a check writes nothing. A document
refused in memory is written to a scratch folder and parsed again, line by line, so its error
names the line as any sweep file's does.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from loop.author.sweepfile import SweepSpec, document_sha, parse, parse_document
from loop.core.arrays import npy_bytes, ref_of
from loop.core.errors import LoopError
from loop.core.leftovers import scratch
from loop.store.arrays import FOLDER, keep_arrays
from loop.store.files import atomic_write, safe_component

GENERATIONS = "generations"
# libyaml's emitter writes what SafeDumper writes, some 20 times faster: a generation of 64
# candidates over 26 weight grids is a sweep file of thousands of values (issue 43)
_DUMPER: Any = yaml.CSafeDumper if getattr(yaml, "__with_libyaml__", False) else yaml.SafeDumper


@dataclass(frozen=True)
class Prepared:
    """A generation checked and not yet written: its file's document (arrays by reference), the
    arrays by hash, and the document parsed as the file it will be."""

    runs: Path
    doc: dict[str, Any]
    held: dict[str, np.ndarray]
    spec: SweepSpec


def prepare(
    runs: Path,
    sweep: str,
    base: str | Path | None,
    backend: str,
    variants: list[dict[str, Any]],
    settings: Mapping[str, Any],
) -> Prepared:
    """Check a generation (a LoopError naming the line of anything bad), writing nothing."""
    runs = Path(runs).resolve()
    held: dict[str, np.ndarray] = {}
    listed = _referenced(variants, held, os.path.relpath(runs / FOLDER, runs / GENERATIONS))
    doc = _document(sweep, base, backend, listed, settings)
    try:
        spec = parse_document(doc, _path(runs, sweep), held)
    except LoopError as exc:
        raise _located(doc, held, sweep) or exc from None
    return Prepared(runs, doc, held, spec)


def write(prepared: Prepared, sweep: str) -> SweepSpec:
    """The generation's arrays and file written under ``sweep`` (its number is claimed after the
    check); the spec it runs as, which parsing that file gives."""
    doc = {**prepared.doc, "sweep": sweep}
    keep_arrays(prepared.runs, prepared.held)
    path = atomic_write(_path(prepared.runs, sweep), _text(doc).encode())
    return replace(prepared.spec, name=sweep, path=path, sha=document_sha(doc))


def _path(runs: Path, sweep: str) -> Path:
    return runs / GENERATIONS / safe_component(f"{sweep}.yaml", "name")  # never a path of the caller's


def _referenced(value: Any, held: dict[str, np.ndarray], folder: str) -> Any:
    """``value`` with each numpy array in it named by reference (its file under ``folder``,
    relative to the generation's file) and held by hash."""
    if isinstance(value, np.ndarray):
        ref = ref_of(value)
        held.setdefault(ref["array"], value)
        return {**ref, "path": f"{folder}/{ref['array']}.npy"}
    if isinstance(value, Mapping):
        return {k: _referenced(v, held, folder) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_referenced(v, held, folder) for v in value]
    return value


def _document(
    sweep: str, base: str | Path | None, backend: str, variants: list[dict[str, Any]], settings: Mapping[str, Any]
) -> dict[str, Any]:
    needs_base = any("perturb" in v for v in variants)
    if needs_base and base is None:
        raise ValueError("perturbation candidates need a base (base=...)")
    reference = [{"name": "base"}] if needs_base else []
    return {
        "sweep": sweep,
        "base": str(Path(base).resolve()) if base else variants[0]["base"],
        "backend": backend,
        **settings,
        "variants": reference + variants,
    }


def _text(doc: Mapping[str, Any]) -> str:
    return yaml.dump(dict(doc), Dumper=_DUMPER, sort_keys=False)


def _located(doc: Mapping[str, Any], held: Mapping[str, np.ndarray], sweep: str) -> LoopError | None:
    """The error of ``doc`` written as a file in a scratch runs folder and parsed line by line
    (None should that parse find nothing wrong: the caller's error stands)."""
    with scratch("gen") as tmp:
        runs = Path(tmp)
        (runs / FOLDER).mkdir()
        for sha, a in held.items():
            (runs / FOLDER / f"{sha}.npy").write_bytes(npy_bytes(a))
        path = _path(runs, sweep)
        path.parent.mkdir()
        path.write_text(_text(doc))
        try:
            parse(path)
        except LoopError as exc:
            return _as_candidate(exc, doc)
    return None


def _as_candidate(exc: LoopError, doc: Mapping[str, Any]) -> LoopError:
    """The error as the caller wrote it: its candidate by name and the field within it, never a
    line of a file loop wrote in a scratch folder."""
    found = re.match(r"variants\[(\d+)\]\.?(.*)", exc.field or "")
    variants = doc.get("variants") or []
    if found is None or int(found.group(1)) >= len(variants):
        return LoopError(exc.message, field=exc.field)
    name = variants[int(found.group(1))].get("name", found.group(1))
    return LoopError(exc.message, field=f"candidate {name}" + (f": {found.group(2)}" if found.group(2) else ""))


__all__ = ["GENERATIONS", "Prepared", "prepare", "write"]

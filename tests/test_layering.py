"""The design's layering, read from the source: which role may import which.

An allow-list: each role names the roles it may import, and anything else is refused. The
allowed graph has no cycle, so no two subpackages import each other, directly or round about;
:func:`cycles` checks the imports themselves too, whatever the list says.

Every ``import`` and ``from ... import`` in ``loop/`` counts, including those inside functions;
only imports under ``if TYPE_CHECKING:`` are left out, since they never run.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

LOOP = Path(__file__).resolve().parent.parent / "loop"
ROLES = ("core", "author", "flow", "compilers", "devices", "hailort", "measure", "judge", "store")
FACE = ("cli", "api", "study", "report", "__init__")

# role -> the roles it may import (besides itself); the face sits on top and may import any.
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "hailort": {"core"},
    "judge": {"core"},
    "author": {"core", "judge"},
    "store": {"core", "author"},
    "devices": {"core", "hailort"},
    "compilers": {"core", "hailort", "judge", "author", "store"},
    "measure": {"core", "devices", "judge", "author", "store"},
    "flow": set(ROLES) - {"flow"},
    "face": set(ROLES),
}


def role_of(module: str) -> str:
    """``loop.judge.audit`` -> ``judge``; the modules at the top (cli, api, report) are the face."""
    parts = module.split(".")
    if len(parts) < 2 or parts[1] in FACE:
        return "face"
    return parts[1] if parts[1] in ROLES else "face"


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for child in node.body for n in ast.walk(child))
    return skip


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every import in the file that runs."""
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_nodes(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "loop":
                found += [(node.lineno, f"loop.{a.name}") for a in node.names]
            else:
                found.append((node.lineno, node.module))
    return found


def module_name(path: Path, root: Path = LOOP) -> str:
    return ".".join(("loop", *path.relative_to(root).with_suffix("").parts))


def role_imports(root: Path = LOOP) -> list[tuple[str, str, str]]:
    """(where, importing role, imported module) for every import of another role of loop."""
    out = []
    for path in sorted(root.rglob("*.py")):
        mine = role_of(module_name(path, root))
        for line, target in imports(path):
            if target.startswith("loop") and role_of(target) != mine:
                out.append((f"{path.relative_to(root.parent)}:{line}", mine, target))
    return out


def violations(root: Path = LOOP) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        for line, target in imports(path):
            if (target == "click" or target.startswith("click.")) and module_name(path, root) != "loop.cli":
                out.append(f"{path.relative_to(root.parent)}:{line}: imports click (only loop.cli may)")
    for where, mine, target in role_imports(root):
        theirs = role_of(target)
        if theirs not in ALLOWED.get(mine, set()):
            allowed = ", ".join(sorted(ALLOWED.get(mine, set()))) or "no other role"
            out.append(f"{where}: {mine} imports {theirs} ({target}); {mine} may import {allowed}")
    return out


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    """Each cycle of ``graph`` once, as ``a -> b -> a`` from its smallest role."""
    found: set[tuple[str, ...]] = set()

    def walk(path: list[str]) -> None:
        for nxt in sorted(graph.get(path[-1], ())):
            if nxt == path[0]:
                found.add(tuple(path))
            elif nxt not in path and nxt > path[0]:  # each cycle is walked from its smallest role only
                walk([*path, nxt])

    for start in sorted(graph):
        walk([start])
    return [" -> ".join((*c, c[0])) for c in sorted(found, key=lambda c: (len(c), c))]


def cycles(root: Path = LOOP) -> list[str]:
    """The cycles of roles the imports under ``root`` make (whether or not each is allowed)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for _, mine, target in role_imports(root):
        graph[mine].add(role_of(target))
    return _cycles(graph)


def test_every_module_has_a_role() -> None:
    tops = {p.name for p in LOOP.iterdir() if p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists())}
    faces = {f"{f}.py" for f in FACE if not (LOOP / f).is_dir()} | {f for f in FACE if (LOOP / f).is_dir()}
    assert tops == faces | set(ROLES)
    assert set(ALLOWED) == set(ROLES) | {"face"}


def test_every_role_says_what_it_owns() -> None:
    for role in ROLES:
        doc = ast.get_docstring(ast.parse((LOOP / role / "__init__.py").read_text()))
        assert doc and len(doc.split()) > 20, role


def test_the_allowed_graph_has_no_cycle() -> None:
    assert _cycles(ALLOWED) == []


def test_the_layering_holds() -> None:
    assert violations() == []


def test_no_two_subpackages_import_each_other() -> None:
    assert cycles() == []


def _write(root: Path, role: str, line: str, name: str = "mod.py") -> None:
    (root / role).mkdir(parents=True, exist_ok=True)
    body = f"def f() -> None:\n{line}\n" if line.startswith(" ") else f"{line}\n"
    (root / role / name).write_text(body)


@pytest.mark.parametrize(
    ("role", "line", "why"),
    [
        ("store", "from loop.compilers.onnxruntime import OnnxRuntimeCompiler", "store imports compilers"),
        ("compilers", "from loop.devices import base", "compilers imports devices"),
        ("devices", "import loop.compilers.base", "devices imports compilers"),
        ("devices", "from loop.measure.link import load", "devices imports measure"),
        ("judge", "    from loop.store.ledger import Ledger", "judge imports store"),
        ("judge", "from loop.measure import stats", "judge imports measure"),
        ("judge", "from loop.author.perturb import Allow", "judge imports author"),
        ("measure", "from loop.compilers.base import Compiler", "measure imports compilers"),
        ("hailort", "from loop.devices.hailort import HailoRTDevice", "hailort imports devices"),
        ("core", "from loop import cli", "core imports face"),
        ("core", "from loop.author import schema", "core imports author"),
        ("author", "import click", "imports click"),
    ],
)
def test_a_broken_contract_is_caught(tmp_path: Path, role: str, line: str, why: str) -> None:
    root = tmp_path / "loop"
    _write(root, role, line)
    (root / role / "typed.py").write_text(f"from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    {line.strip()}\n")
    found = violations(root)
    assert len(found) == 1 and why in found[0] and "mod.py" in found[0], found


def test_an_allowed_import_passes(tmp_path: Path) -> None:
    root = tmp_path / "loop"
    _write(root, "author", "from loop.judge.structure import Structure")
    _write(root, "measure", "    from loop.devices.base import Device")
    assert violations(root) == [] and cycles(root) == []


def test_a_cycle_is_caught(tmp_path: Path) -> None:
    """author -> judge is allowed; judge -> author closes a cycle, and so does one round about."""
    root = tmp_path / "loop"
    _write(root, "author", "from loop.judge.structure import Structure")
    _write(root, "judge", "    from loop.author.perturb import Allow")
    assert cycles(root) == ["author -> judge -> author"]
    _write(root, "store", "from loop.author import frames")
    _write(root, "judge", "from loop.store import ledger", "other.py")
    assert cycles(root) == ["author -> judge -> author", "author -> judge -> store -> author"]

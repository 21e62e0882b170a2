"""The design's layering, read from the source: which role may import which.

An allow-list: each role names the roles it may import, and anything else is refused. The
allowed graph has no cycle, so no two subpackages import each other, directly or round about;
:func:`cycles` checks the imports themselves too, whatever the list says, and
:func:`module_cycles` checks that no two modules import each other, whatever their roles.

Every ``import`` and ``from ... import`` in ``loop/`` counts, including those inside functions
and those under ``if TYPE_CHECKING:``: a type a module names is a room its reader must open.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

LOOP = Path(__file__).resolve().parent.parent / "loop"
ROLES = ("core", "author", "flow", "compilers", "devices", "hailort", "measure", "judge", "store", "report")
FACE = ("cli", "api", "study", "__init__")

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
    "flow": set(ROLES) - {"flow", "report"},
    "report": {"core", "judge", "measure", "store"},  # it reads records; it never imports the face
    "face": set(ROLES),
}


def role_of(module: str) -> str:
    """``loop.judge.audit`` -> ``judge``; the modules at the top (cli, api, study) are the face."""
    parts = module.split(".")
    if len(parts) < 2 or parts[1] in FACE:
        return "face"
    return parts[1] if parts[1] in ROLES else "face"


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) for every import in the file: ``from a.b import c`` gives ``a.b.c``."""
    tree = ast.parse(path.read_text(), str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:  # a name may be a module: kept whole
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
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


def _module_of(target: str, known: set[str]) -> str | None:
    """The module of ``loop`` an import names (``from loop.x import y``: ``loop.x.y`` where that is
    a module, else ``loop.x``); None outside ``loop``."""
    while target not in known and "." in target:
        target = target.rsplit(".", 1)[0]
    return target if target in known else None


def module_cycles(root: Path = LOOP) -> list[str]:
    """Every pair (or ring) of modules that import each other, as ``a -> b -> a``: strongly
    connected components of the module graph (a package is its ``__init__``)."""
    names = {p: module_name(p, root).removesuffix(".__init__") for p in root.rglob("*.py")}
    known = set(names.values())
    graph = {me: {m for _, t in imports(p) if (m := _module_of(t, known)) not in (None, me)} for p, me in names.items()}
    rings = [sorted(c) for c in _components(graph) if len(c) > 1]
    return [" -> ".join((*c, c[0])) for c in sorted(rings)]


def _components(graph: dict[str, set[str]]) -> list[set[str]]:
    """Kosaraju: the graph's strongly connected components."""
    order: list[str] = []
    seen: set[str] = set()
    for start in sorted(graph):
        stack = [(start, iter(sorted(graph[start])))] if start not in seen else []
        seen.add(start)
        while stack:
            node, rest = stack[-1]
            nxt = next((n for n in rest if n not in seen), None)
            if nxt is None:
                order.append(node)
                stack.pop()
            else:
                seen.add(nxt)
                stack.append((nxt, iter(sorted(graph.get(nxt, ())))))
    back: dict[str, set[str]] = defaultdict(set)
    for node, outs in graph.items():
        for n in outs:
            back[n].add(node)
    found: list[set[str]] = []
    done: set[str] = set()
    for start in reversed(order):
        if start in done:
            continue
        part, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node not in done:
                done.add(node)
                part.add(node)
                todo += back[node] - done
        found.append(part)
    return found


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


def test_no_two_modules_import_each_other() -> None:
    assert module_cycles() == []


def test_modules_that_import_each_other_are_caught(tmp_path: Path) -> None:
    """Within one role, and round about through a package's ``__init__``."""
    root = tmp_path / "loop"
    _write(root, "devices", "from loop.devices.b import f", "a.py")
    _write(root, "devices", "    from loop.devices import a", "b.py")
    (root / "devices" / "__init__.py").write_text("")
    assert module_cycles(root) == ["loop.devices.a -> loop.devices.b -> loop.devices.a"]
    (root / "devices" / "b.py").write_text("")
    (root / "devices" / "__init__.py").write_text("from loop.devices.a import f\n")
    (root / "devices" / "b.py").write_text("import loop.devices\n")
    assert module_cycles(root) == ["loop.devices -> loop.devices.a -> loop.devices.b -> loop.devices"]


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
        ("core", "from loop.devices.base import Device", "core imports devices"),
        ("report", "from loop.api import Result", "report imports face"),
        ("report", "    from loop.study import with_race", "report imports face"),
        ("report", "from loop.flow.sweep import run_sweep", "report imports flow"),
        ("author", "import click", "imports click"),
    ],
)
def test_a_broken_contract_is_caught(tmp_path: Path, role: str, line: str, why: str) -> None:
    """Whether the import runs, or only names a type (under ``TYPE_CHECKING``)."""
    root = tmp_path / "loop"
    _write(root, role, line)
    found = violations(root)
    assert len(found) == 1 and why in found[0] and "mod.py" in found[0], found
    (root / role / "typed.py").write_text(f"from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    {line.strip()}\n")
    typed = [v for v in violations(root) if "typed.py" in v]
    assert why == "imports click" or (len(typed) == 1 and why in typed[0]), typed


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

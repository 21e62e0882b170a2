"""The design's layering, read from the source: which role may import which.

Every ``import`` and ``from ... import`` in ``loop/`` counts, including those inside functions;
only imports under ``if TYPE_CHECKING:`` are left out, since they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LOOP = Path(__file__).resolve().parent.parent / "loop"
ROLES = ("core", "spec", "flow", "compilers", "devices", "hailort", "measure", "judge", "store")
FACE = ("cli", "api", "report", "__init__")

# role -> roles it must not import
FORBIDDEN: dict[str, set[str]] = {
    "core": set(ROLES) - {"core"} | {"face"},
    "store": {"compilers", "devices", "hailort", "flow", "measure", "face"},
    "compilers": {"devices", "flow", "measure", "face"},
    "devices": {"compilers", "flow", "judge", "store", "face"},
    "judge": {"store", "measure", "flow", "compilers", "devices", "face"},
    "measure": {"compilers", "flow", "face"},
    "spec": {"compilers", "devices", "flow", "measure", "store", "face"},
    "hailort": set(ROLES) - {"core", "hailort"} | {"face"},
    "flow": {"face"},
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


def violations(root: Path = LOOP) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        mine = role_of(module_name(path, root))
        for line, target in imports(path):
            if target == "click" or target.startswith("click."):
                if module_name(path, root) != "loop.cli":
                    out.append(f"{path.relative_to(root.parent)}:{line}: imports click (only loop.cli may)")
                continue
            if not target.startswith("loop"):
                continue
            theirs = role_of(target)
            if theirs != mine and theirs in FORBIDDEN.get(mine, set()):
                out.append(f"{path.relative_to(root.parent)}:{line}: {mine} imports {theirs} ({target})")
    return out


def test_every_module_has_a_role() -> None:
    tops = {p.name for p in LOOP.iterdir() if p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists())}
    faces = {f"{f}.py" for f in FACE if not (LOOP / f).is_dir()} | {f for f in FACE if (LOOP / f).is_dir()}
    assert tops == faces | set(ROLES)


def test_every_role_says_what_it_owns() -> None:
    for role in ROLES:
        doc = ast.get_docstring(ast.parse((LOOP / role / "__init__.py").read_text()))
        assert doc and len(doc.split()) > 20, role


def test_the_layering_holds() -> None:
    assert violations() == []


@pytest.mark.parametrize(
    ("role", "line", "why"),
    [
        ("store", "from loop.compilers.onnxruntime import OnnxRuntimeCompiler", "store imports compilers"),
        ("compilers", "from loop.devices import base", "compilers imports devices"),
        ("devices", "import loop.compilers.base", "devices imports compilers"),
        ("judge", "    from loop.store.ledger import Ledger", "judge imports store"),
        ("judge", "from loop.measure import stats", "judge imports measure"),
        ("measure", "from loop.compilers.base import Compiler", "measure imports compilers"),
        ("core", "from loop import cli", "core imports face"),
        ("spec", "import click", "imports click"),
    ],
)
def test_a_broken_contract_is_caught(tmp_path: Path, role: str, line: str, why: str) -> None:
    root = tmp_path / "loop"
    (root / role).mkdir(parents=True)
    body = f"def f() -> None:\n{line}\n" if line.startswith(" ") else f"{line}\n"
    (root / role / "mod.py").write_text(body)
    (root / role / "typed.py").write_text(f"from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    {line.strip()}\n")
    found = violations(root)
    assert len(found) == 1 and why in found[0] and "mod.py" in found[0]

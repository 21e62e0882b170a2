"""Neutral code never branches on a backend's or a device's name: devices own their
differences (``loop/devices``), compilers theirs (``loop/compilers``), and the registry
(``loop/core/registry.py``) is the one other place that names them. Strings elsewhere may
describe a backend (help texts, schema descriptions, defaults) but not be compared with one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LOOP = Path(__file__).resolve().parent.parent / "loop"
NAMES = {"hailort", "hailo", "hailo-emulator", "onnxruntime"}
OWNERS = ("devices", "compilers", "core/registry.py")


def _named(node: ast.AST) -> bool:
    """A name string, or a tuple, list or set literal that holds one."""
    if isinstance(node, ast.Constant):
        return node.value in NAMES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_named(e) for e in node.elts)
    return False


def _branches(node: ast.AST) -> bool:
    if isinstance(node, ast.Compare):
        return any(_named(n) for n in (node.left, *node.comparators))
    if isinstance(node, ast.MatchValue):
        return _named(node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr in ("startswith", "endswith") and any(_named(a) for a in node.args)
    return False


def violations(root: Path = LOOP) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(OWNERS):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if _branches(node):
                out.append(f"{path.relative_to(root.parent)}:{getattr(node, 'lineno', 0)}: {ast.unparse(node)}")
    return out


def test_no_neutral_module_branches_on_a_backend_or_device_name() -> None:
    assert violations() == []


@pytest.mark.parametrize(
    "line",
    [
        'if device != "hailort":\n    pass',
        'ok = backend == "hailo"',
        'ok = name in ("onnxruntime", "x")',
        'match backend:\n    case "hailo-emulator":\n        pass',
        'ok = ref.startswith("hailo")',
    ],
)
def test_a_branch_on_a_name_is_caught(tmp_path: Path, line: str) -> None:
    root = tmp_path / "loop"
    for where in ("measure", "devices"):
        (root / where).mkdir(parents=True)
        (root / where / "mod.py").write_text(line + "\n")
    (root / "core").mkdir()
    (root / "core" / "registry.py").write_text(line + "\n")
    found = violations(root)
    assert len(found) == 1 and found[0].startswith("loop/measure/mod.py:")


def test_describing_a_backend_is_not_branching(tmp_path: Path) -> None:
    root = tmp_path / "loop" / "author"
    root.mkdir(parents=True)
    (root / "mod.py").write_text('HELP = "frames per transfer (as hailortcli)"\nDEFAULT = "onnxruntime"\n')
    assert violations(tmp_path / "loop") == []

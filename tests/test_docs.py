"""The README a newcomer reads in two minutes (issue 35): at most 200 lines, and every file it or a
page under docs/ names lies inside the repository, as does every page the code's comments cite."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NAMED = re.compile(r"`((?:docs|graphs|benchmarks|shim|tools|loop|tests)/[A-Za-z0-9_./-]+)`|\]\(([^)#]+)\)")


def test_the_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


def test_every_file_a_page_names_exists_in_the_repository() -> None:
    missing = []
    for page in PAGES:
        for match in NAMED.finditer(page.read_text()):
            name = (match[1] or match[2]).rstrip(".,:")  # shim/build/: built here, never committed
            if name.startswith(("http://", "https://", "shim/build")) or "*" in name or "<" in name:
                continue
            # a backticked name is from the root; a link's target, as Markdown reads it, from its page
            target = ((ROOT if match[1] else page.parent) / name).resolve()
            if ROOT not in target.parents or not target.exists():
                missing.append(f"{page.relative_to(ROOT)}: {name}")
    assert missing == []


SOURCES = ("loop", "tests", "benchmarks", "tools", "graphs")
CITED = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.md)\b")


def prose(path: Path) -> str:
    """A source file's comments and docstrings: where it cites pages."""
    text = path.read_text()
    found = [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            found.append(ast.get_docstring(node) or "")
    return "\n".join(found)


def uncited(root: Path = ROOT) -> list[str]:
    """Each page a comment or docstring names that is not a file of the repository, by its path
    from the root (``docs/hailo.md``, ``benchmarks/README.md``; ``README.md`` is the root's)."""
    missing = []
    for folder in SOURCES:
        for path in sorted((root / folder).rglob("*.py")):
            for name in CITED.findall(prose(path)):
                if not (root / name).is_file():
                    missing.append(f"{path.relative_to(root)}: {name}")
    return missing


def test_every_page_the_code_cites_exists_in_the_repository() -> None:
    assert uncited() == []


def test_a_page_outside_the_repository_is_caught(tmp_path: Path) -> None:
    (tmp_path / "loop").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "hailo.md").write_text("# here\n")
    (tmp_path / "loop" / "m.py").write_text('"""As docs/hailo.md says."""\n\nX = 1  # HAILO.md has more\n')
    assert uncited(tmp_path) == ["loop/m.py: HAILO.md"]


OUTSIDE = re.compile(r"\.\./shared\b|[\"']shared[\"']\s*/")


def reaches_outside(root: Path = ROOT) -> list[str]:
    """Each file of the tests, code, benchmarks or pages that reads from the folder once kept beside
    the clone ("shared"): a fresh clone has none, so what a test needs lives in tests/data."""
    found = []
    for folder in (*SOURCES, "docs"):
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in (".py", ".md") and OUTSIDE.search(path.read_text()):
                found.append(str(path.relative_to(root)))
    return found


def test_nothing_reads_files_from_beside_the_clone() -> None:
    assert reaches_outside() == []


def test_a_file_from_beside_the_clone_is_caught(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "t.py").write_text(f'HEF = ROOT / ".." / {"shared"!r} / "hailo" / "x.hef"\n')
    (tmp_path / "tests" / "u.py").write_text("# the shared grid of a reshape\n")
    assert reaches_outside(tmp_path) == ["tests/t.py"]

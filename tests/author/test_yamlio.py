"""Loading YAML refuses what would hang, explode or mislead, before it expands anything."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from loop.author.yamlio import MAX_ALIASES, LineDict, load_yaml
from loop.core.errors import LoopError


def _load(tmp_path: Path, data: bytes | str) -> object:
    path = tmp_path / "f.yaml"
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return load_yaml(path)


def _refused(tmp_path: Path, data: bytes | str, words: str) -> LoopError:
    with pytest.raises(LoopError, match=words) as info:
        _load(tmp_path, data)
    assert info.value.file and info.value.file.endswith("f.yaml")
    return info.value


def test_lines_of_keys_are_kept(tmp_path: Path) -> None:
    doc = _load(tmp_path, "a: 1\nb:\n  c: 2\n")
    assert isinstance(doc, LineDict) and doc.line_of("b") == 2 and doc["b"].line_of("c") == 3


def test_a_few_aliases_and_merge_keys_still_work(tmp_path: Path) -> None:
    doc = _load(tmp_path, "d: &d {k: 1}\ne: {<<: *d, j: 2}\nf: *d\n")
    assert doc["e"] == {"k": 1, "j": 2} and doc["f"] == {"k": 1}


def test_an_alias_bomb_is_refused_before_expansion(tmp_path: Path) -> None:
    # nine levels of nine: 9**9 leaves once expanded, 27 aliases as written
    text = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 3)}]\n" for i in range(1, 10)
    )
    start = time.monotonic()
    _refused(tmp_path, text, "once aliases are expanded")
    assert time.monotonic() - start < 1


def test_too_many_aliases_are_refused(tmp_path: Path) -> None:
    _refused(tmp_path, "x: &x 1\n" + "".join(f"k{i}: *x\n" for i in range(MAX_ALIASES + 1)), "aliases")


@pytest.mark.parametrize(
    "data, words",
    [
        (b"\xff\xfe\x00", "not UTF-8"),
        ("a: caf\xe9\n".encode("latin-1"), "not UTF-8"),
        ("? [a, b]\n: 1\n", "plain value"),
        ("a: 1\na: 2\n", "duplicate key 'a'"),
        ("a: " + "[" * 100 + "]" * 100, "nested deeper"),
        ("a: !!python/name:os.system\n", "malformed YAML"),
        ("a: [1\n", "malformed YAML"),
    ],
)
def test_hostile_text_is_refused(tmp_path: Path, data: bytes | str, words: str) -> None:
    _refused(tmp_path, data, words)


def test_only_regular_files_are_read(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero"), tmp_path):
        with pytest.raises(LoopError, match="not a regular file"):
            load_yaml(path)


def test_a_huge_file_is_refused_by_its_size(tmp_path: Path) -> None:
    _refused(tmp_path, "a: 1\n" + "#" * (2 << 20), "bytes")

"""Files under runs/: no write through a link, no predictable temporary name, no name from a
user as a path, content-addressed artifacts checked before they are kept."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from filesystems import fill, small_filesystem

from loop.core.errors import LoopError
from loop.store.files import (
    atomic_write,
    atomic_writes,
    read_regular,
    remove_stale_temps,
    safe_component,
)


def test_a_link_at_the_target_is_replaced_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"theirs")
    (tmp_path / "runs").mkdir()
    target = tmp_path / "runs" / "file"
    target.symlink_to(outside)
    atomic_write(target, b"mine")
    assert not target.is_symlink() and target.read_bytes() == b"mine" and outside.read_bytes() == b"theirs"


def test_a_link_at_the_old_predictable_temporary_name_is_left_alone(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / f".KEY.pkl.{os.getpid()}.tmp").symlink_to(victim)
    atomic_write(tmp_path / "cache" / "KEY.pkl", b"entry")
    assert victim.read_bytes() == b"precious" and (tmp_path / "cache" / "KEY.pkl").read_bytes() == b"entry"


@pytest.mark.parametrize("name", ["../../x", "a/b", "a\\b", "", ".hidden", "..", "a\x00b", "tab\there"])
def test_names_that_cannot_be_one_path_component_are_refused(name: str) -> None:
    with pytest.raises(LoopError, match="cannot name a file"):
        safe_component(name, "name")


def test_unicode_names_are_kept() -> None:
    assert safe_component("évaluer-名前-g3") == "évaluer-名前-g3"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX only")
def test_reads_take_regular_files_only(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to(tmp_path / "fifo")
    with pytest.raises(OSError, match="not a regular file"):
        read_regular(tmp_path / "fifo")  # would block for ever if opened for reading plainly
    with pytest.raises(OSError) as link:
        read_regular(tmp_path / "link")
    assert link.value.errno == errno.ELOOP


def test_a_full_disk_leaves_the_old_file_and_no_temporary_one(tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "small", 64 * 1024) as small:
        (small / "f").write_bytes(b"old")
        filler = fill(small, leave=1024)
        with pytest.raises(OSError) as full:
            atomic_write(small / "f", b"x" * 64 * 1024)
        assert full.value.errno == errno.ENOSPC
        assert sorted(p.name for p in small.iterdir()) == ["f", filler.name] and (small / "f").read_bytes() == b"old"


def test_stale_temporary_files_of_dead_writers_are_removed(tmp_path: Path) -> None:
    (tmp_path / "cache").mkdir()
    dead = tmp_path / "cache" / f".k.blob.{2**22 + 12345}-{'0' * 16}.tmp"
    mine = tmp_path / "cache" / f".k.blob.{os.getpid()}-{'1' * 16}.tmp"
    old_style = tmp_path / "cache" / f".k.pkl.{2**22 + 12346}.tmp"
    for path in (dead, mine, old_style):
        path.write_bytes(b"")
    assert remove_stale_temps(tmp_path) == [dead, old_style]
    assert mine.exists()


def test_many_files_are_written_whole_together_and_a_link_among_them_is_replaced(tmp_path: Path) -> None:
    folder = tmp_path / "arrays"
    folder.mkdir()
    (tmp_path / "elsewhere").write_bytes(b"keep")
    (folder / "b").symlink_to(tmp_path / "elsewhere")
    atomic_writes(folder, {"a": b"1" * 100, "b": b"2", "c": b""})
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == {"a": b"1" * 100, "b": b"2", "c": b""}
    assert not (folder / "b").is_symlink() and (tmp_path / "elsewhere").read_bytes() == b"keep"


def test_a_full_disk_midway_leaves_none_of_the_files_and_no_temporary_one(tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "small", 64 * 1024) as small:
        filler = fill(small, leave=8 * 1024)
        with pytest.raises(OSError) as full:
            atomic_writes(small, {"a": b"x" * 4096, "b": b"y" * 64 * 1024})
        assert full.value.errno == errno.ENOSPC
        assert sorted(p.name for p in small.iterdir()) == [filler.name]

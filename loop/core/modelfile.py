"""An ONNX model as files: the ``.onnx`` and the external-data files its tensors name.

Users bring models of gigabytes in external data, and protobuf stops at 2 GiB, so a model is
known by its files and a content key streamed over them, never by one ``bytes`` value. The key of
a self-contained file is the SHA-256 of its bytes (what loop has always recorded as a model's
sha); a model with external data is keyed over the ``.onnx`` and then each data file it names,
in the order its tensors first name them, each with its name and size, read in chunks. Moving a data
file's bytes, renaming it or editing the graph moves the key; nothing is held whole.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from loop.core.errors import LoopError
from loop.core.hashing import add_part

CHUNK = 1 << 22


def external_locations(path: str | os.PathLike[str]) -> list[str]:
    """The external-data files the model at ``path`` names, in the order its tensors first name
    them (its data never read); [] for a self-contained model."""
    import onnx
    from onnx.external_data_helper import ExternalDataInfo, _get_all_tensors, uses_external_data

    model = onnx.load(os.fspath(path), load_external_data=False)
    seen: dict[str, None] = {}
    for tensor in _get_all_tensors(model):
        if uses_external_data(tensor):
            seen.setdefault(ExternalDataInfo(tensor).location, None)
    return list(seen)


def model_files(path: str | os.PathLike[str]) -> list[Path]:
    """The ``.onnx`` at ``path`` and each data file it names, each a regular file in its folder."""
    path = Path(path)
    folder = path.parent.resolve()
    found = [path]
    for location in external_locations(path):
        where = (folder / location).resolve()
        if folder not in where.parents or not where.is_file():
            raise LoopError(f"{path}: external data file {location!r} is not a regular file in the model's folder")
        found.append(where)
    return found


def model_key(path: str | os.PathLike[str]) -> str:
    """The content key of the model at ``path`` (see the module docstring)."""
    files = model_files(path)
    if len(files) == 1:
        return file_sha(files[0])
    h = hashlib.sha256()
    for i, file in enumerate(files):
        add_part(h, b"" if i == 0 else file.name.encode())
        h.update(file.stat().st_size.to_bytes(8, "little"))  # so no file's bytes run into the next's
        for chunk in _chunks(file):
            h.update(chunk)
    return h.hexdigest()


def file_sha(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file, read in chunks."""
    h = hashlib.sha256()
    for chunk in _chunks(Path(path)):
        h.update(chunk)
    return h.hexdigest()


def _chunks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            yield chunk

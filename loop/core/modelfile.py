"""An ONNX model as files: the ``.onnx`` and the external-data files its tensors name.

Users bring models of gigabytes in external data, and protobuf stops at 2 GiB, so a model is
known by its files and a content key streamed over them, never by one ``bytes`` value. The key of
a self-contained file is the SHA-256 of its bytes (what loop has always recorded as a model's
sha); a model with external data is keyed over the ``.onnx``'s SHA-256 and then each data file it
names, in the order its tensors first name them, by its name and its SHA-256 (read in chunks, and
once per file: a base's variants share its data file). Moving a data file's bytes, renaming it or
editing the graph moves the key; nothing is held whole.

Loop writes a model it derives (a base as loaded, a variant) with :func:`write_model`: one folder
per base holds the base and every variant of it, so a variant names its base's data file where
its tensors are unchanged and writes only those it changes. Sharing goes by folder, not by link:
onnx refuses a data file with more than one hard link, ONNX Runtime one reached through a
symbolic link out of the model's folder.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import os
import shutil
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from loop.core.errors import LoopError
from loop.core.hashing import add_part, stream_sha

if TYPE_CHECKING:
    import onnx

CHUNK = 1 << 22


def read_graph(path: str | os.PathLike[str]) -> onnx.ModelProto:
    """The model at ``path`` without its external tensors' data, or a LoopError saying why not:
    not a regular file (a FIFO or a device would hang the read), unreadable, or no graph in it."""
    import onnx

    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise ValueError("not a regular file")
        model = onnx.load(os.fspath(path), load_external_data=False)
    except OSError as exc:  # the path is in the message already
        raise unreadable(path, ValueError(exc.strerror or exc)) from None
    except Exception as exc:
        raise unreadable(path, exc) from None
    if not model.ir_version or not model.HasField("graph"):  # an empty file parses as an empty model
        raise unreadable(path, ValueError("no graph in it (not an ONNX model)"))
    return model


def unreadable(path: str | os.PathLike[str], exc: Exception) -> LoopError:
    """One line saying why the model at ``path`` could not be read: the first of ``exc``'s."""
    text = str(exc).strip() or type(exc).__name__
    return LoopError(f"unreadable ONNX model {path}: {text.splitlines()[0]}")


def external_locations(model: str | os.PathLike[str] | onnx.ModelProto) -> list[str]:
    """The external-data files a model (its path, or its graph read already) names, in the order
    its tensors first name them (its data never read); [] for a self-contained model."""
    import onnx
    from onnx.external_data_helper import ExternalDataInfo, _get_all_tensors, uses_external_data

    if not isinstance(model, onnx.ModelProto):
        model = onnx.load(os.fspath(model), load_external_data=False)
    seen: dict[str, None] = {}
    for tensor in _get_all_tensors(model):
        if uses_external_data(tensor):
            seen.setdefault(ExternalDataInfo(tensor).location, None)
    return list(seen)


def model_files(path: str | os.PathLike[str], graph: onnx.ModelProto | None = None) -> list[Path]:
    """The ``.onnx`` at ``path`` and each data file it names (``graph``: its graph, where read
    already), each a regular file in its folder: a location of /dev/zero or a FIFO would hang a
    read, one outside the folder reads what it should not."""
    path = Path(path)
    folder = path.parent.resolve()
    found = [path]
    for location in external_locations(path if graph is None else graph):
        where = (folder / location).resolve()
        if folder not in where.parents:
            raise LoopError(f"{path}: external data file {location!r} lies outside the model's folder")
        if not where.is_file():
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
        add_part(h, file_sha(file).encode())
    return h.hexdigest()


def file_sha(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file, read in chunks; remembered per file while its size and time stand, so
    the variants of one base, which share its data file, read it once."""
    stat = os.stat(path)
    return _file_sha(os.fspath(Path(path).resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ino)


@functools.lru_cache(maxsize=256)
def _file_sha(path: str, size: int, mtime_ns: int, inode: int) -> str:
    with open(path, "rb") as f:
        return stream_sha(f)


def self_contained(path: str | os.PathLike[str]) -> bool:
    return not external_locations(path)


def load_model(model: bytes | str | os.PathLike[str], data: bool = True, inline_below: int = 0) -> onnx.ModelProto:
    """A model given as bytes or as a file, its external data read from beside it; with ``data``
    False the graph alone, each external tensor a reference that knows its folder (onnx's own
    ``basepath`` key), so :func:`tensor_array` maps it from its file and a session is given it
    without a copy (:func:`loop.core.sessions.session`). Those under ``inline_below`` bytes are read
    in (shapes and constants a graph's analyses read, exported to a file by ``size_threshold=0``)."""
    import onnx
    from onnx.external_data_helper import _get_all_tensors, load_external_data_for_tensor, uses_external_data

    if isinstance(model, bytes):
        return onnx.load_from_string(model)
    loaded = onnx.load(os.fspath(model), load_external_data=data)
    if not data:
        folder = os.fspath(Path(model).resolve().parent)
        for tensor in _get_all_tensors(loaded):
            if not uses_external_data(tensor):
                continue
            if _stored_bytes(tensor) < inline_below:
                load_external_data_for_tensor(tensor, folder)
                del tensor.external_data[:]
                tensor.data_location = onnx.TensorProto.DEFAULT
            else:
                tensor.external_data.add(key="basepath", value=folder)
    return loaded


def _stored_bytes(tensor: onnx.TensorProto) -> int:
    from onnx import helper

    return int(np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type)).itemsize * math.prod(tensor.dims))


def knows_folder(tensor: onnx.TensorProto) -> bool:
    """An external tensor that says where its file lies (:func:`load_model` with ``data`` False)."""
    return any(e.key == "basepath" for e in tensor.external_data)


def tensor_array(tensor: onnx.TensorProto) -> np.ndarray:
    """A tensor's values: mapped read-only from its file where it is an external tensor that knows
    its folder (:func:`load_model` with ``data`` False), so a model of gigabytes is read a page at a
    time and never copied whole; else as onnx reads it."""
    from onnx import helper, numpy_helper
    from onnx.external_data_helper import ExternalDataInfo, uses_external_data

    if not uses_external_data(tensor) or tensor.HasField("raw_data"):
        return numpy_helper.to_array(tensor)
    info = ExternalDataInfo(tensor)
    if not info.basepath:
        raise ValueError(f"tensor '{tensor.name}' lies in a file, and nothing says in which folder")
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type))
    shape = tuple(int(d) for d in tensor.dims)
    if dtype.kind not in "fiub" or dtype.itemsize * math.prod(shape) == 0:  # bfloat16, 4-bit, empty
        return numpy_helper.to_array(tensor, info.basepath)
    where = os.path.join(info.basepath, info.location)
    return np.memmap(where, dtype=dtype, mode="r", offset=info.offset or 0, shape=shape)


@contextlib.contextmanager
def as_file(model: bytes | str | os.PathLike[str]) -> Iterator[Path]:
    """``model`` as a file: a path as it is; bytes written to a scratch folder for the while."""
    if not isinstance(model, bytes):
        yield Path(model)
        return
    from loop.core.leftovers import scratch

    with scratch("model") as tmp:
        path = Path(tmp) / "model.onnx"
        path.write_bytes(model)
        yield path


@contextlib.contextmanager
def own_name(path: Path) -> Iterator[Path]:
    """``path`` under a name of this thread's own, in its folder (its external data found as
    before): ONNX Runtime's calibrator writes ``<name>-inferred.onnx`` beside the model it reads
    and deletes it after (``quant_utils.load_model_with_shape_infer``), so two compiles of one
    file at once would write, and delete, the same file."""
    alias = path.parent / f".{path.stem}-{os.getpid()}-{threading.get_ident()}.onnx"
    try:
        os.link(path, alias)  # the graph's file: onnx refuses a second link only to a data file
    except OSError:
        shutil.copyfile(path, alias)
    try:
        yield alias
    finally:
        alias.unlink(missing_ok=True)


def portable(model: bytes | Path) -> bytes | Path:
    """``model`` as it can go to another host: a self-contained file as its bytes (small: its
    tensors would be beside it otherwise); a model with external data stays a path, which the
    other host reads from a folder it shares with this one (docs/architecture.md, "Models as files")."""
    if isinstance(model, Path) and self_contained(model):
        return model.read_bytes()
    return model


EXTERNAL_FROM = 1 << 30  # a model's tensors past this many bytes are written beside it, whatever the source did


def write_model(model: onnx.ModelProto, folder: Path, external: bool, name: str = "model") -> tuple[Path, str]:
    """``model`` written in ``folder`` as ``{key}.onnx`` (``name`` while it is written), its key.
    ``external``: every tensor of 1 KiB or more goes to a data file beside it named by its own
    SHA-256, except those the proto already holds as references to files of ``folder`` (a variant's
    unchanged tensors, which it shares with its base); those lying in another folder's files are
    copied in. The proto's written tensors are left as references."""
    import onnx
    from onnx.external_data_helper import convert_model_to_external_data

    folder.mkdir(parents=True, exist_ok=True)
    mark = f"{name}-{os.getpid()}-{threading.get_ident()}"  # two threads never share a draft
    draft = folder / f".{mark}.onnx"
    if not external:
        _read_in(model)
        data = model.SerializeToString(deterministic=True)
        key = hashlib.sha256(data).hexdigest()
        path = folder / f"{key}.onnx"
        if not path.exists():
            draft.write_bytes(data)
            os.replace(draft, path)
        return path, key
    own = f".{mark}.data"
    (folder / own).unlink(missing_ok=True)
    _adopt(model, folder, own)
    convert_model_to_external_data(model, location=own, size_threshold=1024)
    onnx.save_model(model, os.fspath(draft))  # writes the tensors marked for ``own``, then the graph
    return _settle(model, folder, draft, own)


def _elsewhere(model: onnx.ModelProto, folder: Path | None) -> Iterator[tuple[onnx.TensorProto, Path, int, int]]:
    """Each tensor whose data lies in a file of another folder than ``folder`` (its ``basepath``;
    None: any folder): the tensor, the file, and where in it."""
    from onnx.external_data_helper import ExternalDataInfo, _get_all_tensors, uses_external_data

    for tensor in _get_all_tensors(model):
        if not uses_external_data(tensor) or tensor.HasField("raw_data"):
            continue
        info = ExternalDataInfo(tensor)
        if info.basepath and (folder is None or Path(info.basepath).resolve() != folder.resolve()):
            file = Path(info.basepath) / info.location
            offset = info.offset or 0
            yield tensor, file, offset, info.length if info.length is not None else file.stat().st_size - offset


def _adopt(model: onnx.ModelProto, folder: Path, own: str) -> None:
    """Tensors lying in another folder's files copied into ``folder / own``, a chunk at a time, and
    named there: a model loop writes names only files of its own folder."""
    with open(folder / own, "ab") as out:
        for tensor, file, offset, length in list(_elsewhere(model, folder)):
            at = out.tell()
            with open(file, "rb") as src:
                src.seek(offset)
                left = length
                while left and (chunk := src.read(min(CHUNK, left))):
                    out.write(chunk)
                    left -= len(chunk)
            del tensor.external_data[:]
            for key, value in (("location", own), ("offset", str(at)), ("length", str(length))):
                tensor.external_data.add(key=key, value=value)


def _read_in(model: onnx.ModelProto) -> None:
    """Tensors lying in another folder's files read into the proto (a model written whole)."""
    from onnx import TensorProto

    for tensor, file, offset, length in list(_elsewhere(model, None)):
        with open(file, "rb") as src:
            src.seek(offset)
            tensor.raw_data = src.read(length)
        del tensor.external_data[:]
        tensor.data_location = TensorProto.DEFAULT


def _settle(model: onnx.ModelProto, folder: Path, draft: Path, own: str) -> tuple[Path, str]:
    """The draft named by content: its own data file as ``{sha}.data`` (the graph rewritten to
    name it), then the graph as ``{key}.onnx``. A content already there is kept, the draft dropped."""
    from onnx.external_data_helper import ExternalDataInfo, _get_all_tensors, uses_external_data

    if (folder / own).exists():
        data = f"{file_sha(folder / own)}.data"
        os.replace(folder / own, folder / data)  # equal contents: the same bytes replace themselves
        for tensor in _get_all_tensors(model):
            if uses_external_data(tensor) and ExternalDataInfo(tensor).location == own:
                next(e for e in tensor.external_data if e.key == "location").value = data
        draft.write_bytes(model.SerializeToString(deterministic=True))
    key = model_key(draft)
    path = folder / f"{key}.onnx"
    if path.exists():
        draft.unlink()
    else:
        os.replace(draft, path)
    return path, key


def tensor_bytes(model: onnx.ModelProto) -> int:
    # each tensor's own size: the whole's serialization fails past 2 GiB
    return sum(t.ByteSize() for t in model.graph.initializer)

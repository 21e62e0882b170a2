"""YAML loading that remembers the line of every mapping key, for one-line errors.

A sweep file is untrusted input, so loading refuses, before anything is expanded or
allocated: files that are not regular files (``/dev/zero``, a FIFO), files over
:data:`MAX_BYTES`, text that is not UTF-8, more than :data:`MAX_ALIASES` aliases (an alias
bomb costs nothing to compose and everything to serialize), nesting deeper than
:data:`MAX_DEPTH`, and keys that are not scalars.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

from loop.core.errors import LoopError
from loop.core.text import for_person

MAX_BYTES = 1 << 20  # a sweep file or recipe is a few KB; 1 MiB leaves room and bounds parsing
MAX_ALIASES = 64  # `<<: *defaults` and a few shared blocks, never an exponential fan-out
MAX_DEPTH = 32  # a sweep file nests about 5 levels; Python's recursion limit is far deeper
MAX_NODES = 100_000  # values after expanding aliases: what hashing the document will walk


class LineDict(dict):
    """A mapping from YAML that knows its own line and the line of each key."""

    line: int = 0
    key_lines: dict[str, int]

    def line_of(self, key: str) -> int:
        return self.key_lines.get(key, self.line)


class LineList(list):
    line: int = 0
    item_lines: list[int]


class _Loader(yaml.SafeLoader):
    """A safe loader that counts aliases and depth while composing, before any expansion."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.aliases = 0
        self.depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                mark = self.peek_event().start_mark
                raise LoopError(f"more than {MAX_ALIASES} YAML aliases; write the values out", line=mark.line + 1)
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise LoopError(f"nested deeper than {MAX_DEPTH} levels", line=mark.line + 1)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _expanded_size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """How many nodes the document has once every alias is expanded (memoized: linear time)."""
    if id(node) not in sizes:
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        sizes[id(node)] = 1 + sum(_expanded_size(c, sizes) for c in children)
    return sizes[id(node)]


def _mapping(loader: _Loader, node: yaml.MappingNode) -> LineDict:
    out = LineDict()
    out.line = node.start_mark.line + 1
    out.key_lines = {}
    loader.flatten_mapping(node)  # `<<:` merge keys, as SafeLoader would
    for key_node, value_node in node.value:
        line = key_node.start_mark.line + 1
        if not isinstance(key_node, yaml.ScalarNode):
            raise LoopError("a key must be a plain value, not a list or mapping", line=line)
        key = loader.construct_object(key_node, deep=True)
        if key in out:
            shown = for_person(key, None)
            raise LoopError(f"duplicate key '{shown}'", line=line, field=shown)
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[str(key)] = line
    return out


def _sequence(loader: _Loader, node: yaml.SequenceNode) -> LineList:
    out = LineList(loader.construct_object(child, deep=True) for child in node.value)
    out.line = node.start_mark.line + 1
    out.item_lines = [child.start_mark.line + 1 for child in node.value]
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _sequence)


def regular_file(path: Path, what: str = "file") -> os.stat_result:
    """``path``'s stat if it is a regular file; reading a device or a FIFO would hang or never end."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise LoopError(f"cannot read {what} {path}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise LoopError(f"{what} {path} is not a regular file")
    return st


def read_text(path: Path, limit: int = MAX_BYTES) -> str:
    """The UTF-8 text of the regular file ``path``, refused past ``limit`` bytes."""
    st = regular_file(path)
    if st.st_size > limit:
        raise LoopError(f"{st.st_size} bytes is more than a sweep file or recipe may hold ({limit})")
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise LoopError(f"cannot read: {exc.strerror}") from None
    if len(data) > limit:
        raise LoopError(f"more than {limit} bytes; a sweep file or recipe is small")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise LoopError(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})", line=line) from None


def load_yaml(path: Path, fast: bool = False) -> Any:
    """Parse ``path``; any failure is a :class:`LoopError` naming the file and line.

    ``fast``: a file loop wrote itself (a generation's sweep file), parsed by libyaml where
    PyYAML has it, its mappings and lists knowing no lines (each ``line`` 0): the line-tracking
    loader costs a second a generation of thousands of values. A caller that finds it bad parses
    it again without ``fast`` to say where (:func:`loop.author.sweepfile.parse`)."""
    try:
        text = read_text(path)
        return _load_fast(text) if fast and _FAST is not None else _load(text)
    except LoopError as exc:
        raise exc.where(file=str(path)) from None


_FAST: Any = getattr(yaml, "CSafeLoader", None) if getattr(yaml, "__with_libyaml__", False) else None


def _load_fast(text: str) -> Any:
    """Without the line-tracking loader's limits (aliases, depth, nodes): a self-referencing alias
    or deep nesting becomes a LoopError here, and the caller parses again with those limits."""
    try:
        return lineless(yaml.load(text, Loader=_FAST))  # CSafeLoader: the safe loader, in C
    except (yaml.YAMLError, TypeError, ValueError, RecursionError) as exc:
        raise LoopError(f"malformed YAML: {exc}".splitlines()[0]) from None


def lineless(value: Any) -> Any:
    """``value`` with its mappings and lists as the line-tracking loader gives them, lines unknown."""
    if isinstance(value, dict):
        out = LineDict((k, lineless(v)) for k, v in value.items())
        out.key_lines = {}
        return out
    if isinstance(value, list):
        items = LineList(lineless(v) for v in value)
        items.item_lines = [0] * len(items)
        return items
    return value


def _load(text: str) -> Any:
    if "\x00" in text:
        raise LoopError("a NUL byte: this is not a text file")
    try:
        return _compose_and_construct(text)
    except LoopError:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise LoopError(f"malformed YAML: {exc.problem or exc}", line=line) from None
    except yaml.YAMLError as exc:
        raise LoopError(f"malformed YAML: {exc}".splitlines()[0]) from None
    except (TypeError, ValueError, RecursionError) as exc:
        # A constructor's own failure (an unhashable merge key, a bad timestamp).
        raise LoopError(f"malformed YAML: {type(exc).__name__}: {exc}".splitlines()[0]) from None


def _compose_and_construct(text: str) -> Any:
    loader = _Loader(text)  # the reader refuses control characters here already
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = _expanded_size(node, {})
        if size > MAX_NODES:
            raise LoopError(f"{size} values once aliases are expanded (at most {MAX_NODES})")
        return loader.construct_document(node)
    finally:
        loader.dispose()


def line_of(obj: Any, key: str | None = None) -> int | None:
    if isinstance(obj, LineDict):
        return obj.line_of(key) if key else obj.line
    return getattr(obj, "line", None)

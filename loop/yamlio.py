"""YAML loading that remembers the line of every mapping key, for one-line errors."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from loop.errors import LoopError


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
    pass


def _mapping(loader: _Loader, node: yaml.MappingNode) -> LineDict:
    out = LineDict()
    out.line = node.start_mark.line + 1
    out.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in out:
            raise LoopError(f"duplicate key '{key}'", line=key_node.start_mark.line + 1, field=str(key))
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[str(key)] = key_node.start_mark.line + 1
    return out


def _sequence(loader: _Loader, node: yaml.SequenceNode) -> LineList:
    out = LineList(loader.construct_object(child, deep=True) for child in node.value)
    out.line = node.start_mark.line + 1
    out.item_lines = [child.start_mark.line + 1 for child in node.value]
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _sequence)


def load_yaml(path: Path) -> Any:
    """Parse ``path``; any failure is a :class:`LoopError` naming the file and line."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise LoopError(f"cannot read: {exc.strerror}", file=str(path)) from None
    try:
        return yaml.load(text, Loader=_Loader)
    except LoopError as exc:
        raise exc.where(file=str(path))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise LoopError(f"malformed YAML: {exc.problem or exc}", file=str(path), line=line) from None
    except yaml.YAMLError as exc:
        raise LoopError(f"malformed YAML: {exc}", file=str(path)) from None


def line_of(obj: Any, key: str | None = None) -> int | None:
    if isinstance(obj, LineDict):
        return obj.line_of(key) if key else obj.line
    return getattr(obj, "line", None)

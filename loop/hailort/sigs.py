"""Declarative C ABI: a ``.sigs`` file of C declarations, bound through ctypes.

A ``.sigs`` file holds one C function declaration per line; ``#`` starts a comment and
blank lines are ignored. For example::

    # open a HEF; options are "key=value;key=value"
    int loop_hrt_open(const char* hef_path, const char* options, void** handle)

Types understood: ``void``, ``int``, ``unsigned`` (``unsigned int``), ``int32_t``,
``uint32_t``, ``int64_t``/``int64``, ``uint64_t``/``uint64``, ``size_t``, ``double``,
``float``, ``char`` and pointers to any of them; ``const`` is accepted and ignored, since
ctypes does not enforce it. The parser lives in the package (not in ``shim/``) so that an
installed, non-editable ``loop`` can still bind the shim; ``shim/sigs_ctypes.py``
re-exports it.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loop.core.errors import LoopError

_BASE: dict[str, Any] = {
    "void": None,
    "int": ctypes.c_int,
    "unsigned": ctypes.c_uint,
    "unsigned int": ctypes.c_uint,
    "int32_t": ctypes.c_int32,
    "uint32_t": ctypes.c_uint32,
    "int64_t": ctypes.c_int64,
    "int64": ctypes.c_int64,
    "uint64_t": ctypes.c_uint64,
    "uint64": ctypes.c_uint64,
    "size_t": ctypes.c_size_t,
    "double": ctypes.c_double,
    "float": ctypes.c_float,
    "char": ctypes.c_char,
}
_TYPE_WORDS = {"unsigned", "int", "const"} | set(_BASE)
_DECL = re.compile(r"^(?P<head>[\w\s\*]+?)\s*\((?P<args>.*)\)\s*;?$")


class SigsError(LoopError):
    """A ``.sigs`` file that does not parse, or a library that lacks a declared symbol."""


@dataclass(frozen=True)
class CType:
    """One C type as written: base name, pointer depth, and the ctypes type it binds to."""

    base: str
    pointers: int

    @property
    def ctype(self) -> Any:
        if self.base == "void" and self.pointers == 0:
            return None
        if self.base in ("void", "char") and self.pointers >= 1:
            # char* and void* have dedicated ctypes types that accept bytes and buffers.
            inner: Any = ctypes.c_char_p if self.base == "char" else ctypes.c_void_p
            depth = self.pointers - 1
        else:
            inner, depth = _BASE[self.base], self.pointers
        for _ in range(depth):
            inner = ctypes.POINTER(inner)
        return inner


@dataclass(frozen=True)
class Signature:
    name: str
    restype: CType
    argtypes: tuple[CType, ...]
    argnames: tuple[str, ...]
    line: int


def _parse_type(text: str, where: str) -> tuple[CType, str]:
    """Split ``const char* name`` into its type and (possibly empty) parameter name."""
    pointers = text.count("*")
    words = [w for w in text.replace("*", " ").split() if w != "const"]
    name = ""
    if len(words) > 1 and words[-1] not in _TYPE_WORDS:
        name = words.pop()
    base = " ".join(words)
    if base not in _BASE:
        raise SigsError(f"unknown C type '{base or text.strip()}' (known: {', '.join(sorted(_BASE))})", field=where)
    if base == "void" and pointers == 0 and name:
        raise SigsError("a parameter cannot be void", field=where)
    return CType(base, pointers), name


def parse_line(line: str, number: int = 0) -> Signature | None:
    """Parse one line of a ``.sigs`` file; comments and blank lines give None."""
    text = line.split("#", 1)[0].strip()
    if not text:
        return None
    match = _DECL.match(text)
    if not match:
        raise SigsError(f"not a C function declaration: {text!r}", line=number)
    head = match["head"].strip()
    fname = re.search(r"(\w+)$", head)
    if not fname:
        raise SigsError(f"no function name in {text!r}", line=number)
    restype, _ = _parse_type(head[: fname.start()] or "int", f"{fname[1]} return type")
    args = [a for a in (p.strip() for p in match["args"].split(",")) if a]
    if args == ["void"]:
        args = []
    parsed = [_parse_type(a, f"{fname[1]} argument {i + 1}") for i, a in enumerate(args)]
    return Signature(
        fname[1], restype, tuple(t for t, _ in parsed), tuple(n or f"arg{i}" for i, (_, n) in enumerate(parsed)), number
    )


def parse_sigs(text: str, source: str = "<sigs>") -> list[Signature]:
    """Parse a whole ``.sigs`` text; errors name the source and line."""
    out: list[Signature] = []
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            sig = parse_line(line, number)
        except SigsError as exc:
            raise exc.where(file=source, line=number) from None
        if sig:
            out.append(sig)
    names = [s.name for s in out]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SigsError(f"declared more than once: {', '.join(duplicates)}", file=source)
    return out


class Binding:
    """A loaded library whose declared functions are typed ctypes callables."""

    def __init__(self, library: ctypes.CDLL, signatures: list[Signature], path: str) -> None:
        self.library = library
        self.path = path
        self.signatures = {s.name: s for s in signatures}
        self.functions: dict[str, Callable[..., Any]] = {}
        for sig in signatures:
            func = getattr(library, sig.name)
            func.restype = sig.restype.ctype
            func.argtypes = [t.ctype for t in sig.argtypes]
            self.functions[sig.name] = func

    def __getattr__(self, name: str) -> Callable[..., Any]:
        try:
            return self.__dict__["functions"][name]
        except KeyError:
            raise AttributeError(f"'{name}' is not declared in the .sigs of {self.path}") from None


def missing_symbols(library: ctypes.CDLL, signatures: list[Signature]) -> list[str]:
    missing = []
    for sig in signatures:
        try:
            getattr(library, sig.name)
        except AttributeError:
            missing.append(sig.name)
    return missing


def bind(library_path: str | Path, sigs_path: str | Path) -> Binding:
    """Load ``library_path`` and bind every function declared in ``sigs_path``.

    Every declared symbol must resolve; the error names all the ones that do not.
    """
    sigs_path = Path(sigs_path)
    signatures = parse_sigs(sigs_path.read_text(encoding="utf-8"), str(sigs_path))
    try:
        library = ctypes.CDLL(str(library_path))
    except OSError as exc:
        raise SigsError(f"cannot load library {library_path}: {exc}") from None
    missing = missing_symbols(library, signatures)
    if missing:
        raise SigsError(
            f"{library_path} lacks {len(missing)} symbol(s) declared in {sigs_path.name}: {', '.join(missing)}"
        )
    return Binding(library, signatures, str(library_path))

"""Bind a ``.sigs`` file through ctypes: a thin re-export of :mod:`loop.hailort.sigs`.

The parser lives inside the ``loop`` package so that a non-editable install can bind the
shim; this file keeps the shim folder self-describing and usable from a checkout::

    python shim/sigs_ctypes.py shim/hailort_shim.sigs shim/build/libhailort_shim.so
"""

from __future__ import annotations

import sys

from loop.hailort.sigs import Binding, CType, Signature, SigsError, bind, parse_sigs

__all__ = ["Binding", "CType", "Signature", "SigsError", "bind", "parse_sigs"]


def main(argv: list[str]) -> int:
    """Check that every declared symbol resolves in the library; print one line per symbol."""
    if len(argv) != 2:
        print("usage: sigs_ctypes.py FILE.sigs LIBRARY", file=sys.stderr)
        return 2
    try:
        binding = bind(argv[1], argv[0])
    except SigsError as exc:
        print(exc, file=sys.stderr)
        return 1
    for name in binding.signatures:
        print(f"ok {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

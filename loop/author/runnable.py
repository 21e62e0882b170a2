"""A base ONNX Runtime can run, or one line saying why not, before anything is written.

Every backend runs the float base on ONNX Runtime (calibration, the float reference every
variant is scored against), so a base it cannot run would fail each variant at optimize with
its C++ text. What it can run is read from the installed ONNX Runtime's own operator registry
(``get_all_operator_schema``): the domains it registers, the ops of each, and the highest
opset of each, which is the highest ``since_version`` among its ops (an ONNX opset exists
because an operator changed in it, and ONNX Runtime refuses a newer one just so).

Model-local functions are inlined first where ONNX can (``onnx.inliner``, each body converted
to the model's opsets); what is left is refused, since the quantizer and the audit read only
the top graph's nodes (a layer inside a function would be neither quantized nor audited).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import onnx
from onnx import inliner

from loop.author.shapes import walk  # every node, control-flow bodies included
from loop.core.errors import LoopError
from loop.core.text import for_person

ONNX_DOMAIN = ""  # "ai.onnx" is the same domain under its long name
ALIASES = {"ai.onnx": ONNX_DOMAIN}


@lru_cache(maxsize=1)
def registry() -> tuple[dict[str, int], frozenset[tuple[str, str]], str]:
    """The installed ONNX Runtime's highest opset per domain, its (domain, op) pairs, its version."""
    import onnxruntime
    from onnxruntime.capi import _pybind_state

    opsets: dict[str, int] = {}
    ops: set[tuple[str, str]] = set()
    for schema in _pybind_state.get_all_operator_schema():
        opsets[schema.domain] = max(opsets.get(schema.domain, 0), schema.since_version)
        ops.add((schema.domain, schema.name))
    return opsets, frozenset(ops), onnxruntime.__version__


def _domain(name: str) -> str:
    return ALIASES.get(name, name)


def _shown(domain: str) -> str:
    return for_person(domain or "ai.onnx")


def inline_functions(model: onnx.ModelProto, path: Path) -> tuple[onnx.ModelProto, list[str]]:
    """``model`` with its local functions inlined by ONNX, and a note; refused where ONNX cannot."""
    if not model.functions:
        return model, []
    count = len(model.functions)
    try:
        inlined = inliner.inline_local_functions(model, convert_version=True)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise LoopError(f"{path}: its local functions cannot be inlined by ONNX: {for_person(first)}") from None
    left = {(f.domain, f.name) for f in inlined.functions}
    called = next((n for n in walk(inlined.graph) if (n.domain, n.op_type) in left), None)
    if called is not None:
        raise LoopError(
            f"{path}: node '{for_person(called.name)}' calls local function "
            f"'{for_person(called.op_type)}' ({_shown(called.domain)}), which ONNX could not inline; "
            "loop quantizes and audits plain nodes only"
        )
    del inlined.functions[:]  # none is called any more
    return inlined, [f"{count} local function(s) inlined by ONNX"]


def refuse_unrunnable(model: onnx.ModelProto, path: Path) -> None:
    """Refuse an opset newer than ONNX Runtime registers for its domain, a node of a domain it
    does not register, and an op of a registered domain that it does not know."""
    opsets, ops, version = registry()
    runtime = f"the installed ONNX Runtime {version}"
    for entry in model.opset_import:
        domain = _domain(entry.domain)
        if domain in opsets and entry.version > opsets[domain]:
            raise LoopError(
                f"{path}: opset {entry.version} of domain '{_shown(domain)}' is newer than {runtime} "
                f"runs (up to {opsets[domain]})"
            )
    for node in walk(model.graph):
        domain = _domain(node.domain)
        if domain not in opsets:
            raise LoopError(
                f"{path}: node '{for_person(node.name)}' ({for_person(node.op_type)}) is of domain "
                f"'{_shown(domain)}', which {runtime} does not run (it runs: {', '.join(map(_shown, sorted(opsets)))})"
            )
        if (domain, node.op_type) not in ops:
            raise LoopError(
                f"{path}: node '{for_person(node.name)}' is op '{for_person(node.op_type)}', which {runtime} "
                f"does not know in domain '{_shown(domain)}'"
            )

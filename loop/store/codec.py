"""A compile result as plain data: its fields as JSON, its artifact as raw bytes.

What comes back from disk (the cache) or from a compile child is parsed, never unpickled, so
a planted file can at worst be a wrong result, never run code. Each part is checked against
its hash when read: the JSON against the hash in its header line, each byte part (the
artifact, its extras) against the hash the JSON gives it. The hashes catch damage and
swapped files; they are not a signature (whoever can write the files can rewrite both).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from loop.core.facts import CompileFacts
from loop.core.vocab import (
    Artifact,
    CompileOptions,
    CompileResult,
    LayerPrint,
    Precision,
    Quantized,
    RangeOverride,
    Rescale,
    TensorLayout,
    WeightPrecision,
)
from loop.store.shared import TensorStore, checked_join, names, split

FORMAT = "loop-result-1"
QUANTIZED = "loop-quantized-1"  # a quantized model: the compile cache's other kind of entry


class Damaged(ValueError):
    """A stored result that is not what it claims to be; the message says which part."""


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _plain(value: Any) -> Any:
    """JSON for values json does not know (numpy's, say); the rest becomes its repr."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    return repr(value)


def _artifact_json(
    artifact: Artifact, tensors: TensorStore | None = None
) -> tuple[dict[str, Any], list[tuple[str, bytes]]]:
    """With ``tensors``, an ONNX artifact's large tensors go there and its part is the graph
    that names them (:mod:`loop.store.shared`), with the hash of the artifact they join back to."""
    head: dict[str, Any] = {
        "backend": artifact.backend,
        "suffix": artifact.suffix,
        "inputs": [t.to_json() for t in artifact.inputs],
        "outputs": [t.to_json() for t in artifact.outputs],
    }
    if not artifact.data:  # stored under runs/ by whoever compiled it: its file and hashes travel
        if artifact.path is None or artifact.stored_sha is None:
            raise ValueError("an artifact with neither bytes nor a stored file")
        head.update(path=artifact.path, stored_sha=artifact.stored_sha, extras_sha=artifact.extras_sha)
        return head, []
    data = artifact.data
    graph = split(data, tensors) if tensors is not None and artifact.suffix == ".onnx" else None
    if graph is not None:
        head.update(joined_sha256=artifact.sha, tensors=names(graph))
        data = graph
    return head, [("artifact", data), *((f"extra:{k}", v) for k, v in sorted(artifact.extras.items()))]


def _quantized_json(q: Quantized) -> tuple[dict[str, Any], list[tuple[str, bytes]]]:
    head: dict[str, Any] = {"backend": q.backend, "info": q.info.to_json(), "stages": q.stages}
    if q.prints:
        head["prints"] = [lp.to_json() for lp in q.prints]
    if isinstance(q.source, str):  # a file's path: the float model stays where it is
        return {**head, "source_path": q.source}, [("quantized", q.serialized())]
    return head, [("quantized", q.serialized()), ("source", q.source)]


def _quantized(head: dict[str, Any], parts: dict[str, bytes]) -> Quantized:
    info, stages = CompileFacts.of(head["info"]), {str(k): float(v) for k, v in head["stages"].items()}
    source = str(head["source_path"]) if "source_path" in head else parts["source"]
    prints = tuple(LayerPrint.from_json(lp) for lp in head.get("prints", ()))
    return Quantized(str(head["backend"]), parts["quantized"], info, stages, source, prints)


def encode_quantized(q: Quantized, extra: dict[str, Any] | None = None) -> tuple[bytes, bytes]:
    """A quantized model as :func:`encode` writes a result: JSON under its hash, bytes by hash."""
    head, parts = _quantized_json(q)
    return _sealed({"format": QUANTIZED, **head, "parts": _listed(parts), "extra": extra or {}}, parts, QUANTIZED)


def decode_quantized(meta: bytes, blob: bytes) -> tuple[Quantized, dict[str, Any]]:
    data = body(meta, QUANTIZED)
    parts = _parts(data, blob)
    try:
        return _quantized(data, parts), dict(data["extra"])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise Damaged(f"a malformed field ({type(exc).__name__}: {exc})") from None


def _listed(parts: list[tuple[str, bytes]]) -> list[dict[str, Any]]:
    return [{"name": n, "size": len(d), "sha256": _sha(d)} for n, d in parts]


def _sealed(data: dict[str, Any], parts: list[tuple[str, bytes]], fmt: str) -> tuple[bytes, bytes]:
    text = json.dumps(data, sort_keys=True, default=_plain).encode()
    return f"{fmt} {_sha(text)}\n".encode() + text, b"".join(d for _, d in parts)


def encode(
    result: CompileResult, extra: dict[str, Any] | None = None, tensors: TensorStore | None = None
) -> tuple[bytes, bytes]:
    """``(meta, blob)``: a header line and JSON, and the artifact's bytes one after another
    (then the quantized model's, where a compile child carries it back). ``extra`` travels in
    the JSON (the cache keeps its key there). ``tensors``: where an ONNX artifact's large
    tensors go, shared with every artifact that holds them (:mod:`loop.store.shared`)."""
    head, parts = _artifact_json(result.artifact, tensors) if result.artifact is not None else (None, [])
    quantized = None
    if isinstance(result.quantized, Quantized):  # one left in a cache is no part of a result's bytes
        quantized, more = _quantized_json(result.quantized)
        parts = [*parts, *((f"q:{n}", d) for n, d in more)]
    body = {
        "format": FORMAT,
        "ok": result.ok,
        "stage": result.stage,
        "error": result.error,
        "stderr_tail": result.stderr_tail,
        "traceback": result.traceback,
        "stages": result.stages,
        "compiled_on": result.compiled_on,
        "layers": [lp.to_json() for lp in result.layers],
        "info": result.info.to_json(),
        "artifact": head,
        "parts": _listed(parts),
        "extra": extra or {},
        **({"quantized": quantized} if quantized is not None else {}),
    }
    return _sealed(body, parts, FORMAT)


def body(meta: bytes, fmt: str = FORMAT) -> dict[str, Any]:
    """The JSON of ``meta`` once its header's hash holds; :class:`Damaged` otherwise."""
    header, _, text = meta.partition(b"\n")
    fields = header.split(b" ")
    if len(fields) != 2 or fields[0] != fmt.encode():
        raise Damaged("not a loop result")
    if _sha(text).encode() != fields[1]:
        raise Damaged("its JSON does not match its hash")
    try:
        data = json.loads(text)
    except ValueError:
        raise Damaged("its JSON does not parse") from None
    if not isinstance(data, dict) or data.get("format") != fmt:
        raise Damaged("not a loop result")
    return data


def _parts(data: dict[str, Any], blob: bytes) -> dict[str, bytes]:
    out, offset = {}, 0
    for part in data["parts"]:
        chunk = blob[offset : offset + int(part["size"])]
        offset += int(part["size"])
        if len(chunk) != int(part["size"]) or _sha(chunk) != part["sha256"]:
            raise Damaged(f"its {part['name']} bytes do not match their hash")
        out[part["name"]] = chunk
    if offset != len(blob):
        raise Damaged("its bytes are longer than its parts")
    return out


def decode(meta: bytes, blob: bytes, tensors: TensorStore | None = None) -> tuple[CompileResult, dict[str, Any]]:
    """The result and the ``extra`` that :func:`encode` was given; :class:`Damaged` if any part
    fails its hash or is not the shape of a result. ``tensors``: where an artifact encoded
    with them finds its tensors again."""
    data = body(meta)
    parts = _parts(data, blob)
    if data["artifact"] is not None and data["artifact"].get("joined_sha256"):
        parts["artifact"] = _joined(parts["artifact"], data["artifact"]["joined_sha256"], tensors)
    try:
        return _result(data, parts), dict(data["extra"])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise Damaged(f"a malformed field ({type(exc).__name__}: {exc})") from None


def _joined(graph: bytes, sha: str, tensors: TensorStore | None) -> bytes:
    if tensors is None:
        raise Damaged("its artifact's tensors lie in a runs folder it was not read with")
    whole = checked_join(graph, tensors, sha)
    if whole is None:
        raise Damaged("its artifact's shared tensors are missing or do not match its hash")
    return whole


def _result(data: dict[str, Any], parts: dict[str, bytes]) -> CompileResult:
    artifact = None
    if data["artifact"] is not None:
        a = data["artifact"]
        extras = {name.split(":", 1)[1]: chunk for name, chunk in parts.items() if name.startswith("extra:")}
        stored = {str(k): str(v) for k, v in a.get("extras_sha", {}).items()}
        artifact = Artifact(
            str(a["backend"]),
            parts.get("artifact", b""),
            str(a["suffix"]),
            tuple(TensorLayout.from_json(t) for t in a["inputs"]),
            tuple(TensorLayout.from_json(t) for t in a["outputs"]),
            extras=extras or dict.fromkeys(stored, b""),
            path=str(a["path"]) if a.get("path") else None,
            stored_sha=str(a["stored_sha"]) if a.get("stored_sha") else None,
            extras_sha=stored,
        )
        if artifact.path is None and "artifact" not in parts:
            raise KeyError("artifact")
    return CompileResult(
        ok=bool(data["ok"]),
        stage=data["stage"],
        error=data["error"],
        stderr_tail=str(data["stderr_tail"]),
        traceback=data.get("traceback"),
        stages=dict(data["stages"]),
        artifact=artifact,
        layers=[LayerPrint.from_json(lp) for lp in data["layers"]],
        info=CompileFacts.of(data["info"]),
        compiled_on=str(data["compiled_on"]),
        quantized=_quantized(data["quantized"], {k[2:]: v for k, v in parts.items() if k.startswith("q:")})
        if data.get("quantized")
        else None,
    )


def options_to_json(options: CompileOptions) -> str:
    return json.dumps(options.model_dump(), default=_plain)


def options_from_json(text: str) -> CompileOptions:
    data = json.loads(text)
    data["overrides"] = tuple(RangeOverride(**o) for o in data["overrides"])
    data["precisions"] = tuple(Precision(**p) for p in data.get("precisions", ()))
    data["weight_bits"] = tuple(WeightPrecision(**p) for p in data.get("weight_bits", ()))
    data["rescales"] = tuple(
        Rescale(r["layer"], r["of"], tuple(r["factors"]), tuple(r["tensors"])) for r in data.get("rescales", ())
    )
    data["backend_options"] = tuple((str(k), v) for k, v in data["backend_options"])
    return CompileOptions(**data)

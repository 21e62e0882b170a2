"""A network cut for the device, as hailo_model_zoo cuts one: the sweep file's ``hailo: {start_nodes,
end_nodes}`` go to the Dataflow Compiler's ``translate_onnx_model(start_node_names=..., end_node_names=...)``
and the pre- and post-processing outside them stays on the host. The float reference is the same cut,
made by ONNX's own ``onnx.utils.Extractor``, so scoring compares like with like.
"""

from __future__ import annotations

from pathlib import Path

from loop.core.errors import LoopError
from loop.core.modelfile import load_model
from loop.core.vocab import CompileOptions

Cut = tuple[tuple[str, ...], tuple[str, ...]]  # start nodes, end nodes


def cut_of(options: CompileOptions) -> Cut:
    """The start and end nodes ``options`` carries (empty: no cut)."""
    own = dict(options.backend_options)
    return tuple(own.get("start_nodes") or ()), tuple(own.get("end_nodes") or ())


def _boundary(model: bytes | Path, cut: Cut) -> tuple[list[str], list[str]]:
    """The cut's input and output tensors: what the start nodes read (weights aside) and what the
    end nodes make; a node the model lacks is refused with the field and index that name it."""
    graph = load_model(model, data=False).graph
    nodes = {n.name: n for n in graph.node if n.name}
    constants = {i.name for i in graph.initializer}
    inputs = [i.name for i in graph.input if i.name not in constants]
    for key, names in zip(("start_nodes", "end_nodes"), cut, strict=True):
        for i, name in enumerate(names):
            if name not in nodes:
                raise LoopError(f"the base has no ONNX node named '{name}'", field=f"{key}[{i}]")
    starts = [t for n in cut[0] for t in nodes[n].input if t and t not in constants] or inputs
    for i, name in enumerate(cut[0]):
        outside = [t for t in nodes[name].input if t and t not in constants and t not in inputs]
        if outside:
            raise LoopError(
                f"start node '{name}' reads '{outside[0]}', which is not a model input: loop feeds the model's "
                "inputs and does not run a host-side head before the cut",
                field=f"start_nodes[{i}]",
            )
    ends = [t for n in cut[1] for t in nodes[n].output if t] or [o.name for o in graph.output]
    return list(dict.fromkeys(starts)), list(dict.fromkeys(ends))


def check_cut(model: bytes | Path, cut: Cut) -> None:
    """Refuse a cut the model cannot make (a :class:`LoopError` whose field names the node)."""
    if any(cut):
        _boundary(model, cut)


def cut_model(model: bytes | Path, cut: Cut) -> bytes | Path:
    """``model`` between the cut's start and end nodes (the whole model when there is no cut)."""
    if not any(cut):
        return model
    import onnx
    from onnx.utils import Extractor

    starts, ends = _boundary(model, cut)
    # Extractor wants every tensor's value info, as onnx.utils.extract_model gives it: shapes inferred first
    inferred = onnx.shape_inference.infer_shapes(load_model(model))
    extracted = Extractor(inferred).extract_model(starts, ends)
    return bytes(extracted.SerializeToString())

"""The float reference of a large model, run in a child process: its session holds a copy of the
float weights (ONNX Runtime reads them into its own buffers), which the sweep's own process, which
holds every result, must not (issue 49: the sweep under half its model's weights).

Spawned as ``python -m loop.flow.float_child FOLDER PARENT_PID`` by
:func:`loop.flow.evaluate.float_outputs`; inputs and outputs are plain files in its 0700 folder
(``model.path``, the frames as ``.npy``/``.npz``; ``outputs.npz`` and ``names.json`` back), never
pickles.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from loop.author import frames as frames_mod
from loop.flow import supervise

NAMES, OUTPUTS = "names.json", "outputs.npz"


def write_inputs(folder: Path, model: Path, inputs: frames_mod.Frames) -> None:
    (folder / "model.path").write_text(str(model.resolve()))
    frames_mod.save(inputs, folder, "inputs")


def read_outputs(folder: Path) -> tuple[tuple[str, ...], list[list[np.ndarray]]]:
    """The output names and each frame's outputs, as the child left them."""
    names, frames = json.loads((folder / NAMES).read_text())
    with np.load(folder / OUTPUTS, allow_pickle=False) as stored:
        raw = [[stored[f"{j}.{k}"] for k in range(len(names))] for j in range(frames)]
    return tuple(names), raw


def outputs(model: bytes | Path, inputs: frames_mod.Frames) -> tuple[tuple[str, ...], list[list[np.ndarray]]]:
    """The float model's output names and each frame's outputs, run here."""
    from loop.core.sessions import session

    run = session(model, optimize="all")
    feeds = [i.name for i in run.get_inputs()]
    raw = [run.run(None, frames_mod.feed(inputs, j, feeds)) for j in range(frames_mod.count(inputs))]
    return tuple(o.name for o in run.get_outputs()), raw


def main(folder: str, parent: int) -> None:
    supervise.as_child(parent)
    work = Path(folder)
    names, raw = outputs(Path((work / "model.path").read_text()), frames_mod.saved(work, "inputs"))
    np.savez(work / OUTPUTS, **{f"{j}.{k}": np.asarray(o) for j, outs in enumerate(raw) for k, o in enumerate(outs)})  # type: ignore[arg-type]
    (work / NAMES).write_text(json.dumps([names, len(raw)]))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))

"""The hailo backend's own ``compile:`` keys, and the common keys it refuses.

A module of its own so that the sweep file's schema can read them without the Dataflow
Compiler (nothing here imports it) and without the compile code around it.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from loop.core.options import BackendOptions
from loop.core.registry import DEFAULT_CHIP
from loop.core.vocab import CompileOptions

NodeNames = Annotated[list[Annotated[str, Field(min_length=1, max_length=1024)]], Field(min_length=1, max_length=64)]


class HailoOptions(BackendOptions):
    """Keys passed to the Dataflow Compiler; None leaves each to the compiler's default."""

    hw_arch: Literal["hailo8", "hailo8l", "hailo8r", "hailo10h", "hailo15h", "hailo15m"] | None = Field(
        None, description="target chip (hailo10h)"
    )
    optimization_level: int | None = Field(None, ge=0, le=4, description="DFC optimization level")
    compression_level: int | None = Field(None, ge=0, le=5, description="DFC compression level")
    model_script: Annotated[list[Annotated[str, Field(max_length=4096)]], Field(max_length=1000)] | None = Field(
        None, description="model script lines, verbatim"
    )
    net_name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_]{1,64}$")] | None = Field(None, description="network name")
    calibration_batch_size: int | None = Field(None, ge=1, le=4096, description="calibration batch")
    # Off unless asked: finetune retrains kernels against the float model, so it would move every
    # kernel a perturbation did not touch (hailo_model_zoo's scripts that enable bias correction
    # all write it disabled).
    finetune: bool = Field(False, description="run the DFC's finetune (distillation) pass")
    # Written into every model script, so the same sweep audits alike on two DFC versions.
    equalization: Literal["enabled", "disabled"] = Field(
        "enabled", description="the DFC's equalization (rescales neighbouring kernels), written into the script"
    )
    # Set through the sweep file's `hailo:` section: where the network on the device starts and ends.
    start_nodes: NodeNames | None = Field(None, description="ONNX nodes the compiled network starts at")
    end_nodes: NodeNames | None = Field(
        None, description="ONNX nodes the compiled network ends at (a post-processing tail stays on the host)"
    )
    # The keys the sweep file's `hailo:` section sets (they travel as these compile keys).
    section_keys: ClassVar[tuple[str, ...]] = ("start_nodes", "end_nodes", "equalization")


# Common keys the hailo backend would silently ignore: refused instead, with why (write model_script lines).
REFUSED = {
    "io": "a HEF's frames are what the Dataflow Compiler made them; HailoRT picks float32 per stream at run time",
    "calibration_method": "the Dataflow Compiler has no verified model-script equivalent",
    "per_channel": "the Dataflow Compiler has no verified model-script equivalent",
    "int32_bias_weight_adjust": "an ONNX Runtime quantizer option; the Dataflow Compiler has no such step",
    "bias_correction_guard": "loop's guard on its own bias correction; the Dataflow Compiler's has none",
}


def target_arch(options: CompileOptions) -> str:
    """The chip a compile targets: ``hw_arch``, else the backend's default."""
    return HailoOptions.of(options).hw_arch or DEFAULT_CHIP

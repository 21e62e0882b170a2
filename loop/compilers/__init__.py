"""Stages 2 and 3: a float ONNX model in, a quantized model, its layer prints and a deployable
artifact out.

Owns the ``Compiler`` interface (``base``) and its backends: ONNX Runtime's QDQ quantization with
loop's calibration and layer-by-layer bias correction (bias/), and Hailo's Dataflow Compiler;
each declares its own ``compile:`` keys (``options_model``), which the sweep file's schema adds.
May import ``core``, ``spec``, ``judge`` (layer structure and hashing of prints), ``store`` (to
spill large artifacts) and ``hailort``; never a device.
"""

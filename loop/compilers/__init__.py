"""Compilers: a float ONNX model in, a quantized model and a deployable artifact out."""

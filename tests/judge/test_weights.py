"""A model's weights counted from shapes: which tensors count, and their bytes at each width."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from authored import weighed_model
from onnx import TensorProto, helper, numpy_helper

from loop.core.errors import LoopError
from loop.judge.weights import Weights, at_bits, bits_of, weigh


def test_a_small_real_model_is_weighed_exactly() -> None:
    model = weighed_model()
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {"x": np.ones((1, 3, 8, 8), np.float32)})
    assert out.shape == (1, 8, 6, 6)  # a model ONNX Runtime runs, not a bag of tensors
    weights = weigh(model)
    assert weights.by_type == {"float16": 6, "float32": 216 + 8 + 1, "int8": 8 + 1}
    assert weights.count == 240
    assert weights.stored_bytes == 225 * 4 + 6 * 2 + 9
    assert [at_bits(239, b) for b in (16, 8, 4)] == [478, 239, 120]  # int4: two to a byte, the odd one rounded up


def test_an_integer_tensor_counts_only_where_a_quantized_op_reads_it() -> None:
    model = weighed_model()
    model.graph.node[1].input[0] = "q_zero"  # now the zero point is what is dequantized, the kernel is not
    del model.graph.node[1].input[2]
    assert weigh(model).by_type["int8"] == 1


def test_subgraphs_and_constant_lists_are_weighed() -> None:
    inner = helper.make_graph(
        [helper.make_node("Constant", [], ["k"], value_floats=[1.0, 2.0, 3.0])],
        "then",
        [],
        [helper.make_tensor_value_info("k", TensorProto.FLOAT, [3])],
        [numpy_helper.from_array(np.zeros((4, 4), np.float16), "inner_w")],
    )
    node = helper.make_node("If", ["cond"], ["k"], then_branch=inner, else_branch=inner)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])], [])
    assert weigh(helper.make_model(graph)) == Weights({"float16": 32, "float32": 6})


def test_sub_byte_types_are_stored_packed() -> None:
    four = helper.make_tensor("w4", TensorProto.INT4, [3], [1, 2, 3])
    graph = helper.make_graph([helper.make_node("DequantizeLinear", ["w4", "s"], ["y"])], "g", [], [], [four])
    graph.initializer.append(numpy_helper.from_array(np.array(0.1, np.float32), "s"))
    weights = weigh(helper.make_model(graph))
    assert weights.by_type == {"float32": 1, "int4": 3} and weights.stored_bytes == 4 + 2


def test_a_negative_dimension_is_refused() -> None:
    tensor = TensorProto(name="bad", dims=[-2, 3], data_type=TensorProto.FLOAT)
    with pytest.raises(LoopError, match="tensor 'bad' has a negative dimension"):
        weigh(helper.make_model(helper.make_graph([], "g", [], [], [tensor])))


def _stored(model: onnx.ModelProto) -> int:
    """Bytes of every tensor the file stores, less int64 ones (shapes and axes: never weights)."""
    total = 0
    for t in model.graph.initializer:
        if t.data_type != TensorProto.INT64:
            total += at_bits(int(np.prod(t.dims, dtype=np.int64)), bits_of(t.data_type))
    return total


def _matmul_model(k: int = 64, n: int = 32) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.normal(0, 0.2, (k, n)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="fc")],
        "fc",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _onnxruntime_forms(tmp_path) -> dict[str, onnx.ModelProto]:
    """One model in each stored form ONNX Runtime's tools write: QDQ, QLinear operators,
    integer operators, MatMulNBits' packed 4 bits; and loop's own artifact (QLinearConv)."""
    from authored import patterns_model
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_dynamic, quantize_static
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    from loop.compilers.onnxruntime import OnnxRuntimeCompiler
    from loop.core.vocab import CompileOptions

    classifier = patterns_model()
    frames = np.random.default_rng(1).random((4, 3, 16, 16), dtype=np.float32)
    compiler = OnnxRuntimeCompiler()
    quantized = compiler.optimize(classifier.SerializeToString(), frames, CompileOptions())
    forms = {"qdq": onnx.load_from_string(quantized.data)}
    forms["artifact"] = onnx.load_from_string(compiler.compile(quantized, CompileOptions()).data)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.left = [{classifier.graph.input[0].name: f[None]} for f in frames]

        def get_next(self) -> dict | None:
            return self.left.pop() if self.left else None

    onnx.save(classifier, str(tmp_path / "float.onnx"))
    quantize_static(
        str(tmp_path / "float.onnx"), str(tmp_path / "qop.onnx"), Reader(), quant_format=QuantFormat.QOperator
    )
    forms["qlinear"] = onnx.load(str(tmp_path / "qop.onnx"))
    quantize_dynamic(str(tmp_path / "float.onnx"), str(tmp_path / "dyn.onnx"), op_types_to_quantize=["Conv", "MatMul"])
    forms["integer"] = onnx.load(str(tmp_path / "dyn.onnx"))
    nbits = MatMulNBitsQuantizer(_matmul_model(), block_size=32, is_symmetric=False)
    nbits.process()
    forms["matmulnbits"] = nbits.model.model
    return forms


def test_every_stored_form_is_weighed_as_the_file_stores_it(tmp_path) -> None:
    forms = _onnxruntime_forms(tmp_path)
    ops = {name: {n.op_type for n in m.graph.node} for name, m in forms.items()}
    assert "QLinearConv" in ops["artifact"] and "QLinearConv" in ops["qlinear"]
    assert ops["integer"] & {"ConvInteger", "MatMulInteger"} and "MatMulNBits" in ops["matmulnbits"]
    for name, model in forms.items():
        assert weigh(model).stored_bytes == _stored(model), name
    packed = weigh(forms["matmulnbits"])
    assert packed.by_type["uint4"] >= 64 * 32  # every weight, counted at 4 bits, not as bytes

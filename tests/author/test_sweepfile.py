from pathlib import Path

import pytest

from loop.author.perturb import ForceRange, ScaleWeights
from loop.author.sweepfile import parse
from loop.core.errors import LoopError

GOOD = """\
sweep: s
base: tiny.yaml
variants:
  - name: base
  - name: w
    perturb:
      - {op: scale_weights, layer: conv1, factor: 2}
  - name: r
    perturb:
      - {op: force_range_out, layer: conv1, range: [0, 4]}
"""


def test_minimal_sweep_has_defaults(write_sweep):
    spec = parse(write_sweep(GOOD))
    assert spec.backend == "onnxruntime" and spec.devices == ("onnxruntime",)
    assert spec.calibration.count == 64 and spec.inputs.count == 8
    assert spec.compile.bias_correction is True and spec.compile.io == "uint8"
    assert spec.measure.depth == (1,)
    assert spec.variants[1].ops == (ScaleWeights(layer="conv1", factor=2.0),)
    assert spec.variants[2].ops == (ForceRange(op="force_range_out", layer="conv1", range=[0.0, 4.0]),)


def test_measure_and_compile_overrides(write_sweep):
    spec = parse(
        write_sweep(
            GOOD.replace(
                "variants:", "compile: {bias_correction: false}\nmeasure: {depth: [1, 4], frames: 50}\nvariants:"
            )
        )
    )
    assert spec.compile.bias_correction is False
    assert spec.measure.depth == (1, 4) and spec.measure.frames == 50


def _error(write_sweep, text: str) -> LoopError:
    with pytest.raises(LoopError) as info:
        parse(write_sweep(text))
    return info.value


@pytest.mark.parametrize(
    "text, line, field, words",
    [
        (GOOD.replace("scale_weights", "scale_wieghts"), 7, "variants[1].perturb[0].op", "unknown op 'scale_wieghts'"),
        (
            GOOD.replace("layer: conv1, factor", "layer: conv9, factor"),
            7,
            "variants[1].perturb[0].layer",
            "unknown layer 'conv9'",
        ),
        (GOOD.replace("name: r", "name: w"), 8, "variants[2].name", "duplicate variant name 'w'"),
        (GOOD.replace("[0, 4]", "[4, 0]"), 10, "variants[2].perturb[0].range", "inverted range"),
        (GOOD.replace("base: tiny.yaml", "base: missing.onnx"), 2, "base", "not found"),
        (GOOD.replace("sweep: s\n", ""), 1, "sweep", "missing required key 'sweep'"),
        (GOOD + "colour: red\n", 11, "colour", "unknown key 'colour'"),
        (GOOD.replace("factor: 2", "factor: big"), 7, "variants[1].perturb[0].factor", "should be a valid number"),
        (GOOD.replace("variants:", "measure: {depth: 0}\nvariants:"), 3, "measure.depth", "greater than or equal to 1"),
        (
            GOOD.replace("- name: base", "- name: base\n    perturb: [{op: calibration, count: 0}]"),
            5,
            "variants[0].perturb[0].count",
            "greater than or equal to 1",
        ),
    ],
)
def test_bad_sweep_names_file_line_field(write_sweep, text, line, field, words):
    err = _error(write_sweep, text)
    assert err.file and err.file.endswith("sweep.yaml")
    assert err.line == line
    assert err.field == field
    assert words in err.message
    assert str(err).startswith(f"{err.file}:{line}: {field}: ")


def test_malformed_yaml_names_line(write_sweep):
    err = _error(write_sweep, "sweep: s\nbase: [unclosed\nvariants: []\n")
    assert "malformed YAML" in err.message and err.line == 3


def test_unreadable_onnx_is_a_user_error(write_sweep, tmp_path: Path):
    (tmp_path / "broken.onnx").write_bytes(b"not a protobuf at all")
    err = _error(write_sweep, GOOD.replace("tiny.yaml", "broken.onnx"))
    assert "unreadable ONNX model" in err.message and err.line == 2 and err.field == "base"


def test_layers_are_onnx_node_names(write_sweep, exported_onnx):
    text = GOOD.replace("tiny.yaml", exported_onnx.name).replace("conv1", "/features/0/Conv")
    spec = parse(write_sweep(text))
    assert spec.variants[1].ops[0].layer == "/features/0/Conv"


def test_variant_expect_is_parsed(write_sweep):
    spec = parse(write_sweep(GOOD.replace("  - name: r\n", "  - name: r\n    expect: {allow: ['conv1:bias']}\n")))
    assert spec.variants[2].expect.allow[0].layer == "conv1"
    err = _error(write_sweep, GOOD.replace("  - name: r\n", "  - name: r\n    expect: {allow: ['conv1']}\n"))
    assert err.field == "variants[2].expect" and err.line == 9


@pytest.mark.parametrize(
    "text, line, field, words",
    [
        (GOOD.replace("factor: 2", "factor: .nan"), 7, "variants[1].perturb[0].factor", "finite"),
        (GOOD.replace("[0, 4]", "[0, .inf]"), 10, "variants[2].perturb[0].range[1]", "finite"),
        (
            GOOD.replace("variants:", "params: {height: 0}\nvariants:"),
            4,
            "input.shape",
            "positive",
        ),  # the recipe's line
        (GOOD.replace("  - name: base\n", "  - name: ''\n"), 4, "variants[0].name", "at least 1 character"),
        (GOOD.replace("variants:", "calibration: {path: frames.npz}\nvariants:"), 3, "calibration.path", ".npz"),
        (GOOD.replace("variants:", "inputs: {path: wrong.npy}\nvariants:"), 3, "inputs.path", "shape"),
    ],
)
def test_bad_values_are_caught_at_parse(write_sweep, tmp_path, text, line, field, words):
    import numpy as np

    np.savez(tmp_path / "frames.npz", a=np.zeros((2, 3, 8, 8), np.float32))
    np.save(tmp_path / "wrong.npy", np.zeros((2, 3, 4, 4), np.float32))
    err = _error(write_sweep, text)
    assert err.line == line and err.field == field and words in err.message, str(err)


def test_duplicate_node_names_are_refused(write_sweep, tmp_path: Path):
    import onnx
    from authored import exported_classifier

    model = exported_classifier()
    model.graph.node[2].name = model.graph.node[0].name
    onnx.save(model, str(tmp_path / "dup.onnx"))
    err = _error(write_sweep, GOOD.replace("tiny.yaml", "dup.onnx").replace("conv1", "/features/0/Conv"))
    assert "used by more than one node" in err.message and err.field == "base"


def test_devices_may_be_one_name(write_sweep):
    assert parse(write_sweep(GOOD.replace("variants:", "devices: onnxruntime\nvariants:"))).devices == ("onnxruntime",)


def test_measure_noise_settings(write_sweep):
    from loop.author import sweepfile as spec_mod

    parsed = spec_mod.parse(
        write_sweep(
            GOOD.replace(
                "variants:",
                "measure: {min_duration_s: 0.5, target_ci_pct: 2, max_duration_s: 30, host_busy_pct: 25}\nvariants:",
            )
        )
    )
    m = parsed.measure
    assert (m.min_duration_s, m.target_ci_pct, m.max_duration_s, m.host_busy_pct) == (0.5, 2.0, 30.0, 25.0)
    default = spec_mod.MeasureSpec()
    assert (default.min_duration_s, default.repeats, default.target_ci_pct, default.host_busy_pct) == (
        1.0,
        5,
        None,
        10.0,
    )
    with pytest.raises(LoopError, match="target_ci_pct"):
        spec_mod.parse(write_sweep(GOOD.replace("variants:", "measure: {target_ci_pct: 0}\nvariants:")))
    with pytest.raises(LoopError, match="min_duration_s"):
        spec_mod.parse(write_sweep(GOOD.replace("variants:", "measure: {min_duration_s: fast}\nvariants:")))


def test_the_compiler_class_says_which_keys_it_refuses(write_sweep, monkeypatch):
    """Refused compile keys are the compiler's to declare (read through the registry)."""
    from loop.compilers.onnxruntime import OnnxRuntimeCompiler

    path = write_sweep(GOOD.replace("variants:", "compile: {per_channel: false}\nvariants:"))
    assert parse(path).compile.per_channel is False
    monkeypatch.setattr(OnnxRuntimeCompiler, "refused_compile_keys", {"per_channel": "a stand-in reason"})
    err = _error(write_sweep, GOOD.replace("variants:", "compile: {per_channel: false}\nvariants:"))
    assert err.field == "compile.per_channel" and err.line == 3
    assert "ignored by the onnxruntime backend (a stand-in reason)" in err.message


SEED_OVER_FILE = GOOD.replace("variants:", "calibration: {path: calib.npy, seed: 5}\nvariants:") + (
    "  - name: s\n    perturb:\n      - {op: calibration, seed: 3}\n"
    "  - name: sub\n    perturb:\n      - {op: calibration, count: 2, seed: 3}\n"
)


def test_a_seed_over_a_frame_file_is_said_to_change_only_the_order(write_sweep, tmp_path: Path):
    import numpy as np

    from loop.author.author import make_frames
    from loop.author.sweepfile import SweepFileWarning

    np.save(tmp_path / "calib.npy", np.random.default_rng(0).random((4, 3, 8, 8), np.float32))
    path = write_sweep(SEED_OVER_FILE)
    with pytest.warns(SweepFileWarning) as said:
        spec = parse(path)
    lines = [str(w.message) for w in said]
    tail = (
        "the seed does not change the frames read from calib.npy: all 4 of them are used whatever the seed, which "
        "only reorders them (minmax calibration ignores the order); it draws which frames are used only when "
    )
    assert lines == [
        f"{path}:3: calibration.seed: {tail}calibration.count is below 4",
        f"{path}:14: variants[3].perturb[0].seed: {tail}variants[3].perturb[0].count is below 4",
    ]
    # what the line says: the same frames in another order (the subset variant, count 2, is not warned of)
    seeded = make_frames(spec.calibration, (1, 3, 8, 8), tmp_path)
    plain = make_frames(spec.calibration.model_copy(update={"seed": 0}), (1, 3, 8, 8), tmp_path)
    assert not np.array_equal(seeded, plain) and np.array_equal(np.sort(seeded, 0), np.sort(plain, 0))


def test_a_hailo_section_on_another_backend_is_refused_at_its_line(write_sweep):
    error = _error(write_sweep, GOOD.replace("variants:", "hailo: {start_nodes: [conv1]}\nvariants:"))
    assert error.line == 3 and error.field == "hailo" and "read by the hailo backend only" in str(error)


def test_the_largest_seed_parses(write_sweep):
    """The scoring frames are seeded with the sweep's seed + 1, past the file's own bound when
    the sweep's is the largest it accepts: still a sweep, not a traceback."""
    spec = parse(write_sweep(GOOD.replace("variants:", "seed: 4294967295\nvariants:")))
    assert (spec.calibration.seed, spec.inputs.seed) == (2**32 - 1, 2**32)


def test_a_list_field_takes_a_reference_to_a_stored_array(write_sweep, tmp_path: Path):
    import numpy as np

    from loop.core.arrays import npy_bytes, ref_of

    a = np.array([0.0, 4.0], np.float32)
    sha = ref_of(a)["array"]
    (tmp_path / "r.npy").write_bytes(npy_bytes(a))
    text = GOOD.replace("range: [0, 4]", f"range: {{array: {sha}, path: r.npy, shape: [2]}}")
    op = parse(write_sweep(text)).variants[2].ops[0]
    assert op == ForceRange(op="force_range_out", layer="conv1", range=[0.0, 4.0])  # the numbers it holds
    assert op.record()["range"] == {"array": sha, "dtype": "float32", "shape": [2]} and list(op.arrays()) == [sha]
    (tmp_path / "r.npy").write_bytes(npy_bytes(a * 2))  # swapped under its name
    err = _error(write_sweep, text)
    assert err.line == 10 and err.field == "variants[2].perturb[0].range" and "does not hold array" in str(err)
    err = _error(
        write_sweep, text.replace("force_range_out, layer: conv1, range:", "scale_weights, layer: conv1, factor:")
    )
    assert err.field == "variants[2].perturb[0].factor"  # a field that takes no array refuses one

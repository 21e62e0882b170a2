"""A folder of hostile sweep files (issue 9): each is refused by `loop sweep` with exit 2 and one
line, quickly, in bounded memory, and an existing runs folder stays byte-identical."""

from __future__ import annotations

import hashlib
import os
import resource
import time
from pathlib import Path

import pytest
from authored import TWO_CONV_RECIPE
from click.testing import CliRunner

from loop.cli import main

HEAD = "sweep: h\nbase: tiny.yaml\n"
OK = "variants:\n  - name: base\n"


def _op(op: str) -> str:
    return f"{HEAD}variants:\n  - name: v\n    perturb: [{op}]\n"


def _recipe(layers: str) -> str:
    return TWO_CONV_RECIPE.split("layers:")[0] + "layers:" + layers


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)

# name -> (sweep file content, words the one line must contain)
CASES: dict[str, tuple[bytes | str, str]] = {
    "binary": (bytes(range(256)) * 8, "not UTF-8"),
    "latin1": ("sweep: caf\xe9\n".encode("latin-1") + (HEAD + OK).encode(), "not UTF-8"),
    "nul": ("sweep: h\x00\n", "NUL"),
    "mapping_key": ("? [a, b]\n: 1\n" + HEAD + OK, "key must be a plain value"),
    "devices_5": (HEAD + "devices: 5\n" + OK, "devices"),
    "recipe_layers_5": ("sweep: h\nbase: layers5.yaml\n" + OK, "layers"),
    "count_1e26": (HEAD + "calibration: {count: 1e26}\n" + OK, "calibration.count"),
    "count_1e26_float": (HEAD + "calibration: {count: 1.0e+26}\n" + OK, "calibration.count"),
    "params_huge": (HEAD + "params: {height: 100000, width: 100000}\n" + OK, "GiB"),
    "noise_std_neg": (_op("{op: add_weight_noise, layer: conv1, std: -1}"), "std"),
    "noise_seed_neg": (_op("{op: add_weight_noise, layer: conv1, std: 1, seed: -1}"), "seed"),
    "calib_op_seed_neg": (_op("{op: calibration, seed: -5}"), "seed"),
    "calibration_seed_neg": (HEAD + "calibration: {seed: -1}\n" + OK, "calibration.seed"),
    "timeout_neg": (HEAD + "compile: {timeout_s: -1}\n" + OK, "compile.timeout_s"),
    "timeout_nan": (HEAD + "compile: {timeout_s: .nan}\n" + OK, "finite"),
    "duration_inf": (HEAD + "measure: {duration_s: .inf}\n" + OK, "finite"),
    "recipe_kernel_0": ("sweep: h\nbase: kernel0.yaml\n" + OK, "kernel"),
    "compile_threads_neg": (HEAD + "compile: {threads: -3}\n" + OK, "compile.threads"),
    "measure_threads_neg": (HEAD + "measure: {threads: -3}\n" + OK, "measure.threads"),
    "backend_hailo": (HEAD + "backend: hailo\n" + OK, "cannot compile here"),
    "devices_hailort": (HEAD + "devices: [hailort]\n" + OK, "cannot run here"),
    "alias_bomb": (BOMB, "aliases"),
    "many_aliases": ("x: &x 1\n" + "".join(f"k{i}: *x\n" for i in range(80)), "aliases"),
    "dev_zero": ("sweep: h\nbase: /dev/zero\n" + OK, "not a regular file"),
    "fifo_base": ("sweep: h\nbase: fifo.onnx\n" + OK, "not a regular file"),
    "calib_dev_zero": (HEAD + "calibration: {path: /dev/zero}\n" + OK, "not a regular file"),
    "empty": ("", "a sweep file is a mapping"),
    "comment_only": ("# nothing\n", "a sweep file is a mapping"),
    "top_list": ("- a\n- b\n", "a sweep file is a mapping"),
    "top_scalar": ("hello\n", "a sweep file is a mapping"),
    "unknown_top": (HEAD + "colour: red\n" + OK, "unknown key 'colour'"),
    "int_key": (HEAD + "1: red\n" + OK, "keys should be strings"),
    "unknown_variant_key": (HEAD + "variants:\n  - {name: a, colour: red}\n", "unknown key 'colour'"),
    "unknown_op_field": (_op("{op: scale_weights, layer: conv1, factor: 2, by: 3}"), "unknown key 'by'"),
    "unknown_op": (_op("{op: melt, layer: conv1}"), "unknown op 'melt'"),
    "missing_op": (_op("{layer: conv1}"), "'op'"),
    "op_not_mapping": (_op("5"), "perturb[0]"),
    "perturb_mapping": (HEAD + "variants:\n  - {name: a, perturb: {op: calibration}}\n", "perturb"),
    "missing_variants": (HEAD, "missing required key 'variants'"),
    "variants_empty": (HEAD + "variants: []\n", "variants"),
    "variants_mapping": (HEAD + "variants: {a: 1}\n", "variants"),
    "variant_no_name": (HEAD + "variants:\n  - perturb: []\n", "missing required key 'name'"),
    "variant_name_list": (HEAD + "variants:\n  - name: [a]\n", "name"),
    "variant_name_null": (HEAD + "variants:\n  - name: null\n", "name"),
    "variant_name_long": (HEAD + f"variants:\n  - name: {'n' * 5000}\n", "at most 256"),
    "duplicate_variant": (HEAD + "variants:\n  - name: a\n  - name: a\n", "duplicate variant name"),
    "duplicate_key": (HEAD + "seed: 1\nseed: 2\n" + OK, "duplicate key 'seed'"),
    "deep_nesting": ("sweep: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper"),
    "deep_mapping": ("sweep:" + "".join(f"\n{' ' * (2 * i + 2)}k{i}:" for i in range(200)) + " 1\n", "nested deeper"),
    "huge_file": (HEAD + OK + "#" * (2 << 20) + "\n", "bytes"),
    "too_many_variants": (HEAD + "variants:\n" + "  - {name: v}\n" * 10_001, "variants"),
    "seed_neg": (HEAD + "seed: -1\n" + OK, "seed"),
    "seed_huge": (HEAD + f"seed: {2**70}\n" + OK, "seed"),
    "seed_string": (HEAD + "seed: '0'\n" + OK, "seed"),
    "seed_bool": (HEAD + "seed: true\n" + OK, "seed"),
    "seed_date": (HEAD + "seed: 2020-01-01\n" + OK, "seed"),
    "frames_0": (HEAD + "measure: {frames: 0}\n" + OK, "measure.frames"),
    "depth_empty": (HEAD + "measure: {depth: []}\n" + OK, "measure.depth"),
    "depth_huge": (HEAD + "measure: {depth: 1000000000}\n" + OK, "measure.depth"),
    "warmup_neg": (HEAD + "measure: {warmup: -1}\n" + OK, "measure.warmup"),
    "batch_negative": (HEAD + "measure: {batch_size: -1}\n" + OK, "measure.batch_size"),  # 0 is the device default
    "measure_scalar": (HEAD + "measure: 5\n" + OK, "measure"),
    "compile_list": (HEAD + "compile: [a]\n" + OK, "compile"),
    "io_int16": (HEAD + "compile: {io: int16}\n" + OK, "compile.io"),
    "method_magic": (HEAD + "compile: {calibration_method: magic}\n" + OK, "calibration_method"),
    "bins_1": (HEAD + "compile: {calibration_bins: 1}\n" + OK, "calibration_bins"),
    "bias_yes": (HEAD + "compile: {bias_correction: 'yes'}\n" + OK, "bias_correction"),
    "hailo_key_on_ort": (HEAD + "compile: {hw_arch: hailo8}\n" + OK, "backend hailo only"),
    "range_short": (_op("{op: force_range_out, layer: conv1, range: [0]}"), "range"),
    "range_inverted": (_op("{op: force_range_out, layer: conv1, range: [4, 0]}"), "inverted"),
    "range_nan": (_op("{op: force_range_out, layer: conv1, range: [0, .nan]}"), "finite"),
    "factor_inf": (_op("{op: scale_weights, layer: conv1, factor: .inf}"), "finite"),
    "layer_unknown": (_op("{op: scale_weights, layer: conv9, factor: 2}"), "unknown layer"),
    "layer_int": (_op("{op: scale_weights, layer: 5, factor: 2}"), "layer"),
    "expect_bad_rule": (HEAD + "variants:\n  - {name: a, expect: {allow: [conv1]}}\n", "LAYER:WHAT"),
    "expect_unknown": (HEAD + "variants:\n  - {name: a, expect: {maybe: []}}\n", "unknown key 'maybe'"),
    "base_missing": ("sweep: h\nbase: missing.onnx\n" + OK, "not found"),
    "base_empty": ("sweep: h\nbase: ''\n" + OK, "base"),
    "base_directory": ("sweep: h\nbase: adir\n" + OK, "not a regular file"),
    "base_garbage_onnx": ("sweep: h\nbase: garbage.onnx\n" + OK, "unreadable ONNX"),
    "base_latin1_recipe": ("sweep: h\nbase: latin.yaml\n" + OK, "not UTF-8"),
    "calib_count_huge": (HEAD + "inputs: {count: 100000000}\n" + OK, "inputs.count"),
    "scale_neg": (HEAD + "calibration: {path: x.npy, scale: -1}\n" + OK, "calibration.scale"),
    "params_unknown": (HEAD + "params: {nope: 1}\n" + OK, "no parameter 'nope'"),
    "params_zero": (HEAD + "params: {height: 0}\n" + OK, "input shape"),
    "params_list": (HEAD + "params: {height: [1, 2]}\n" + OK, "params.height"),
    "recipe_kernel_99": ("sweep: h\nbase: kernel99.yaml\n" + OK, "kernel"),
    "recipe_out_huge": ("sweep: h\nbase: outhuge.yaml\n" + OK, "out"),
    "recipe_unknown_key": ("sweep: h\nbase: colour.yaml\n" + OK, "unknown key 'colour'"),
    "recipe_pool": ("sweep: h\nbase: pool.yaml\n" + OK, "op"),
    "malformed": ("sweep: h\nbase: [unclosed\n" + OK, "malformed YAML"),
    "tab_indent": ("sweep: h\n\tbase: x\n", "malformed YAML"),
    "python_tag": ("sweep: !!python/object/apply:os.system ['true']\nbase: tiny.yaml\n" + OK, "malformed YAML"),
    "merge_bomb": ("d: &d {k: 1}\n" + "".join(f"m{i}: {{<<: *d}}\n" for i in range(70)), "aliases"),
    "sweep_list": ("sweep: [1, 2]\nbase: tiny.yaml\n" + OK, "sweep"),
    "devices_empty": (HEAD + "devices: []\n" + OK, "devices"),
    "devices_unknown": (HEAD + "devices: [toaster]\n" + OK, "devices"),
}
RECIPES = {
    "layers5.yaml": _recipe(" 5\n"),
    "kernel0.yaml": _recipe("\n  - {name: conv1, op: conv, out: 8, kernel: 0}\n"),
    "kernel99.yaml": _recipe("\n  - {name: conv1, op: conv, out: 8, kernel: 99}\n"),
    "outhuge.yaml": _recipe("\n  - {name: conv1, op: conv, out: 10000000}\n"),
    "colour.yaml": _recipe("\n  - {name: conv1, op: conv, out: 8, colour: red}\n"),
    "pool.yaml": _recipe("\n  - {name: conv1, op: pool, out: 8}\n"),
}


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "hostile"
    folder.mkdir()
    (folder / "tiny.yaml").write_text(TWO_CONV_RECIPE)
    for name, text in RECIPES.items():
        (folder / name).write_text(text)
    (folder / "latin.yaml").write_bytes("name: caf\xe9\n".encode("latin-1"))
    (folder / "garbage.onnx").write_bytes(b"\x08\x07not a protobuf")
    (folder / "adir").mkdir()
    os.mkfifo(folder / "fifo.onnx")
    for name, (content, _) in CASES.items():
        data = content if isinstance(content, bytes) else content.encode()
        (folder / f"{name}.yaml").write_bytes(data)
    return folder


def _runs(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    (runs / "artifacts").mkdir(parents=True)
    (runs / "cache").mkdir()
    (runs / "ledger.sqlite").write_bytes(b"SQLite format 3\x00" + bytes(100))
    (runs / "artifacts" / "abc.onnx").write_bytes(b"artifact")
    return runs


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        st = path.lstat()
        h.update(f"{path.relative_to(folder)} {st.st_mode} {st.st_size} {st.st_mtime_ns}".encode())
        if path.is_file():
            h.update(path.read_bytes())
    return h.hexdigest()


@pytest.fixture
def no_hailo(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine without Hailo's software, whatever other tests put on sys.path."""
    from loop.compilers.hailo import HailoCompiler
    from loop.devices.hailo_emulator import HailoEmulatorDevice
    from loop.devices.hailort import HailoRTDevice

    for cls in (HailoCompiler, HailoRTDevice, HailoEmulatorDevice):
        monkeypatch.setattr(cls, "available", classmethod(lambda cls: (False, "not installed here")))


def test_every_hostile_file_is_one_line_and_exit_2(tmp_path: Path, no_hailo: None) -> None:
    assert len(CASES) >= 60
    folder, runs = _folder(tmp_path), _runs(tmp_path)
    before = _digest(runs)
    start = time.monotonic()
    failures = []
    for name, (_, words) in CASES.items():
        result = CliRunner().invoke(main, ["sweep", str(folder / f"{name}.yaml"), "--runs", str(runs), "--quiet"])
        lines = result.output.strip().splitlines()
        if os.environ.get("LOOP_SHOW_HOSTILE"):
            print(f"{name}: {result.output.strip().split('/hostile/')[-1]}")
        if result.exit_code != 2 or len(lines) != 1 or words not in lines[0] or not lines[0].startswith("loop: "):
            failures.append(f"{name}: exit {result.exit_code}: {result.output.strip()[:300]!r} {result.exception!r}")
    elapsed = time.monotonic() - start
    assert not failures, "\n".join(failures)
    assert elapsed < 20, f"{elapsed:.1f} s"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss < 2 * 1024 * 1024  # KiB: under 2 GB
    assert _digest(runs) == before


def test_a_non_utf8_file_name_is_named_in_one_line(tmp_path: Path) -> None:
    name = os.fsdecode(b"bad-\xff.yaml")
    (tmp_path / name).write_text(HEAD + "colour: red\n" + OK)
    (tmp_path / "tiny.yaml").write_text(TWO_CONV_RECIPE)
    result = CliRunner().invoke(main, ["sweep", str(tmp_path / name), "--runs", str(tmp_path / "runs")])
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and "bad-" in result.output
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "text",
    [
        'sweep: étude/三\nbase: tiny.yaml\nvariants:\n  - name: 変種 ✓\n  - name: "a/b c"\n'
        "    perturb: [{op: scale_weights, layer: conv1, factor: 1.5}]\n",
        "sweep: 7\nbase: tiny.yaml\nvariants: [{name: 0}, {name: '0 '}]\n",
        "\ufeffsweep: bom\r\nbase: tiny.yaml\r\nvariants:\r\n  - name: base\r\n",
    ],
)
def test_valid_odd_files_parse(tmp_path: Path, text: str) -> None:
    from loop.author.sweepfile import parse

    (tmp_path / "tiny.yaml").write_text(TWO_CONV_RECIPE)
    (tmp_path / "odd.yaml").write_text(text, encoding="utf-8")
    spec = parse(tmp_path / "odd.yaml")
    assert spec.variants and all(v.name for v in spec.variants)


def test_an_external_data_onnx_base_runs(tmp_path: Path) -> None:
    import onnx
    from authored import FAST_MEASURE, exported_classifier

    onnx.save(
        exported_classifier(),
        str(tmp_path / "ext.onnx"),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="ext.weights",
        size_threshold=0,
    )
    assert (tmp_path / "ext.weights").stat().st_size > 0
    (tmp_path / "s.yaml").write_text(
        f"sweep: ext\nbase: ext.onnx\ncalibration: {{count: 4}}\ninputs: {{count: 2}}\n"
        f"{FAST_MEASURE}\nvariants:\n  - name: base\n"
    )
    result = CliRunner().invoke(
        main, ["sweep", str(tmp_path / "s.yaml"), "--runs", str(tmp_path / "runs"), "--jobs", "1", "--quiet"]
    )
    assert result.exit_code == 0, result.output


def test_with_a_cluster_only_the_devices_must_be_here(tmp_path: Path, no_hailo: None) -> None:
    from loop.author.sweepfile import parse
    from loop.core.errors import LoopError

    (tmp_path / "tiny.yaml").write_text(TWO_CONV_RECIPE)
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + "backend: hailo\ndevices: [onnxruntime]\n" + OK)
    assert parse(path, check_backends=True, cluster=True).backend == "hailo"
    with pytest.raises(LoopError, match="cannot compile here"):
        parse(path, check_backends=True)
    path.write_text(HEAD + "backend: hailo\n" + OK)
    with pytest.raises(LoopError, match="device 'hailort' cannot run here"):
        parse(path, check_backends=True, cluster=True)


@pytest.mark.parametrize("location, words", [("fifo.weights", "not a regular file"), ("../out.weights", "outside")])
def test_external_data_must_be_a_regular_file_beside_the_model(tmp_path: Path, location: str, words: str) -> None:
    import onnx
    from authored import exported_classifier

    from loop.author.sweepfile import parse
    from loop.core.errors import LoopError

    folder = tmp_path / "m"
    folder.mkdir()
    onnx.save(
        exported_classifier(),
        str(folder / "ext.onnx"),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="ext.weights",
        size_threshold=0,
    )
    model = onnx.load(str(folder / "ext.onnx"), load_external_data=False)
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = location
    onnx.save(model, str(folder / "ext.onnx"))
    os.mkfifo(folder / "fifo.weights")
    (tmp_path / "out.weights").write_bytes((folder / "ext.weights").read_bytes())
    (folder / "s.yaml").write_text("sweep: e\nbase: ext.onnx\n" + OK)
    with pytest.raises(LoopError, match=words):
        parse(folder / "s.yaml")

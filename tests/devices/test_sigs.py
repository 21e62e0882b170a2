"""The .sigs parser and binder, exercised for real against the loopback library (not HailoRT)."""

from __future__ import annotations

import ctypes
import importlib.util
from pathlib import Path

import pytest

from loop.hailort.sigs import SigsError, bind, parse_line, parse_sigs


def test_parse_line_maps_types_to_ctypes() -> None:
    sig = parse_line("int f(const char* path, void** handle, size_t* n, uint64_t count, unsigned depth, double* t)")
    assert sig is not None
    assert sig.name == "f"
    assert sig.restype.ctype is ctypes.c_int
    assert [t.ctype for t in sig.argtypes] == [
        ctypes.c_char_p,
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.c_uint64,
        ctypes.c_uint,
        ctypes.POINTER(ctypes.c_double),
    ]
    assert sig.argnames == ("path", "handle", "n", "count", "depth", "t")


def test_parse_line_void_return_unnamed_args_and_comments() -> None:
    assert parse_line("   # only a comment") is None
    assert parse_line("") is None
    sig = parse_line("void g(void);  # trailing comment")
    assert sig is not None and sig.restype.ctype is None and sig.argtypes == ()
    sig = parse_line("size_t h(char*, int64 x, float)")
    assert sig is not None
    assert sig.restype.ctype is ctypes.c_size_t
    assert [t.ctype for t in sig.argtypes] == [ctypes.c_char_p, ctypes.c_int64, ctypes.c_float]
    assert sig.argnames == ("arg0", "x", "arg2")


def test_unknown_type_names_file_and_line() -> None:
    with pytest.raises(SigsError) as err:
        parse_sigs("int ok(int a)\n# comment\nint bad(struct thing* t)\n", "x.sigs")
    assert "x.sigs:3" in str(err.value)
    assert "unknown C type" in str(err.value)


def test_duplicate_and_malformed_declarations_are_refused() -> None:
    with pytest.raises(SigsError, match="declared more than once: f"):
        parse_sigs("int f(int a)\nint f(int b)\n")
    with pytest.raises(SigsError, match="not a C function declaration"):
        parse_sigs("this is not C\n")


def test_shim_sigs_declares_the_expected_abi(shim_sigs_path: Path) -> None:
    names = [s.name for s in parse_sigs(shim_sigs_path.read_text(), str(shim_sigs_path))]
    assert names == [
        "loop_hrt_abi_version",
        "loop_hrt_open",
        "loop_hrt_layout",
        "loop_hrt_hef_layout",
        "loop_hrt_hef_info",
        "loop_hrt_infer",
        "loop_hrt_pipelined",
        "loop_hrt_hw_latency",
        "loop_hrt_device_acquire",
        "loop_hrt_device_release",
        "loop_hrt_health",
        "loop_hrt_last_error",
        "loop_hrt_close",
    ]


def test_bind_resolves_every_symbol_of_the_loopback(loopback_shim_lib: Path, shim_sigs_path: Path) -> None:
    binding = bind(loopback_shim_lib, shim_sigs_path)
    assert set(binding.functions) == {s.name for s in parse_sigs(shim_sigs_path.read_text())}
    buf = ctypes.create_string_buffer(64)
    assert isinstance(binding.loop_hrt_last_error(buf, len(buf)), int)
    with pytest.raises(AttributeError, match="not declared"):
        _ = binding.loop_hrt_undeclared


def test_missing_symbol_is_named(loopback_shim_lib_missing_symbol: Path, shim_sigs_path: Path) -> None:
    with pytest.raises(SigsError) as err:
        bind(loopback_shim_lib_missing_symbol, shim_sigs_path)
    message = str(err.value)
    assert "loop_hrt_hw_latency" in message
    assert "loop_hrt_open" not in message


def test_unloadable_library_is_a_clear_error(tmp_path: Path, shim_sigs_path: Path) -> None:
    with pytest.raises(SigsError, match="cannot load library"):
        bind(tmp_path / "nope.so", shim_sigs_path)


def test_shim_folder_reexports_the_parser(shim_sigs_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("sigs_ctypes", shim_sigs_path.parent / "sigs_ctypes.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.bind is bind
    assert module.main([str(shim_sigs_path)]) == 2

"""The supervisor against real children that exit, crash, hang and talk: how each ended is a
value, a hung one goes with its whole group, data crosses as data, and a parent killed with
``kill -9`` leaves nothing behind. And it stays the only module of loop that starts a process.

The children are ``tests/supervised.py``; a spawned one imports it from this process's import
path (tests/ is on it only here), as a plugin's compiler would. No mocks, no timings beyond
generous deadlines: the machines these run on are shared.
"""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import supervised

from loop.core.leftovers import process_alive
from loop.flow import supervise

LOOP = Path(__file__).resolve().parents[2] / "loop"
GENEROUS_S = 60.0  # nothing here should take near this
Start = Callable[[dict[str, object]], supervise.Child]


@pytest.fixture(params=["fork", "spawn"])
def start(request: pytest.FixtureRequest, tmp_path: Path) -> Start:
    """A child told what to do through its folder, forked or spawned."""

    def run(what: dict[str, object]) -> supervise.Child:
        (tmp_path / "what.json").write_text(json.dumps(what))
        if request.param == "fork":
            return supervise.fork(lambda: supervised.behave(tmp_path), tmp_path)
        return supervise.spawn("supervised", str(tmp_path), folder=tmp_path)

    return run


def _gone(pid: int) -> bool:
    """Whether ``pid`` has ended (or is a zombie) within a generous deadline."""
    deadline = time.monotonic() + GENEROUS_S
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not process_alive(pid)


def _helper(folder: Path) -> int:
    """The helper a hanging child started, once its log names it (read as it grows: a child's
    tail is a failure's, and asks a running child for its stacks)."""
    log, deadline = folder / supervise.LOG, time.monotonic() + GENEROUS_S
    while "helper" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    return int(log.read_text().split("helper")[1].split()[0])


def test_a_non_zero_exit_is_its_code(start: Start) -> None:
    with start({"do": "exit"}) as child:
        code = child.finish(GENEROUS_S)
    assert code == 3 and code is not None and supervise.how_it_died(code) == "exit code 3"


def test_a_signal_is_its_code_and_its_stacks_are_in_its_log(start: Start, tmp_path: Path) -> None:
    with start({"do": "segv"}) as child:
        code = child.finish(GENEROUS_S)
        assert child.tail()  # the end of it (every thread's stacks may be longer than a tail)
    assert code == -signal.SIGSEGV and supervise.how_it_died(code) == "signal 11, SIGSEGV"
    log = (tmp_path / supervise.LOG).read_text()
    assert "Segmentation fault" in log and "in behave" in log  # faulthandler's, armed by as_child


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups")
def test_a_hang_past_its_timeout_goes_with_its_whole_group(start: Start, tmp_path: Path) -> None:
    with start({"do": "hang"}) as child:
        helper = _helper(tmp_path)
        assert os.getpgid(helper) == child.pid  # the helper is in the child's group
        assert child.finish(0.1) is None  # it hangs: any timeout is outlived
    assert _gone(child.pid) and _gone(helper)
    log = (tmp_path / supervise.LOG).read_text()
    assert "most recent call first" in log and "in behave" in log  # its stacks, asked for before the kill


def test_data_goes_in_and_comes_back_as_files(start: Start, tmp_path: Path) -> None:
    with start({"do": "add", "numbers": [1, 2, 3]}) as child:
        assert child.finish(GENEROUS_S) == 0
    assert json.loads((tmp_path / "sum.json").read_text()) == {"sum": 6}


def test_a_connected_child_answers_on_its_socket_and_goes_with_its_keeper() -> None:
    child, conn = supervise.connected("supervised")
    with conn, child:  # the child goes first: closing its socket first would let it exit on its own
        conn.send([1, 2, 3])
        assert conn.poll(GENEROUS_S) and conn.recv() == 6
        conn.send("helper")
        helper = conn.recv()
        assert child.keeper is not None and child.keeper.poll() is None
    assert child.poll() == -signal.SIGKILL and child.keeper.poll() is not None and _gone(helper)


def test_a_message_not_read_whole_ends_the_child_rather_than_leaving_it_mid_task() -> None:
    """A read that raises (a torn payload, a Ctrl-C) stops the connected child: the next task never
    reuses one whose answer to the last is still on its way."""
    box = supervise.Connected("supervised")
    conn = box.ensure()
    conn.send([1, 2, 3])

    def torn(_: object) -> int:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        box.receive(time.monotonic() + GENEROUS_S, torn)
    assert box.pid is None and box._child is None


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc for leftover processes")
def test_a_parent_killed_9_leaves_neither_child_nor_what_it_started() -> None:
    """The child dies by its parent-death signal; what it started, by its keeper (run by path,
    without site-packages, which must still find it)."""
    tests = str(Path(supervised.__file__).parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    sweep = subprocess.Popen([sys.executable, "-m", "supervised", "sweep"], stdout=subprocess.PIPE, env=env)
    assert sweep.stdout is not None
    pids = [int(p) for p in sweep.stdout.readline().split()]  # the child, its helper, its keeper
    sweep.kill()
    sweep.wait()
    sweep.stdout.close()
    assert len(pids) == 3 and all(_gone(pid) for pid in pids)


# ---- only the supervisor starts a process ---------------------------------------------------

OS_STARTS = {"fork", "forkpty", "system", "popen", "posix_spawn", "posix_spawnp"}  # and exec*, spawn*
SUBPROCESS_STARTS = {"Popen", "run", "call", "check_call", "check_output", "getoutput", "getstatusoutput"}
ANY_STARTS = {"Popen", "Process", "get_context", "get_reusable_executor", "ProcessPoolExecutor"}
# A device's own business, not loop's: each line says what it starts and why it may.
ALLOWED = {
    ("devices/test_double.py", "subprocess.Popen"),  # the spawn fault: a "vendor tool" the double starts on purpose
    ("devices/test_double.py", "python -c"),  # that tool, a sleep
    ("devices/hailortcli.py", "subprocess.run"),  # the vendor's CLI, run and waited on by the device
}


def _start_of(node: ast.AST) -> str | None:
    """What ``node`` names, if it can start a process: ``os.fork``, ``Popen``, ``multiprocessing``."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        module, name = node.value.id, node.attr
        if module == "os" and (name in OS_STARTS or name.startswith(("exec", "spawn"))):
            return f"os.{name}"
        if module == "subprocess" and name in SUBPROCESS_STARTS:
            return f"subprocess.{name}"
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    if name in ANY_STARTS:
        return name
    if isinstance(node, ast.Import | ast.ImportFrom):
        modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        if any(m.split(".")[0] == "multiprocessing" for m in modules):
            return "multiprocessing"
    if isinstance(node, ast.ImportFrom):
        starts = {"os": OS_STARTS, "subprocess": SUBPROCESS_STARTS}.get(node.module or "", set()) | ANY_STARTS
        if {a.name for a in node.names} & starts:
            return f"from {node.module} import ..."
    if isinstance(node, ast.List) and any(isinstance(e, ast.Constant) and e.value == "-c" for e in node.elts):
        return "python -c"  # Python source in a string
    return None


def process_starts(root: Path = LOOP) -> list[str]:
    """``path:line: what`` for everything under ``root`` that can start a process, outside the
    supervisor and what :data:`ALLOWED` lets a device do."""
    out = []
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root).as_posix()
        if where == "flow/supervise.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            what = _start_of(node)
            if what is not None and (where, what) not in ALLOWED:
                out.append(f"{where}:{getattr(node, 'lineno', 0)}: {what}")
    return out


def test_only_the_supervisor_starts_a_process() -> None:
    assert process_starts() == []


@pytest.mark.parametrize(
    "line",
    [
        "import subprocess\nsubprocess.Popen(['x'])",
        "from subprocess import Popen",
        "from subprocess import run",
        "from os import fork",
        "import os\nos.fork()",
        "import os\nos.execv('x', ['x'])",
        "from multiprocessing.connection import Connection",
        "import multiprocessing as mp\nmp.get_context('spawn')",
        "from concurrent.futures import ProcessPoolExecutor",
        "import sys\nCOMMAND = [sys.executable, '-c', 'import time']",
    ],
)
def test_a_process_started_elsewhere_is_caught(tmp_path: Path, line: str) -> None:
    (tmp_path / "flow").mkdir()
    (tmp_path / "flow" / "elsewhere.py").write_text(line + "\n")
    (tmp_path / "flow" / "supervise.py").write_text(line + "\n")  # the one place it may
    found = process_starts(tmp_path)
    assert len(found) >= 1 and all(f.startswith("flow/elsewhere.py:") for f in found), found

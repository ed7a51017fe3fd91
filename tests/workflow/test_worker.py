"""The warm worker (workflow/scripts/warm_worker.py): a script handed to it behaves like one run by a fresh
interpreter -- streams, exit status, tracebacks, working directory, environment, argv --
and a child whose job process is killed does not outlive it."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from helpers import REPO, warm_worker

worker = warm_worker()

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the warm worker needs fork")

SCRIPT = textwrap.dedent(f"""
    import os, sys, time
    sys.path.append({str(REPO / "workflow" / "scripts")!r})  # as Snakemake's preamble does for a local script
    from warm_worker import run_in_warm_worker

    run_in_warm_worker()
    mode = sys.argv[1]
    print("pid", os.getpid(), "in_worker", os.environ.get("DPCL_IN_WARM_WORKER"), "cwd", os.getcwd(),
          "token", os.environ.get("TEST_TOKEN"), "torch_loaded", "torch" in sys.modules, flush=True)
    print("to stderr", file=sys.stderr)
    if mode == "exit3":
        sys.exit(3)
    if mode == "raise":
        raise ValueError("boom in the script")
    if mode == "nap":
        time.sleep(float(sys.argv[2]))
    if mode == "sleep":
        open(sys.argv[2], "w").write(str(os.getpid()))
        time.sleep(120)
""")


@pytest.fixture
def short_tmp():
    """A short temporary folder: the warm worker's socket lives in $TMPDIR/dpcl-<uid>/ and a Unix socket's
    path is limited to about 100 characters (pytest's tmp_path under ``pytest -n`` is longer)."""
    d = Path(tempfile.mkdtemp(prefix="dpclt-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _starts(env) -> list[int]:
    """The pids of the warm processes started so far (their logs' "listening on" lines)."""
    logs = (Path(env["TMPDIR"]) / f"dpcl-{os.getuid()}").glob("*.log")
    return [
        int(line.split()[3])
        for log in logs
        for line in log.read_text().splitlines()
        if "listening on" in line
    ]


@pytest.fixture
def env(short_tmp):
    short = short_tmp
    e = {
        **os.environ,
        "TMPDIR": str(short),
        "DPCL_WARM_WORKER": "1",
        "DPCL_WARM_WORKER_IDLE": "20",
        "TEST_TOKEN": "t-123",
    }
    e.pop("DPCL_IN_WARM_WORKER", None)
    yield e
    # stop the test's warm worker (it would exit after 20 s idle anyway)
    for pid in _starts(e):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def _run(tmp_path, env, *args, timeout=120):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    work = tmp_path / "cwd"
    work.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, str(script), *args],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _wait_gone(pid: int, timeout: float, message: str) -> None:
    """Wait until process ``pid`` has ended, failing with ``message`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        assert time.monotonic() < deadline, message
        time.sleep(0.05)


def test_script_runs_in_a_preloaded_child_with_the_jobs_streams_cwd_and_env(tmp_path, env):
    res = _run(tmp_path, env, "ok")
    assert res.returncode == 0, res.stderr
    words = res.stdout.split()
    assert words[words.index("in_worker") + 1] == "1"  # ran in the worker's child ...
    assert int(words[words.index("pid") + 1]) != os.getpid()
    assert words[words.index("torch_loaded") + 1] == "True"  # ... which had torch imported already
    assert words[words.index("cwd") + 1] == str(tmp_path / "cwd")
    assert words[words.index("token") + 1] == "t-123"
    assert "to stderr" in res.stderr and "unavailable" not in res.stderr
    # a second job reuses the same warm process (one socket, one log)
    again = _run(tmp_path, env, "ok")
    assert again.returncode == 0
    logs = list((Path(env["TMPDIR"]) / f"dpcl-{os.getuid()}").glob("*.log"))
    assert len(logs) == 1 and logs[0].read_text().count("listening on") == 1


def test_exit_status_and_traceback_come_back(tmp_path, env):
    res = _run(tmp_path, env, "exit3")
    assert res.returncode == 3
    res = _run(tmp_path, env, "raise")
    assert res.returncode == 1
    assert "ValueError: boom in the script" in res.stderr and "Traceback" in res.stderr


def test_switched_off_the_script_runs_in_its_own_process(tmp_path, env):
    res = _run(tmp_path, {**env, "DPCL_WARM_WORKER": "0"}, "ok")
    words = res.stdout.split()
    assert res.returncode == 0 and words[words.index("in_worker") + 1] == "None"
    sockets = Path(env["TMPDIR"]) / f"dpcl-{os.getuid()}"
    assert not sockets.exists() or not list(sockets.glob("*.sock"))


def test_killing_the_job_kills_its_child(tmp_path, env):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    (tmp_path / "cwd").mkdir()
    pidfile = tmp_path / "child.pid"
    proc = subprocess.Popen(
        [sys.executable, str(script), "sleep", str(pidfile)], cwd=tmp_path / "cwd", env=env
    )
    deadline = time.monotonic() + 120
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    child = int(pidfile.read_text())
    assert child != proc.pid
    proc.kill()  # what Snakemake does to a cancelled job
    proc.wait()
    _wait_gone(child, 10, "the worker's child outlived its job")


@pytest.mark.parametrize("edited", ["library", "worker"])
def test_an_edit_to_the_library_or_the_worker_names_a_new_worker(monkeypatch, short_tmp, edited):
    import dpcl.io

    monkeypatch.setenv("TMPDIR", str(short_tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    first = worker.socket_path()
    assert first.parent.name == f"dpcl-{os.getuid()}" and len(str(first)) < 100
    mod = Path(dpcl.io.__file__ if edited == "library" else worker.__file__)
    st = mod.stat()
    try:
        os.utime(mod, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        assert worker.socket_path() != first
    finally:
        os.utime(mod, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert worker.socket_path() == first


def test_a_job_longer_than_the_idle_time_keeps_the_warm_process(tmp_path, env):
    """The idle time counts from the last job's end, not its start: a run whose jobs each outlast it
    (the default's DP-A-GEM jobs take minutes, the idle exit is 60 s) does not import everything again
    for each; with no job left the worker still exits."""
    env = {**env, "DPCL_WARM_WORKER_IDLE": "1"}
    res = _run(tmp_path, env, "nap", "4")  # four idle times long
    assert res.returncode == 0, res.stderr
    again = _run(tmp_path, env, "ok")
    assert again.returncode == 0, again.stderr
    (pid,) = _starts(env)  # one warm process served both
    _wait_gone(pid, 30, "the idle warm worker did not exit")  # idle, it exits


def test_the_warm_process_is_named_after_the_allocator_settings(monkeypatch):
    """A warm process forks its children with its own allocator state: another glibc setting (the
    Snakefile's keep_freed_memory) gets another warm process."""
    for k in ("MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_"):
        monkeypatch.delenv(k, raising=False)
    plain = worker._library_key()
    monkeypatch.setenv("MALLOC_MMAP_MAX_", "0")
    assert worker._library_key() != plain

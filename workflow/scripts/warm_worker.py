"""Warm worker: run the workflow's Python scripts in processes forked from one that has
already imported torch, timm, opacus, scipy, matplotlib and every ``dpcl`` module.

Workflow plumbing, not part of the library: the rule scripts import it from this folder (Snakemake
puts a local script's folder on its ``sys.path``), the Snakefile imports :func:`configure_for_workflow`
from it, and nothing in ``dpcl`` does.

Snakemake starts a fresh interpreter for every ``script:`` job; on a CPU these imports
alone take longer than the work of a small job (a FiLM run of the miniature paper run;
``benchmarks/README.md`` has the measurements). With the worker, each script's first statement
(:func:`run_in_warm_worker`) hands the rest of the script to a child forked from a
long-lived *warm* process: the child takes the job's standard streams, working
directory, environment and ``sys.argv``, runs the script file Snakemake wrote (its
preamble included) and reports the exit status back; the script's own process only waits.
The job's outputs, logs and exit status are exactly those of a fresh interpreter: the
warm process never runs a job itself (every child starts from the same freshly imported
state, with empty caches), and a child that loses its job's process (Snakemake killed
the job) exits at once.

Switched on by the environment variable ``DPCL_WARM_WORKER=1``, which the Snakefile sets
for local runs when the config key ``warm_worker`` is true (the default); cluster jobs
(``--profile slurm``) and platforms without ``fork`` run scripts the ordinary way. The
warm process listens on a Unix socket in ``$TMPDIR/dpcl-<uid>/``, named after the Python
executable, this file and the ``dpcl`` files (an edit to either starts a new one),
and exits after ``DPCL_WARM_WORKER_IDLE`` seconds (default 60) in which no job started and none of
its children ran (a run whose jobs each take longer than that keeps its one warm process rather than
importing everything again). Should it fail to start, the script runs in its own process
as before, with a warning.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import sys
import time
from pathlib import Path

ENV_ENABLE = "DPCL_WARM_WORKER"
ENV_CHILD = "DPCL_IN_WARM_WORKER"
ENV_IDLE = "DPCL_WARM_WORKER_IDLE"
PRELOAD = (
    "numpy",
    "scipy",
    "scipy.stats",
    "scipy.optimize",
    "torch",
    "timm",
    "opacus",
    "optuna",
    "matplotlib",
    "matplotlib.pyplot",
    "PIL.Image",
    "yaml",
    "snakemake.io",
    "snakemake.iocontainers",
    "snakemake.logging",
)
_HEADER = 8  # bytes: length of the JSON request that follows


def configure_for_workflow(warm_worker: bool, local_exec: bool) -> bool:
    """Called by the Snakefile: switch the warm worker on for this run's jobs (environment
    variable ``DPCL_WARM_WORKER``, which the jobs inherit) when the config key
    ``warm_worker`` is true and the jobs run locally (not under a cluster executor, nor inside
    a SLURM allocation). A user's ``DPCL_WARM_WORKER=0`` always wins. Returns the setting."""
    if os.environ.get(ENV_ENABLE) == "0":
        return False
    on = bool(warm_worker) and bool(local_exec) and "SLURM_JOB_ID" not in os.environ
    os.environ[ENV_ENABLE] = "1" if on else "0"
    return on


def enabled() -> bool:
    """Whether this process should hand its script to the warm worker."""
    return (
        os.environ.get(ENV_ENABLE, "0") not in ("", "0", "false")
        and os.environ.get(ENV_CHILD) != "1"
        and hasattr(os, "fork")
        and hasattr(socket, "AF_UNIX")
    )


def _library_key() -> str:
    """Names the warm process: the interpreter, its import path, glibc's allocator settings (its
    ``MALLOC_*`` environment variables, read when a process starts, so its children inherit the warm
    process's; the Snakefile sets them), this file and the dpcl files (size, mtime)."""
    from importlib.util import find_spec

    h = hashlib.sha256()
    h.update(f"{sys.executable}\0{sys.version}\0{os.environ.get('PYTHONPATH', '')}\0".encode())
    glibc = sorted(k for k in os.environ if k.startswith("MALLOC"))
    h.update("".join(f"{k}={os.environ[k]}\0" for k in glibc).encode())
    here = Path(__file__).resolve()
    spec = find_spec("dpcl")  # where a job imports dpcl from, found without importing it
    root = Path(spec.origin).resolve().parent if spec is not None and spec.origin else here.parent
    for p in [here, *sorted(root.rglob("*.py"))]:
        st = p.stat()
        h.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return h.hexdigest()[:16]


def socket_path() -> Path:
    import tempfile

    d = Path(tempfile.gettempdir()) / f"dpcl-{os.getuid()}"
    d.mkdir(mode=0o700, exist_ok=True)
    return d / f"w-{_library_key()}.sock"


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return buf


def _try_connect(path: Path) -> socket.socket | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(str(path))
        return s
    except OSError:
        s.close()
        return None


def _connect(path: Path, start_timeout: float = 180.0) -> socket.socket:
    """A connection to the warm process at ``path``, starting one when none answers."""
    import fcntl
    import subprocess

    conn = _try_connect(path)
    if conn is not None:
        return conn
    with open(f"{path}.lock", "w") as lock:  # one starter at a time; the others wait here
        fcntl.flock(lock, fcntl.LOCK_EX)
        conn = _try_connect(path)
        if conn is not None:
            return conn
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # left by a killed worker
        env = {k: v for k, v in os.environ.items() if k != ENV_CHILD}
        with open(f"{path}.log", "ab") as logf:
            proc = subprocess.Popen(  # noqa: S603
                [sys.executable, str(Path(__file__).resolve()), str(path)],
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=logf,
                start_new_session=True,
                close_fds=True,
                env=env,
            )
        t0 = time.monotonic()
        while time.monotonic() - t0 < start_timeout:
            conn = _try_connect(path)
            if conn is not None:
                return conn
            if proc.poll() is not None:
                raise RuntimeError(
                    f"the warm worker exited at start (exit {proc.returncode}; see {path}.log)"
                )
            time.sleep(0.05)
        proc.kill()
        raise RuntimeError(f"the warm worker did not start within {start_timeout:.0f} s")


def run_in_warm_worker() -> None:
    """Run the rest of the calling script in a child of the warm worker and exit with its
    status; returns at once (the script goes on here) when the worker is off, when this is
    already the child, or when no worker can be reached before the job started."""
    if not enabled():
        return
    req = json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    try:
        conn = _connect(socket_path())
        socket.send_fds(conn, [len(req).to_bytes(_HEADER, "big")], [0, 1, 2])
        conn.sendall(req)
        started = conn.recv(1) == b"A"
    except (OSError, RuntimeError) as err:
        print(f"[dpcl] warm worker unavailable ({err}); running this job in its own process", file=sys.stderr)
        return
    if not started:  # the worker closed before forking a child: nothing ran, run here
        print(
            "[dpcl] warm worker closed the connection; running this job in its own process", file=sys.stderr
        )
        return
    try:
        code = int.from_bytes(_recv_exact(conn, 4), "big", signed=True)
    except (OSError, ConnectionError):
        print(
            "[dpcl] the warm worker's process for this job ended without an exit status (killed?)",
            file=sys.stderr,
        )
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


# ---- the warm process -------------------------------------------------------------------


def _preload() -> None:
    import importlib
    import pkgutil

    os.environ.setdefault("MPLBACKEND", "Agg")
    for name in PRELOAD:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    import dpcl

    for mod in pkgutil.walk_packages(dpcl.__path__, "dpcl."):
        with contextlib.suppress(Exception):
            importlib.import_module(mod.name)


def _watch(conn: socket.socket) -> None:
    """In the child: exit as soon as the job's own process is gone (Snakemake killed it)."""
    with contextlib.suppress(OSError):
        conn.recv(1)
    os._exit(1)


def _child(conn: socket.socket) -> None:
    import runpy
    import threading
    import traceback

    code = 1
    try:
        conn.settimeout(None)
        header, fds, _, _ = socket.recv_fds(conn, _HEADER, 3)
        header += _recv_exact(conn, _HEADER - len(header))
        req = json.loads(_recv_exact(conn, int.from_bytes(header, "big")))
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        os.environ[ENV_CHILD] = "1"
        sys.argv = list(req["argv"])
        sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
        threads = os.environ.get("OMP_NUM_THREADS", "")
        if threads.isdigit() and "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(int(threads))  # libgomp read the worker's value at import
        conn.sendall(b"A")
        threading.Thread(target=_watch, args=(conn,), daemon=True).start()
        try:
            runpy.run_path(sys.argv[0], run_name="__main__")
            code = 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException as exc:  # noqa: BLE001 - reported like an uncaught exception, then the status goes back
            tb = exc.__traceback__  # from the script's own frame on, as a fresh interpreter prints it
            while tb is not None and tb.tb_frame.f_code.co_filename != sys.argv[0]:
                tb = tb.tb_next
            traceback.print_exception(type(exc), exc, tb or exc.__traceback__)
            code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        with contextlib.suppress(OSError):
            conn.sendall(int(code).to_bytes(4, "big", signed=True))
        os._exit(int(code))


def _alive(pid: int) -> bool:
    """Whether the child ``pid`` still runs (children are reaped by the kernel, so an ended one is gone;
    a pid taken over by another user's process counts as ended)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def serve(path: str | Path, idle_s: float | None = None) -> None:
    """The warm process: import everything once, then fork one child per job on ``path``; exit after
    ``idle_s`` seconds (default ``$DPCL_WARM_WORKER_IDLE`` or 60) with no job started and no child running."""
    import signal

    path = Path(path)
    idle_s = float(os.environ.get(ENV_IDLE, 60)) if idle_s is None else idle_s
    _preload()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = path.with_name(f"{path.name}.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    srv.bind(str(tmp))
    srv.listen(128)
    os.replace(tmp, path)  # appears only once it listens
    inode = path.stat().st_ino
    srv.settimeout(max(0.05, min(idle_s, 1.0)))  # how often a waiting worker looks at its children
    print(f"[dpcl] warm worker {os.getpid()} listening on {path} (idle exit {idle_s:.0f} s)", flush=True)
    children: set[int] = set()
    busy = time.monotonic()  # when a job last started or a child was last seen running
    try:
        while True:
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                children = {pid for pid in children if _alive(pid)}
                if children:
                    busy = time.monotonic()
                elif time.monotonic() - busy >= idle_s:
                    break
                continue
            pid = os.fork()
            if pid == 0:
                srv.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                _child(conn)
            conn.close()
            children.add(pid)  # the ended ones are dropped while the worker waits
            busy = time.monotonic()
    finally:
        with contextlib.suppress(OSError):
            if path.stat().st_ino == inode:  # not a successor's socket
                path.unlink()
        srv.close()  # a job that connected meanwhile runs in its own process


if __name__ == "__main__":
    serve(sys.argv[1])

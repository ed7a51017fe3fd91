"""Atomic file writing: write to a temporary file beside the target, then rename.

An interrupted job therefore never leaves a half-written file that looks complete.
Also the jobs' logging: progress messages go through the standard ``logging``
module (logger ``dpcl``), which a job sends to its terminal and its log file
(:func:`tee_stderr`); progress bars go to the terminal only (:func:`progress_stream`), so
job logs hold lines, not carriage-return updates.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

LOGGER = logging.getLogger("dpcl")
_FORMAT = "[dpcl %(asctime)s] %(message)s"


class _StderrHandler(logging.StreamHandler):
    """A handler writing to whatever ``sys.stderr`` is at the time of each record (a job's
    tee, pytest's capture), not the stream of the moment it was made."""

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # logging.StreamHandler.__init__ assigns it
        pass


def _ensure_handler() -> None:
    """Give the ``dpcl`` logger its own stderr handler (INFO and up, not propagated: imported
    libraries put handlers on the root logger that would print every line twice), unless the
    application configured the logger itself (a handler or a level on ``dpcl``)."""
    if LOGGER.handlers or LOGGER.level != logging.NOTSET:
        return
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter(_FORMAT, datefmt="%H:%M:%S"))
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.INFO)
    LOGGER.propagate = False


def log(msg: str) -> None:
    """One progress line through the ``dpcl`` logger: on stderr, which a job tees into its log
    file (:func:`tee_stderr`). An application that configures ``logging.getLogger("dpcl")``
    itself (a handler or a level) gets the records its way instead."""
    _ensure_handler()
    LOGGER.info(msg)


def progress_stream():
    """Where progress bars (tqdm) write: the process's terminal, never a job's log file (a bar's
    carriage-return updates would fill it). ``None`` when that is not a terminal (CI, batch
    jobs, redirected output): callers then switch their bar off."""
    stream = sys.__stderr__
    try:
        return stream if stream is not None and stream.isatty() else None
    except ValueError:  # closed
        return None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path in the target's folder; rename it onto ``path`` on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix + ".tmp")
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp creates 0600; give the usual mode
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _clean(obj: Any) -> Any:
    """Replace non-finite floats by strings so the JSON stays standard ("inf", "nan")."""
    if isinstance(obj, float | np.floating):
        f = float(obj)
        return f if math.isfinite(f) else ("inf" if f > 0 else "-inf" if f < 0 else "nan")
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _clean(obj.tolist())
    return obj


_ENCODE_STR = json.encoder.encode_basestring_ascii
_NON_FINITE = {math.inf: '"inf"', -math.inf: '"-inf"'}


def _float_text(f: float) -> str:
    return float.__repr__(f) if math.isfinite(f) else _NON_FINITE.get(f, '"nan"')


def _key_text(key: Any) -> str:
    """A dict key as ``json.dumps`` writes it (keys are not cleaned: a non-finite float key is NaN/Infinity)."""
    if isinstance(key, str):
        return _ENCODE_STR(key)
    if isinstance(key, float):
        text = (
            float.__repr__(key)
            if math.isfinite(key)
            else {math.inf: "Infinity", -math.inf: "-Infinity"}.get(key, "NaN")
        )
    elif key is True or key is False or key is None:
        text = {True: "true", False: "false", None: "null"}[key]
    elif isinstance(key, int):
        text = int.__repr__(key)
    else:
        raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")
    return _ENCODE_STR(text)


def _encode(obj: Any, out: list[str], level: int) -> None:
    """Append the text of ``json.dumps(_clean(obj), indent=1, default=_json_default)`` to ``out``.

    The standard library writes indented JSON with its pure-Python encoder, element by element;
    a released label space holds up to 200,000 labels (Public Labels ×1000 on ImageNet-R), so
    lists of plain integers and finite floats are joined in one step here."""
    if isinstance(obj, str):
        out.append(_ENCODE_STR(obj))
    elif obj is None:
        out.append("null")
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif isinstance(obj, float | np.floating):
        out.append(_float_text(float(obj)))
    elif isinstance(obj, int):
        out.append(int.__repr__(obj))
    elif isinstance(obj, np.ndarray):
        _encode(obj.tolist(), out, level)
    elif isinstance(obj, list | tuple):
        if not obj:
            out.append("[]")
            return
        indent = "\n" + " " * (level + 1)
        out.append("[" + indent)
        if all(type(v) is int for v in obj):
            out.append(("," + indent).join(map(int.__repr__, obj)))
        elif all(type(v) is float for v in obj):
            out.append(("," + indent).join(map(_float_text, obj)))
        else:
            for i, v in enumerate(obj):
                if i:
                    out.append("," + indent)
                _encode(v, out, level + 1)
        out.append("\n" + " " * level + "]")
    elif isinstance(obj, dict):
        if not obj:
            out.append("{}")
            return
        indent = "\n" + " " * (level + 1)
        out.append("{" + indent)
        for i, (k, v) in enumerate(obj.items()):
            out.append(("," + indent if i else "") + _key_text(k) + ": ")
            _encode(v, out, level + 1)
        out.append("\n" + " " * level + "}")
    else:
        _encode(_json_default(obj), out, level)


def json_text(obj: Any) -> str:
    """``obj`` as :func:`write_json` writes it (one-space indent, non-finite floats as the strings
    "inf", "-inf", "nan"), byte for byte what ``json.dumps(..., indent=1)`` writes after that cleaning."""
    out: list[str] = []
    _encode(obj, out, 0)
    return "".join(out)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented JSON, atomically. Infinite floats become the string "inf"."""
    with atomic_path(path) as tmp:
        tmp.write_text(json_text(obj) + "\n")


def write_json_exact(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented JSON, atomically, non-finite floats as Python's NaN / Infinity tokens
    (not standard JSON): for intermediate files that :func:`read_json` reads back float for float."""
    write_text(path, json.dumps(obj, indent=1, default=_json_default) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    return json.loads(Path(path).read_text())


def write_npz(path: str | os.PathLike, **arrays: Any) -> None:
    """``np.savez`` atomically (uncompressed: features are read far more often than written)."""
    with atomic_path(path, suffix=".npz") as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


class _Tee:
    def __init__(self, *streams) -> None:
        self.streams = streams

    def write(self, text: str) -> int:
        for s in self.streams:
            s.write(text)
            s.flush()
        return len(text)

    def flush(self) -> None:
        for s in self.streams:
            s.flush()

    def isatty(self) -> bool:
        return False


def tee_stderr(log_path: str | os.PathLike | None) -> None:
    """Copy everything written to ``sys.stderr`` (the ``dpcl`` logger's lines, warnings,
    tracebacks) into ``log_path`` as well. Progress bars bypass it (:func:`progress_stream`)."""
    import sys

    if not log_path:
        return
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    sys.stderr = _Tee(sys.__stderr__, open(log_path, "w", buffering=1))  # noqa: SIM115

"""Job logging: progress messages go through the standard ``logging`` module
into the job's log file and terminal; progress bars go to the terminal only, so a log file holds
lines, never tqdm's carriage-return updates. The feature extractor's real bar is used."""

from __future__ import annotations

import logging
import os
import pty
import subprocess
import sys
import threading

from dpcl.io import log

JOB = r"""
import sys
import numpy as np
import torch
from dpcl.backbones import Preprocessing
from dpcl.features import extract_features
from dpcl.io import log, tee_stderr

tee_stderr(sys.argv[1])
log("extracting features")
model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
images = np.random.default_rng(0).integers(0, 256, (60, 8, 8, 3), dtype=np.uint8)
feats = extract_features(model, images, Preprocessing(8, (0.5,) * 3, (0.5,) * 3), batch_size=4, device="cpu")
log(f"done: {feats.shape}")
"""


def _run_job(tmp_path, tty: bool) -> tuple[str, str]:
    """Run JOB with its stderr on a pseudo-terminal (tty) or a pipe; (terminal output, log file)."""
    log_file = tmp_path / "job.log"
    cmd = [sys.executable, "-c", JOB, str(log_file)]
    if not tty:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)
        return res.stderr, log_file.read_text()
    master, slave = pty.openpty()
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # the child closed the terminal
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, timeout=120)
    os.close(slave)
    reader.join(timeout=10)
    os.close(master)
    assert proc.returncode == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode(errors="replace"), log_file.read_text()


def test_progress_bar_on_the_terminal_lines_in_the_log(tmp_path):
    terminal, log_text = _run_job(tmp_path, tty=True)
    assert "features:" in terminal and "\r" in terminal and "60/60" in terminal  # tqdm's bar
    assert "extracting features" in terminal and "done: (60, 4)" in terminal
    assert "\r" not in log_text and "img/s" not in log_text and "60/60" not in log_text
    lines = log_text.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("[dpcl ") and lines[0].endswith("] extracting features")
    assert lines[1].endswith("] done: (60, 4)")


def test_no_bar_when_stderr_is_not_a_terminal(tmp_path):
    err, log_text = _run_job(tmp_path, tty=False)
    for text in (err, log_text):
        assert "\r" not in text and "img/s" not in text
        assert "extracting features" in text and "done: (60, 4)" in text


def test_an_application_configures_the_dpcl_logger_its_own_way(capsys):
    logger = logging.getLogger("dpcl")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    try:
        for h in list(logger.handlers):
            logger.removeHandler(h)
        logger.setLevel(logging.NOTSET)
        mine = Collect()
        logger.addHandler(mine)
        logger.setLevel(logging.INFO)
        log("through logging")
        assert records == ["through logging"] and logger.handlers == [mine]  # none added
        assert "through logging" not in capsys.readouterr().err
        # unconfigured: the default handler writes the line to (the current) stderr, once
        logger.removeHandler(mine)
        logger.setLevel(logging.NOTSET)
        log("by default")
        err = capsys.readouterr().err
        assert err.count("by default") == 1 and err.startswith("[dpcl ")
    finally:
        for h in list(logger.handlers):
            logger.removeHandler(h)
        for h in saved[0]:
            logger.addHandler(h)
        logger.setLevel(saved[1])
        logger.propagate = saved[2]

"""What the engine and the libraries under it may print: only errors, unless the user asks for more.

- `route_vllm_logs`: vLLM's logs go to stderr at a chosen level (vLLM logs to stdout by default;
  stdout is for results). Must run before vLLM is imported; the engine's own processes inherit
  the setting via the environment.
- `vllm_logs_off_stdout`: for the Python API, vLLM's log on stderr at vLLM's own level (a caller's
  stdout holds only what it prints), unless the caller set up vLLM's logging.
- `quiet_libraries`: no hub retry warnings, no Python warnings (FutureWarning and the like) and no
  torch C++ warnings, here and in the processes started from here. `labeler` runs its commands
  inside it unless --verbose.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

# Loggers of the libraries under us that warn about what the user cannot act on (hub retries,
# connection pools, lock files) before our own one-line error says what went wrong.
LIBRARY_LOGGERS = ("huggingface_hub", "datasets", "transformers", "urllib3", "filelock", "fsspec", "httpx", "httpcore")

# The libraries' own switches, read when they are imported (also by processes started from here).
QUIET_ENVIRONMENT = {
    "TORCH_CPP_LOG_LEVEL": "ERROR",  # torch's C++ warnings, e.g. about NUMA on the engine's start
    "HF_HUB_VERBOSITY": "error",
    "DATASETS_VERBOSITY": "error",
    "TRANSFORMERS_VERBOSITY": "error",
    "PYTHONWARNINGS": "ignore",  # Python warnings in the engine's processes
}


VLLM_FORMAT = "[vllm] %(levelname)s %(message)s"


def route_vllm_logs(level: str = "ERROR") -> None:
    config = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": VLLM_FORMAT}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr", "formatter": "plain", "level": level}},
        "loggers": {"vllm": {"handlers": ["stderr"], "level": level, "propagate": False}},
    }
    handle, path = tempfile.mkstemp(prefix="prm-labeler-vllm-logging-", suffix=".json")
    with os.fdopen(handle, "w") as file:
        json.dump(config, file)
    os.environ["VLLM_CONFIGURE_LOGGING"] = "1"
    os.environ["VLLM_LOGGING_CONFIG_PATH"] = path
    # vLLM applies that file only when an engine starts; what it logs while being imported (e.g.
    # "Triton is installed, but doesn't include CPU backend") goes through the same rules already.
    log_to_stderr("vllm", level, logging.Formatter(VLLM_FORMAT))


# What a caller sets to decide where and whether vLLM logs: then vllm_logs_off_stdout leaves vLLM's logging alone.
VLLM_LOGGING_SWITCHES = ("VLLM_LOGGING_STREAM", "VLLM_LOGGING_CONFIG_PATH", "VLLM_CONFIGURE_LOGGING")


def vllm_logs_off_stdout() -> None:
    """vLLM's log on stderr instead of stdout, at vLLM's own level (VLLM_LOGGING_LEVEL, INFO by default).
    vLLM sets up its logging as an engine starts, in this process and in the engine's, from the
    environment: set here, it holds for every engine started after. A handler of an engine that
    started before is moved to stderr."""
    if any(name in os.environ for name in VLLM_LOGGING_SWITCHES):
        return
    os.environ["VLLM_LOGGING_STREAM"] = "ext://sys.stderr"
    for handler in logging.getLogger("vllm").handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stdout:
            handler.setStream(sys.stderr)


@contextmanager
def quiet_libraries() -> Iterator[None]:
    """Only errors from the libraries while it lasts: their loggers, Python's warnings filter and
    (where the user has not set them) the environment switches the libraries and their
    subprocesses read. All is restored on leaving, for callers that go on (tests, notebooks)."""
    added = {name: value for name, value in QUIET_ENVIRONMENT.items() if name not in os.environ}
    levels = {name: logging.getLogger(name).level for name in LIBRARY_LOGGERS}
    os.environ.update(added)
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for name in added:
            os.environ.pop(name, None)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


class StderrHandler(logging.StreamHandler):
    """A handler that writes to whatever sys.stderr is when a record comes (tests swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def log_to_stderr(name: str, level: str | int, formatter: logging.Formatter) -> None:
    """The logger `name` at `level`, on stderr through one StderrHandler (added once), not propagated."""
    logger = logging.getLogger(name)
    logger.setLevel(level)
    if not any(isinstance(handler, StderrHandler) for handler in logger.handlers):
        handler = StderrHandler()
        handler.setFormatter(formatter)
        logger.addHandler(handler)
    logger.propagate = False


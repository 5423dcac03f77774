"""Route vLLM's logs to stderr at a chosen level (vLLM logs to stdout by default; stdout is for results).

Must run before vLLM is imported; the engine's own process inherits the setting via the environment.
"""

from __future__ import annotations

import json
import os
import tempfile


def route_vllm_logs(level: str = "ERROR") -> None:
    config = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "[vllm] %(levelname)s %(message)s"}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr", "formatter": "plain", "level": level}},
        "loggers": {"vllm": {"handlers": ["stderr"], "level": level, "propagate": False}},
    }
    handle, path = tempfile.mkstemp(prefix="prm-labeler-vllm-logging-", suffix=".json")
    with os.fdopen(handle, "w") as file:
        json.dump(config, file)
    os.environ["VLLM_CONFIGURE_LOGGING"] = "1"
    os.environ["VLLM_LOGGING_CONFIG_PATH"] = path

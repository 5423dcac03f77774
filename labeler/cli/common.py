"""What the PRM subcommands (train, score, eval, export, report) share: one-line errors with exit
code 2, progress logs on stderr, quiet transformers."""

from __future__ import annotations

import logging
import sys

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


def add_format_arguments(group) -> None:
    """--preset, --split, --max-row-chars and the --FIELD-column flags: how input rows are read."""
    from labeler.inputs.presets import COLUMN_FIELDS, PRESET_NAMES
    from labeler.inputs.splitting import SPLIT_RULES

    group.add_argument("--preset", default=None, help=f"input format, one of {', '.join(PRESET_NAMES)}; auto-detected when unambiguous")
    group.add_argument("--split", dest="split_rule", choices=SPLIT_RULES, default="auto", help="how solution text is cut into steps")
    group.add_argument("--max-row-chars", type=int, default=50_000, help="rows longer than this are rejected")
    for field in COLUMN_FIELDS:
        group.add_argument(f"--{field}-column", default=None, help=f"column holding the {field} (explicit mapping for other formats)")


def column_flags(args) -> dict[str, str]:
    """The --FIELD-column flags that were given, as {field: column}."""
    from labeler.inputs.presets import COLUMN_FIELDS

    return {field: getattr(args, f"{field}_column") for field in COLUMN_FIELDS if getattr(args, f"{field}_column")}


def usage_error(command: str, message: str) -> int:
    print(f"labeler {command}: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def log_to_stderr(quiet: bool = False) -> None:
    """Progress of the `labeler.*` loggers on stderr (only warnings with --quiet)."""
    logger = logging.getLogger("labeler")
    logger.setLevel(logging.WARNING if quiet else logging.INFO)
    if not any(getattr(handler, "_labeler_progress", False) for handler in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", datefmt="%H:%M:%S"))
        handler._labeler_progress = True
        logger.addHandler(handler)
    logger.propagate = False


def quiet_transformers() -> None:
    """No weight-loading progress bars or "weights not used" notes: a causal LM loaded as a bare
    backbone leaves its output layer unused on purpose."""
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()


def resolve_backbone(model: str | None) -> tuple[str, str]:
    """(what to load, what to record) for --model; None means the embedded SmolLM2-135M-Instruct."""
    if model is not None:
        return model, model
    from workers.model_source import resolve_model

    source = resolve_model(None)
    return source.path, source.name

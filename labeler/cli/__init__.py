"""The `labeler` command: one thin module per subcommand. Logs go to stderr, results to stdout."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from labeler import __version__
from labeler.cli import check, eval, export, label, report, score, status, train

SUBCOMMANDS = (label, status, check, train, score, eval, export, report)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="labeler", description="Math-Shepherd-style step labels for Process Reward Models.")
    parser.add_argument("--version", action="version", version=f"prm-labeler {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in SUBCOMMANDS:
        command.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=os.environ.get("LABELER_LOG_LEVEL", "WARNING"), stream=sys.stderr)
    args = build_parser().parse_args(argv)
    if "VLLM_LOGGING_CONFIG_PATH" not in os.environ:
        from workers.engine_logging import route_vllm_logs

        route_vllm_logs("INFO" if getattr(args, "verbose", False) else "ERROR")
    return args.handler(args)



"""`labeler status DIR`: units done/total, rows, tokens and rate of a (running or finished) job."""

from __future__ import annotations

import argparse
import json

from labeler.cli.common import EXIT_OK, RunOptions, add_command, usage_error
from labeler.cli.flags import add_flags

COMMAND = "status"


def register(subparsers) -> None:
    p = add_command(
        subparsers,
        COMMAND,
        help="show the progress of a labeling job",
        description="Units done/total, rows, tokens, rate and ETA of the job in DIR, running or finished.\n"
        "Reads only its manifest and commit records, so it works while the job runs.",
        usage_errors="bad usage, or no readable job in DIR",
    )
    p.add_argument("directory", metavar="DIR", help="the job's output directory (--output of `labeler label`), or its URL")
    add_flags(p, RunOptions, only=("json",))
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from labeler.store.status import job_status, format_status

    try:
        status = job_status(args.directory)
    except (FileNotFoundError, ValueError) as error:
        return usage_error(COMMAND, str(error))
    print(json.dumps(status, indent=1) if args.json else format_status(status))
    return EXIT_OK



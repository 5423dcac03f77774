"""`labeler status DIR`: units done/total, rows, tokens and rate of a (running or finished) job."""

from __future__ import annotations

import argparse
import json

from labeler.cli.common import EXIT_OK, usage_error


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "status", help="show the progress of a labeling job", description="Units done/total, rows, tokens and rate of the job in DIR."
    )
    p.add_argument("directory", metavar="DIR")
    p.add_argument("--json", action="store_true", help="print the status as JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from labeler.store.status import job_status, format_status

    try:
        status = job_status(args.directory)
    except (FileNotFoundError, ValueError) as error:
        return usage_error("status", str(error))
    print(json.dumps(status, indent=1) if args.json else format_status(status))
    return EXIT_OK



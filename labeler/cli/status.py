"""`labeler status DIR`: units done/total, rows, tokens and rate of a (running, interrupted or finished) job."""

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
        "A job with units left and no live driver holding its output's lock is interrupted: no ETA, and the\n"
        "command that resumes it instead. Reads only its manifest, commit records and lock, so it works while\n"
        "the job runs.",
        usage_errors="bad usage, or no readable job in DIR",
    )
    p.add_argument("directory", metavar="DIR", help="the job's output directory (--output of `labeler label`), or its URL")
    add_flags(p, RunOptions, only=("json",))
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from labeler.store.status import job_status, format_status

    try:
        status = job_status(args.directory, resume_command)
    except (FileNotFoundError, ValueError) as error:
        return usage_error(COMMAND, str(error))
    print(json.dumps(status, indent=1) if args.json else format_status(status))
    return EXIT_OK




def resume_command(kind: str, settings: dict, directory: str) -> str | None:
    """`labeler label ... --output DIR` with the job's settings that are not at their defaults, as its
    manifest keeps them (the engine and cluster flags, outside the config, are not among them: a resume
    may change them). None for the other kinds, whose flags do not all map one to one onto the settings
    their manifest keeps (a judge's --prompt-template is a file, its manifest holds the text)."""
    import shlex

    from labeler.cli.flags import flags_for
    from labeler.labeling.config import LabelConfig
    from labeler.labeling.job import SAMPLE_INPUT
    from workers.model_source import EMBEDDED_MODEL

    from labeler.decoding.candidates import CANDIDATE_STRATEGY

    if kind != "label" or settings.get("strategy") == CANDIDATE_STRATEGY:  # bon's and search's candidates: rerun bon/search
        return None
    left_out = {"output": None, "input": SAMPLE_INPUT, "model": EMBEDDED_MODEL}  # the flags' defaults, as the config has them
    try:
        argv = flags_for({key: value for key, value in settings.items() if key not in left_out or value != left_out[key]}, LabelConfig)
    except (KeyError, TypeError, ValueError):  # a manifest of another version's settings
        return None
    return shlex.join(["labeler", kind, *argv, "--output", directory])

"""`labeler report`: a self-contained HTML page with plots of a labeling job's output.

    labeler report OUT                 writes OUT/report/index.html and its PNG plots
    labeler report OUT --output DIR    elsewhere

Plots: histogram of soft labels, first-error positions ("unknown" where an unlabelled step comes
before it), mean soft label by step index (steps measured by rollouts only: final-answer checks are
0 or 1 and left out), tokens and rollouts spent per solution (every rollout sampled, as the manifest
and `labeler status` count them, those cut by their token budget shown apart), rejected rows by
reason, with a table of every reason in full. A job still running
or interrupted says so at the top ("incomplete: 8 of 20 solutions ..."); a section with nothing to
show is one line, not an empty plot. The page embeds the plots, so it can be opened, mailed or
archived on its own. Prints the page's path.
"""

from __future__ import annotations

import argparse

from labeler.cli.common import EXIT_OK, add_command, add_output_flag, usage_error

COMMAND = "report"


def register(subparsers) -> None:
    parser = add_command(
        subparsers,
        COMMAND,
        help="write an HTML page with plots of a job's labels",
        description=__doc__,
        usage_errors="bad usage or unreadable labels",
    )
    parser.add_argument("directory", metavar="DIR", help="a labeling job's output directory (or a folder of labels shards)")
    add_output_flag(parser, required=False, metavar="DIR", help="where the page and PNGs go (default: DIR/report)")
    parser.set_defaults(handler=run_report)


def run_report(args: argparse.Namespace) -> int:
    from labeler.evaluation.report import write_report

    try:
        page = write_report(args.directory, args.output)
    except ValueError as error:  # LabelsError
        return usage_error(COMMAND, str(error).splitlines()[0])
    print(page)
    return EXIT_OK

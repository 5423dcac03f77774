"""`labeler report`: a self-contained HTML page with plots of a labeling job's output.

    labeler report OUT                 writes OUT/report/index.html and its PNG plots
    labeler report OUT --out DIR       elsewhere

Plots: histogram of soft labels, first-error positions, mean soft label by step index, tokens
and rollouts spent per solution, rejected rows by reason. The page embeds the plots, so it can be
opened, mailed or archived on its own. Prints the page's path.

Exit codes: 0 done; 1 unexpected failure; 2 bad usage or unreadable labels.
"""

from __future__ import annotations

import argparse

from labeler.cli.common import EXIT_OK, usage_error

COMMAND = "report"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        COMMAND,
        help="write an HTML page with plots of a job's labels",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("directory", metavar="DIR", help="a labeling job's output directory (or a folder of labels shards)")
    parser.add_argument("--out", default=None, metavar="DIR", help="where the page and PNGs go (default: DIR/report)")
    parser.set_defaults(handler=run_report)


def run_report(args: argparse.Namespace) -> int:
    from labeler.evaluation.report import write_report

    try:
        page = write_report(args.directory, args.out)
    except ValueError as error:  # LabelsError
        return usage_error(COMMAND, str(error).splitlines()[0])
    print(page)
    return EXIT_OK

"""`labeler view`: look at labels in the browser, correct them, and work through a review queue.

    labeler view OUT                            a labeling job's output (running or finished)
    labeler view OUT JUDGED scores.jsonl        with a judge's verdicts and a PRM's scores beside the labels
    labeler view OUT queue.jsonl                with a queue from `labeler select --queue` (sort by queue_rank)

Each OUT is a labeling, import, consensus or bon output (a job still running shows its committed
units), a folder of labels shards or one shard, a `labeler judge` output, the lines of `labeler
score`, or a queue. The table filters and sorts every solution (first error, label method and
source, truncated or unlabelled steps, Monte-Carlo vs judge, PRM score, trajectory verdict, text);
a solution shows its steps, labels, rollouts (with `check --explain` on click), the judge's
critiques, other outputs' labels and PRM scores side by side. Corrections (a step right or wrong,
or the first error, with a note) are saved in OUT/corrections/, which `labeler train --labels OUT`,
`eval --labels OUT` and `export` read as human labels. It serves on 127.0.0.1 unless told otherwise
(--host 0.0.0.0 needs --allowed-host NAME: a request under any other host name is refused) and saves
corrections only in outputs you own (--read-only, --allow-writes). Prints the address on
stdout; Ctrl-C stops it.
"""

from __future__ import annotations

import argparse
import logging
import socket

from labeler.cli.common import EXIT_OK, RunOptions, add_command, http_address, log_to_stderr, run_until_stopped, usage_error
from labeler.cli.flags import add_flags, flag_values
from labeler.review.config import ViewConfig

COMMAND = "view"
RUN_OPTIONS = ("quiet", "verbose")
log = logging.getLogger("labeler.view")


def register(subparsers) -> None:
    parser = add_command(
        subparsers,
        COMMAND,
        help="look at labels in the browser, correct them, work through a review queue",
        description=__doc__,
        usage_errors="bad usage, an output that cannot be read, or an address that cannot be bound",
    )
    parser.add_argument(
        "outputs", nargs="+", metavar="OUT", help="labels, judge, import, consensus or bon outputs; score lines (.jsonl) or a queue (.jsonl or .parquet)"
    )
    add_flags(parser, ViewConfig)
    add_flags(parser, RunOptions, only=RUN_OPTIONS)
    parser.set_defaults(handler=run_view)


def run_view(args: argparse.Namespace) -> int:
    run_options = RunOptions(**flag_values(args, RunOptions, only=RUN_OPTIONS))
    log_to_stderr(run_options.quiet)
    started = start_view(args)
    if isinstance(started, int):
        return started
    server, sock, url = started
    run_until_stopped(server, sock, announce=lambda: print(url, flush=True))  # the URL once a signal after it stops cleanly
    return EXIT_OK


def start_view(args: argparse.Namespace):
    """The server of `args`, its bound socket and its address, ready to run; or the exit code of a usage error."""
    from labeler.review.sources import SourceError, open_sources
    from labeler.store.errors import StorageError
    from labeler.store.reader import ShardsError

    try:
        config = ViewConfig(**flag_values(args, ViewConfig))
    except ValueError as error:
        return usage_error(COMMAND, str(error))
    if config.host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("serving on %s: anyone who reaches it can read these outputs and save corrections (there is no login)", config.host)
    try:
        sources = open_sources(args.outputs, config.read_only, config.allow_writes)
    except (SourceError, ShardsError, StorageError, ValueError, OSError) as error:
        return usage_error(COMMAND, str(error).splitlines()[0])
    try:
        family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
        sock = socket.create_server((config.host, config.port), family=family)
    except OSError as error:
        return usage_error(COMMAND, f"cannot listen on {config.host}:{config.port}: {error.strerror or error}")
    import uvicorn

    from labeler.review.app import ReviewSettings, create_app

    try:  # reads every committed shard once: a shard that is missing or not Parquet is named here
        app = create_app(sources, ReviewSettings(config.reviewer, config.checker_timeout, config.host, config.allowed_host))
    except (SourceError, ShardsError, StorageError, ValueError, OSError) as error:
        sock.close()
        return usage_error(COMMAND, str(error).splitlines()[0])
    for output in sources.labels:
        log.info("#%d %s: %s%s", output.number, output.given, output.kind, "" if output.writable else f", read-only ({output.why_read_only})")
    return uvicorn.Server(uvicorn.Config(app, log_level="warning")), sock, http_address(sock)

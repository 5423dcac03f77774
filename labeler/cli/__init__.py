"""The `labeler` command: one thin module per subcommand. Logs go to stderr, results to stdout.

What every subcommand shares happens in `main`: the libraries print only errors unless --verbose,
our errors are one line `labeler COMMAND: error: MESSAGE` (exit code 2; an output that cannot be
written or read, a StorageError, too), Ctrl-C ends with one line and exit code 130, SIGTERM (a
scheduler's stop or preemption) the same way, with exit code 143 (labeler/cli/common.py,
sigterm_as_interrupt), each saying what a rerun does (resume, or start over where the command keeps no progress:
ON_INTERRUPT); `labeler serve`, whose normal stop is SIGTERM, exits 0 with a "stopped" line, and a reader that goes away (`labeler status DIR | head -1`) ends it quietly.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from labeler import __version__
from labeler.cli import (
    bon, check, consensus, eval, export, import_labels, judge, label, report, score, search, select, serve, status, train, view,
)  # fmt: skip
from labeler.checking import CheckerUnavailable
from labeler.cli.common import (
    EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_TERMINATED, EXIT_USAGE, LabelerParser, Terminated, sigterm_as_interrupt,
)  # fmt: skip
from labeler.labeling.unit_failures import UnitsKeepFailingError
from labeler.store.errors import StorageError

SUBCOMMANDS = (label, import_labels, judge, consensus, status, check, train, score, select, eval, bon, search, export, report, serve, view)


def build_parser() -> argparse.ArgumentParser:
    parser = LabelerParser(prog="labeler", description="Math-Shepherd-style step labels for Process Reward Models.")
    parser.add_argument("--version", action="version", version=f"prm-labeler {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in SUBCOMMANDS:
        command.register(subparsers)
    return parser


RESUME_NOTE = "rerun the same command to resume"  # after Ctrl-C or SIGTERM, unless the command says otherwise (on_interrupt)
STARTS_OVER = "{command} keeps no progress to resume: rerun the same command to start it over"
# what a rerun does, for the commands that keep no progress (a command's own on_interrupt comes first: score, eval)
ON_INTERRUPT = {
    "status": "status only reads the output: rerun it to read it again",
    "check": STARTS_OVER.format(command="check"),
    "select": STARTS_OVER.format(command="select"),
    "export": STARTS_OVER.format(command="export"),
    "report": STARTS_OVER.format(command="report"),
    "view": "the corrections already saved from the browser are kept: rerun the same command to review again",
    "search": "the candidates sampled so far are kept (a rerun samples them no more), the beam search starts over: "
    "rerun the same command",
}
SERVE_STOPPED = "stopped before it served (nothing to resume): rerun the same command to serve"


def interrupt_note(args: argparse.Namespace | None) -> str:
    """What a rerun of the interrupted command does."""
    return getattr(args, "on_interrupt", None) or ON_INTERRUPT.get(getattr(args, "command", None)) or RESUME_NOTE


def main(argv: list[str] | None = None) -> int:
    prog, args = "labeler", None
    try:
        logging.basicConfig(level=os.environ.get("LABELER_LOG_LEVEL", "WARNING"), stream=sys.stderr)
        args = build_parser().parse_args(argv)
        prog = f"labeler {args.command}"
        with sigterm_as_interrupt():  # for every command: SIGTERM stops it as Ctrl-C does
            code = _run(args)
            sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    except CheckerUnavailable as error:  # never a label from a checker that cannot check: stop, say why
        print(f"{prog}: error: the answer checker cannot check: {error}; nothing was labelled from it, rerun to resume", file=sys.stderr)
        return EXIT_FAILURE
    except UnitsKeepFailingError as error:  # a broken setup or an engine that keeps dying: not the rows' fault
        print(f"{prog}: error: {error}", file=sys.stderr)
        return EXIT_FAILURE
    except StorageError as error:  # a full disk, no permission, a corrupt manifest: the path and the cause, in one line
        print(f"{prog}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except Terminated:  # SIGTERM: a scheduler stopping or preempting the job
        if getattr(args, "command", None) == serve.COMMAND:  # the normal way to stop a server, even while its PRM loads
            print(f"{prog}: {SERVE_STOPPED} (SIGTERM)", file=sys.stderr)
            return EXIT_OK
        print(f"{prog}: stopped by SIGTERM; {interrupt_note(args)}", file=sys.stderr)
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        note = SERVE_STOPPED if getattr(args, "command", None) == serve.COMMAND else interrupt_note(args)
        print(f"{prog}: interrupted; {note}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader went away (`| head`): what it read is all it wanted
        _discard_stdout()
        return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    from workers.engine_logging import quiet_libraries, route_vllm_logs

    verbose = getattr(args, "verbose", False)
    if "VLLM_LOGGING_CONFIG_PATH" not in os.environ:
        route_vllm_logs("INFO" if verbose else "ERROR")
    if verbose:
        return args.handler(args)
    with quiet_libraries():
        return args.handler(args)


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it again at exit does not fail on the closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor behind stdout (a test's capture)
        sys.stdout = open(os.devnull, "w")

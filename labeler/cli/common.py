"""What the subcommands share: how a subcommand is declared (its --help epilog with the exit codes),
the flags that are not settings of a job (RunOptions), the input-format flags, one-line errors
with exit code 2, SIGTERM stopping a command as Ctrl-C does, progress logs on stderr, quiet transformers."""

from __future__ import annotations

import argparse
import logging
import sys
from contextlib import contextmanager
from dataclasses import dataclass

from labeler.labeling.config import INPUT_OUTPUT, ROLLOUTS, check_numbers, setting

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_TERMINATED = 128 + 15  # SIGTERM, as 130 is 128 + SIGINT

FORMAT_FIELDS = ("preset", "split_rule", "max_steps", "max_row_chars", "columns")  # LabelConfig fields: how input rows are read


@dataclass(frozen=True)
class RunOptions:
    """Flags that are not settings of a job or a training run: what is printed, whether to start over.
    Each command takes the ones it needs (`add_flags(parser, RunOptions, only=...)`)."""

    overwrite: bool = setting(False, help="delete a previous job in --output and start over", group=INPUT_OUTPUT)
    dry_run: bool = setting(
        False,
        help="read and plan the input, print its rows, the steps per solution (a histogram) and the rollouts and tokens "
        "the job would spend at most, then stop: no model loads, nothing is written",
        group=INPUT_OUTPUT,
    )
    rebuild_manifest: bool = setting(
        False,
        help="when --output's manifest.json is missing or cannot be read, rebuild it from this command's plan and the "
        "commit records in commits/ (units whose records were already folded into the lost manifest are redone)",
        group=INPUT_OUTPUT,
    )
    max_unit_retries: int = setting(
        2,
        at_least=0,
        help="retries of a work unit that failed (an error while labelling it, or its engine died), then it is "
        "bisected: only the rows that fail alone go to rejected/ with the error, and the job goes on "
        "(a lost Ray worker or node spends no retry)",
        group=INPUT_OUTPUT,
    )
    retry_rejected: bool = setting(
        False,
        help="also label again the units an earlier run gave up on after --max-unit-retries (their rows in rejected/ are replaced)",
        group=INPUT_OUTPUT,
    )
    output_lock: bool = setting(
        True,
        flag="--no-output-lock",
        help="run without holding --output's lock (.lock, which keeps a second driver out): only for storage "
        "where it cannot be taken atomically, and only when no other driver writes there",
        group=INPUT_OUTPUT,
    )
    checker_timeout: float = setting(5.0, above=0, help="seconds per answer check before it is a 'timeout' verdict", group=ROLLOUTS)
    allow_engine_change: bool = setting(
        False,
        help="resume a job although its engine (resolved dtype, context length), model revision, answer checker "
        "(version, timeout) or library versions differ from those of its committed units; each unit records what labelled it",
        group=INPUT_OUTPUT,
    )
    json: bool = setting(False, help="print the result as JSON, for machines")
    quiet: bool = setting(False, help="no progress lines on stderr")
    verbose: bool = setting(
        False,
        help="show the libraries' own logs and warnings on stderr (vLLM's INFO log, hub retries, Python warnings); by default only errors",
    )

    def __post_init__(self) -> None:
        check_numbers(self)

    def job_flags(self) -> dict:
        """The keyword arguments these options give a job runner (run_job, run_judge: labeling's job machinery)."""
        return {
            "overwrite": self.overwrite,
            "progress_enabled": not self.quiet,
            "allow_engine_change": self.allow_engine_change,
            "rebuild_manifest": self.rebuild_manifest,
            "retry_rejected": self.retry_rejected,
            "lock_output": self.output_lock,
        }


class LabelerParser(argparse.ArgumentParser):
    """argparse, plus hidden deprecated spellings of flags: a subcommand's parser may set
    `deprecated_aliases = {"--out": "--output"}`; the old spelling still works, with a warning."""

    def parse_known_args(self, args=None, namespace=None):
        aliases = getattr(self, "deprecated_aliases", None)
        if aliases and args is not None:
            args = list(args)
            for index, arg in enumerate(args):
                if arg == "--":
                    break
                old, equals, value = arg.partition("=")
                if old in aliases:
                    print(f"{self.prog}: warning: {old} is deprecated; use {aliases[old]}", file=sys.stderr)
                    args[index] = aliases[old] + equals + value
        return super().parse_known_args(args, namespace)


class Terminated(KeyboardInterrupt):
    """SIGTERM (what Slurm, Kubernetes and Ray send to stop or preempt a job), raised where Ctrl-C raises its
    KeyboardInterrupt: every command stops the same way (its `with` blocks closed, the output's lock released,
    what is committed kept), and `main` says which signal it was (exit code EXIT_TERMINATED)."""


@contextmanager
def sigterm_as_interrupt():
    """While a command runs: SIGTERM raises Terminated in the main thread, as SIGINT raises KeyboardInterrupt. A second
    SIGTERM while the first unwinds is ignored, so that it does not cut short the release of the lock; the handler
    found before is put back at the end (a command run in-process, from a test or a notebook, leaves it as it was).
    Installed once, by `main`, for every command; outside the main thread (no signal handler can be set) a no-op."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def exit_codes(usage: str, failure: str = "unexpected failure", success: str = "success") -> str:
    """The --help epilog of a subcommand: its exit codes."""
    rows = [
        ("0", success), ("1", failure), ("2", usage), ("130", "interrupted (Ctrl-C)"),
        ("143", "stopped by SIGTERM (a scheduler's stop or preemption), as by Ctrl-C"),
    ]  # fmt: skip
    return "exit codes:\n" + "\n".join(f"  {code:<5}{meaning}" for code, meaning in rows)


def add_command(subparsers, name: str, *, help: str, description: str, usage_errors: str, **codes: str):
    """A subcommand's parser: its description as written, its exit codes (`exit_codes`) as the epilog."""
    return subparsers.add_parser(
        name,
        help=help,
        description=description,
        epilog=exit_codes(usage_errors, **codes),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def add_output_flag(parser, *, required: bool, metavar: str, help: str) -> None:
    """--output, with the old spelling --out of export and report kept as a hidden deprecated alias."""
    parser.add_argument("--output", required=required, default=None, metavar=metavar, help=help)
    parser.deprecated_aliases = {"--out": "--output"}


def add_format_arguments(group) -> None:
    """--preset, --split, --max-steps, --max-row-chars and the --FIELD-column flags: how input rows are read
    (made from the LabelConfig fields that declare them)."""
    from labeler.cli.flags import add_flags
    from labeler.labeling.config import LabelConfig

    add_flags(group, LabelConfig, only=FORMAT_FIELDS, into=group)


def check_format_flags(args) -> None:
    """ValueError naming the flag when a number among the input-format flags (--max-row-chars) is not
    finite or out of the range its LabelConfig field declares: for commands that build no LabelConfig."""
    from dataclasses import fields

    from labeler.labeling.config import LabelConfig, check_number

    for f in fields(LabelConfig):
        if f.name in FORMAT_FIELDS:
            check_number(f, getattr(args, f.name, None))


def column_flags(args) -> dict[str, str]:
    """The --FIELD-column flags that were given, as {field: column}."""
    from labeler.cli.flags import flag_values
    from labeler.labeling.config import LabelConfig

    return flag_values(args, LabelConfig, only=("columns",))["columns"]


def usage_error(command: str, message: str) -> int:
    print(f"labeler {command}: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def log_to_stderr(quiet: bool = False) -> None:
    """Progress of the `labeler.*` loggers on stderr (only warnings with --quiet)."""
    from workers import engine_logging

    formatter = logging.Formatter("%(asctime)s %(message)s", datefmt="%H:%M:%S")
    engine_logging.log_to_stderr("labeler", logging.WARNING if quiet else logging.INFO, formatter)


def quiet_transformers() -> None:
    """No weight-loading progress bars or "weights not used" notes: a causal LM loaded as a bare
    backbone leaves its output layer unused on purpose."""
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()


def backend_config(args):
    """The --prm-backend flags as a BackendConfig (ValueError for a value out of range)."""
    from labeler.cli.flags import flag_values
    from labeler.prm.backends import BackendConfig

    return BackendConfig(**flag_values(args, BackendConfig))


def prm_scorer(backend, spec: str, placement, batch_size: int, trust_remote_code: bool, max_length: int | None = None):
    """The scorer of `spec` on `backend`, a BackendConfig (PRMLoadError when it cannot load)."""
    from workers.vllm_scorer import load_step_scorer

    return load_step_scorer(
        spec, backend, placement=placement, batch_size=batch_size, trust_remote_code=trust_remote_code, max_length=max_length
    )


def resolve_backbone(model: str | None) -> tuple[str, str]:
    """(what to load, what to record) for --model; None means the embedded SmolLM2-135M-Instruct."""
    if model is not None:
        return model, model
    from workers.model_source import resolve_model

    source = resolve_model(None)
    return source.path, source.name


def http_address(sock) -> str:
    """The address a server bound to `sock` answers on, as `view` and `serve` print it (IPv6 in brackets)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def run_until_stopped(server, sock, announce=None) -> bool:
    """Run a uvicorn `server` on `sock` until SIGTERM or Ctrl-C; whether it was stopped at once (a second signal).
    `announce` (printing the URL) is called once the stop handler is in place, so that no signal a client sends
    after reading it is lost. uvicorn installs its own handlers (`server.handle_exit`) only once serve() runs,
    after the event loop is built: the handler here is installed before and is also the one uvicorn installs,
    so a signal at any moment asks the same stop. The first SIGTERM or SIGINT stops gracefully (no new request,
    each one in flight answered), the second, of either kind, at once (uvicorn's own forces only on SIGINT); no
    signal is raised again after the stop, so that the stop asked for ends with exit code 0. The handlers found
    before are put back."""
    import signal

    def stop(signum, frame):
        if server.should_exit:
            server.force_exit = True
        server.should_exit = True  # set before run(): uvicorn starts, skips its main loop and shuts down at once

    server.handle_exit = stop  # what uvicorn's capture_signals installs for SIGTERM and SIGINT
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        if announce is not None:
            announce()
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return server.force_exit

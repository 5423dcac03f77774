"""`labeler label`: Monte-Carlo step labels for the solutions of an input, written as a resumable job."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from functools import partial

from labeler.cli.common import EXIT_FAILURE, EXIT_OK, RunOptions, add_command, usage_error
from labeler.cli.flags import add_flags, flag_values
from labeler.labeling.config import FINAL_ANSWER, POSTERIOR, READ_ONLY_BY, ClusterSettings, LabelConfig


COMMAND = "label"


def register(subparsers) -> None:
    parser = add_command(
        subparsers,
        COMMAND,
        help="label the steps of math solutions with Monte-Carlo rollouts",
        description="Sample N completions from every step prefix of every solution, check their final answers, "
        "and write per-step soft/hard labels as Parquet shards.\n"
        "Rows that carry only a problem first get --solutions-per-problem solutions sampled; with --sample-solutions\n"
        "every row does, whatever its --preset (its own solution left out). Rerun the same command to resume.",
        usage_errors="bad usage (a setting out of range), unreadable input, an input with no rows or too many rejected, "
        "an --output that cannot be written or read or that another driver is labelling, "
        "or settings, input or engine that differ from the job already in --output",
    )
    add_flags(parser, LabelConfig)
    add_flags(parser, ClusterSettings)
    add_flags(parser, RunOptions)
    # the flags only some strategies read parse to None when not given (their help shows the real default), so that
    # one given for another strategy is told from a default and refused (`other_strategy_flags`)
    parser.set_defaults(handler=run_label, **{name: None for name in READ_ONLY_BY})


def config_from_args(args: argparse.Namespace, model_name: str) -> LabelConfig:
    from labeler.labeling.job import SAMPLE_INPUT

    values = {name: value for name, value in flag_values(args, LabelConfig).items() if not (name in READ_ONLY_BY and value is None)}
    return LabelConfig(**{**values, "input": args.input or SAMPLE_INPUT, "model": model_name})


def other_strategy_flags(args: argparse.Namespace) -> str | None:
    """The refusal of a flag given that --strategy does not read (it would be ignored, silently), naming the
    strategies that read it; None when every such flag given is read. A job in --output started with the same
    value (before such flags were refused) holds it in its config hash, so its resume must pass it: accepted."""
    from labeler.cli.flags import cli_fields, flag_name

    for f in cli_fields(LabelConfig, only=tuple(READ_ONLY_BY)):
        readers, given = READ_ONLY_BY[f.name], getattr(args, f.name, None)
        if given is not None and args.strategy not in readers and not _started_with(args, f.name, given):
            return (
                f"{flag_name(f)} is read only by --strategy {' and '.join(readers)}; --strategy {args.strategy} would "
                "ignore it: leave it out, or choose a strategy that reads it"
            )
    return None


def _started_with(args: argparse.Namespace, name: str, value) -> bool:
    """Whether the job in --output (resumed: no --overwrite) was started with the setting `name` at `value`."""
    from labeler.store.errors import StorageError
    from labeler.store.location import OutputLocation
    from labeler.store.manifest import MANIFEST_NAME, load_manifest

    if args.overwrite or args.output is None:
        return False
    try:
        location = OutputLocation(args.output)
        manifest = load_manifest(location) if location.exists(MANIFEST_NAME) else None
    except (StorageError, OSError, ValueError):  # unreadable: the run itself says why
        return False
    return bool(manifest) and (manifest.get("config") or {}).get(name) == value


def run_label(args: argparse.Namespace) -> int:
    from labeler.checking.checker import AnswerChecker
    from labeler.inputs.readers import InputError
    from labeler.labeling.generation import NoGeneration, needs_generation
    from labeler.inputs.rejection_share import TooManyRejectedError
    from labeler.labeling.job import keep_refused_rows, plan_job, run_job
    from labeler.store.manifest import ConfigMismatchError
    from workers.local_executor import LocalExecutor
    from workers.model_source import EMBEDDED_MODEL, describe_model
    from workers.vllm_generator import start_engine

    try:
        options = RunOptions(**flag_values(args, RunOptions))
    except ValueError as error:
        return usage_error(COMMAND, str(error))
    model_name = args.model or EMBEDDED_MODEL
    if args.workers is None and (args.address or args.gpus_per_worker is not None or args.checker_processes is not None):
        return usage_error(COMMAND, "--ray-address, --gpus-per-worker and --checker-processes need --workers")
    try:  # every setting checked (finite, in range) before a checker or an engine starts
        cluster = None if args.workers is None else cluster_from_args(args, options)
        if cluster is not None and cluster.gpus_per_worker:
            args.tensor_parallel_size = cluster.gpus_per_worker  # one engine spans its worker's GPUs
        config = config_from_args(args, model_name)
    except ValueError as error:
        return usage_error(COMMAND, str(error))
    if refusal := other_strategy_flags(args) or output_is_a_file(config.output):  # --dry-run too, which writes nothing
        return usage_error(COMMAND, refusal)

    if options.dry_run:
        return _dry_run(config, options)
    make_generator = partial(start_engine, args.model, config)
    if config.strategy == FINAL_ANSWER:  # it samples only the solutions of rows that carry none: maybe no model at all
        try:
            planned = [row for unit in plan_job(config).units for row in unit.rows]
        except TooManyRejectedError as error:  # as run_job refuses it: its rejected rows written first
            return usage_error(COMMAND, str(keep_refused_rows(error, config.output, options.output_lock)))
        except InputError as error:
            return usage_error(COMMAND, str(error))
        if not needs_generation(config.strategy, planned):
            make_generator = NoGeneration.factory(model_name)
    try:
        checker = AnswerChecker(timeout_s=options.checker_timeout)
    except ValueError as error:
        return usage_error(COMMAND, f"--checker-timeout: {error}")
    with checker:
        no_workers: tuple[type[Exception], ...] = ()
        try:
            if cluster is None:
                executor = LocalExecutor(make_generator, checker, model_name=model_name, max_unit_retries=options.max_unit_retries)
            else:
                from workers.ray_executor import NoWorkerError

                executor, no_workers = _ray_executor(cluster, options, make_generator), (NoWorkerError,)
        except ValueError as error:
            return usage_error(COMMAND, str(error))
        try:
            summary = run_job(
                config,
                executor=executor,
                model_info=describe_model(args.model),
                **options.job_flags(),
            )
        except (InputError, ConfigMismatchError) as error:
            return usage_error(COMMAND, str(error))
        except no_workers as error:  # the cluster has no room for a worker, or none can load the model
            print(f"labeler {COMMAND}: error: {error}; committed units are kept: rerun to resume", file=sys.stderr)
            return EXIT_FAILURE
    for warning in summary.warnings:
        print(f"labeler {COMMAND}: warning: {warning}", file=sys.stderr)
    if options.json:
        print(json.dumps(asdict(summary), indent=1))
    else:
        print(_format_summary(summary, config.strategy))
    return EXIT_OK


def _dry_run(config: LabelConfig, options) -> int:
    """--dry-run: what the job would do, from its plan and what --output holds (the units a rerun skips, or the
    refusal a real run would give); no model, nothing written."""
    from labeler.inputs.readers import InputError
    from labeler.labeling.estimate import committed_in_output, estimate, format_estimate
    from labeler.labeling.job import plan_job
    from labeler.store.errors import StorageError
    from labeler.store.manifest import ConfigMismatchError

    try:
        plan = plan_job(config)
        committed, notices = (set(), []) if options.overwrite else committed_in_output(plan, config, options.retry_rejected)
        result = estimate(plan, config, committed)
    except (InputError, ConfigMismatchError, StorageError) as error:
        return usage_error(COMMAND, str(error))
    for warning in notices + result.warnings:
        print(f"labeler {COMMAND}: warning: {warning}", file=sys.stderr)
    reasons = rejected_reasons(plan.rejected)
    if options.json:
        print(json.dumps(asdict(result) | {"rejected_reasons": reasons}, indent=1))
    else:
        print("\n".join([format_estimate(result), *map(_format_reason, reasons)]))
    return EXIT_OK


SHOWN_ROWS = 5  # the rows --dry-run names for each reason a row was rejected


def rejected_reasons(rejected) -> list[dict]:
    """Why the input's rows were rejected: each (field, reason) with its count and its first rows (0-based, as
    rejected/ numbers them), the commonest first."""
    by_reason: dict[tuple[str, str], list[int]] = {}
    for row in rejected:
        by_reason.setdefault((row.field, row.reason), []).append(row.row_index)
    ranked = sorted(by_reason.items(), key=lambda item: -len(item[1]))  # stable: ties in the order first seen
    return [{"field": field, "reason": reason, "count": len(rows), "rows": rows[:SHOWN_ROWS]} for (field, reason), rows in ranked]


def _format_reason(reason: dict) -> str:
    count, rows = reason["count"], reason["rows"]
    more = f" and {count - len(rows)} more" if count > len(rows) else ""
    which = f"(row{'s' if count > 1 else ''} {', '.join(map(str, rows))}{more})"
    return f"rejected           : {count} row{'s' if count > 1 else ''}: {reason['field']}: {reason['reason']} {which}"


def output_is_a_file(output: str | None) -> str | None:
    """The refusal of an --output that is a file on this machine (a job's output is a folder); None otherwise."""
    from labeler.store.location import OutputLocation

    if output is None:
        return None
    location = OutputLocation(output)
    if location.is_local and os.path.exists(location.base) and not os.path.isdir(location.base):
        return f"{location.base}: is a file; the output must be a directory"
    return None


def cluster_from_args(args: argparse.Namespace, options: RunOptions) -> ClusterSettings:
    return ClusterSettings(**flag_values(args, ClusterSettings), engine_log_level="INFO" if options.verbose else "ERROR")


def _ray_executor(cluster: ClusterSettings, options: RunOptions, make_generator):
    from labeler.checking.checker import AnswerChecker
    from workers.ray_executor import RayExecutor

    checker_factory = partial(AnswerChecker, timeout_s=options.checker_timeout)
    return RayExecutor(cluster, make_generator, checker_factory, max_unit_retries=options.max_unit_retries)


def _format_summary(summary, strategy: str | None = None) -> str:
    first_errors = (
        "final-answer labels only the last step: a first error before it is not looked for"
        if strategy == FINAL_ANSWER
        else "an unlabelled step before any labelled wrong one"
    )
    mean = "n/a" if summary.mean_soft_label is None else f"{summary.mean_soft_label:.3f}"
    positive = "n/a" if summary.positive_step_fraction is None else f"{summary.positive_step_fraction:.1%}"
    unlabelled = summary.steps - summary.steps_labelled
    written = "n/a (a unit predates the count)" if summary.steps_written_through is None else summary.steps_written_through
    cache = "n/a (not reported for every unit)" if summary.prefix_cache_hit_rate is None else f"{summary.prefix_cache_hit_rate:.1%}"
    from labeler.store.status import describe_label_counts

    methods, notes = describe_label_counts(summary.label_counts)  # measured, inferred, early-stopped, ... apart
    return "\n".join(
        [
            f"solutions labelled : {summary.solutions}",
            f"steps              : {summary.steps} ({summary.steps_labelled} labelled, {unlabelled} unlabelled)",
            f"label methods      : {methods}",
            *(f"note               : {note}" for note in notes),
            f"mean soft label    : {mean}",
            f"steps hard-positive: {positive}",
            f"rollouts           : {summary.rollouts} ({summary.truncated_rollouts} cut by their token budget)",
            f"first errors       : {summary.undetermined_first_errors} of {summary.solutions} solutions undetermined ({first_errors})",
            f"rejected rows      : {summary.rejected_rows}",
            f"generated tokens   : {summary.generated_tokens}",
            f"prefix cache       : {cache} of the rollouts' prompt tokens found in vLLM's prefix cache",
            *([f"written through    : {written} steps retraced (positive, not probed: rollouts of a shorter prefix wrote them, 2 or more, settled)"]
              if strategy == POSTERIOR else []),
            f"units              : {summary.units_total} ({summary.units_run_now} run now)",
            f"wall time          : {summary.seconds:.1f}s",
            f"labels             : {summary.files['labels']}/*.parquet",
            f"rollouts           : {summary.files['rollouts']}/*.parquet",
            f"rejected           : {summary.files['rejected']}/*.parquet",
            f"manifest           : {summary.files['manifest']}",
        ]
    )



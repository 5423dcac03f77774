"""`labeler judge`: an LLM judge names the earliest wrong step of each solution, as a resumable job."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, fields
from functools import partial
from pathlib import Path

from labeler.cli.common import EXIT_FAILURE, EXIT_OK, RunOptions, add_command, usage_error
from labeler.cli.flags import add_flags, flag_values
from labeler.labeling.config import ClusterSettings

COMMAND = "judge"
RUN_OPTIONS = ("overwrite", "rebuild_manifest", "max_unit_retries", "retry_rejected", "output_lock", "allow_engine_change", "json", "quiet", "verbose")
CLUSTER_OPTIONS = ("workers", "address", "gpus_per_worker", "worker_start_timeout")  # not --checker-processes: a judge checks no answers


def register(subparsers) -> None:
    from labeler.judging.config import JudgeConfig

    parser = add_command(
        subparsers,
        COMMAND,
        help="ask an LLM judge for the earliest wrong step of each solution (ProcessBench's protocol)",
        description="Show a judge model each solution as numbered paragraphs and ask for the index of the earliest wrong one "
        "in \\boxed{} (-1: none); with --votes K, sample K critiques and keep their majority. Critiques that state no "
        "verdict, or contradict themselves, are sampled again with other seeds (--critique-retries), then their solution "
        "goes to rejected/ with the reason. "
        "Writes judgments/ shards as a resumable job: rerun the same command to resume.",
        usage_errors="bad usage (a setting out of range, a --prompt-template that cannot be read or lacks a placeholder), "
        "unreadable input, an input with no rows or too many rejected, an --output that cannot be written or read or that "
        "another driver holds, or settings, input or engine that differ from the job already in --output",
    )
    names = [f.name for f in fields(JudgeConfig)]
    first = ("input", "output", "model")
    add_flags(parser, JudgeConfig, only=(*first, *(name for name in names if name not in first)))
    add_flags(parser, ClusterSettings, only=CLUSTER_OPTIONS)
    add_flags(parser, RunOptions, only=RUN_OPTIONS)
    parser.set_defaults(handler=run_judge_command)


def config_from_args(args: argparse.Namespace, model_name: str):
    """The JudgeConfig of the flags; ValueError (naming the flag) for a bad setting or template."""
    from labeler.judging.config import JudgeConfig
    from labeler.judging.prompts import DEFAULT_TEMPLATE, TemplateError

    values = flag_values(args, JudgeConfig) | {"model": model_name}
    path = values.pop("template")
    template = DEFAULT_TEMPLATE if path is None else read_template(path)
    try:
        return JudgeConfig(**values, template=template)
    except TemplateError as error:
        raise ValueError(f"--prompt-template {path}: {error}") from error


def read_template(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"--prompt-template {path}: cannot read: {getattr(error, 'strerror', None) or error}") from error


def run_judge_command(args: argparse.Namespace) -> int:
    from labeler.inputs.readers import InputError
    from labeler.judging.job import run_judge
    from labeler.store.manifest import ConfigMismatchError
    from labeler.store.reader import ShardsError
    from workers.local_executor import LocalExecutor
    from workers.model_source import EMBEDDED_MODEL, describe_model
    from workers.vllm_generator import start_engine

    try:
        options = RunOptions(**flag_values(args, RunOptions, only=RUN_OPTIONS))
    except ValueError as error:
        return usage_error(COMMAND, str(error))
    if args.workers is None and (args.address or args.gpus_per_worker is not None):
        return usage_error(COMMAND, "--ray-address and --gpus-per-worker need --workers")
    model_name = args.model or EMBEDDED_MODEL
    try:  # every setting checked before an engine starts
        cluster = None
        if args.workers is not None:
            cluster = ClusterSettings(**flag_values(args, ClusterSettings, only=CLUSTER_OPTIONS), engine_log_level="INFO" if options.verbose else "ERROR")
        if cluster is not None and cluster.gpus_per_worker:
            args.tensor_parallel_size = cluster.gpus_per_worker  # one engine spans its worker's GPUs
        config = config_from_args(args, model_name)
    except ValueError as error:
        return usage_error(COMMAND, str(error))

    make_generator = partial(start_engine, args.model, config)
    no_workers: tuple[type[Exception], ...] = ()
    if cluster is None:
        executor = LocalExecutor(make_generator, None, model_name=model_name, max_unit_retries=options.max_unit_retries)
    else:
        from workers.ray_executor import NoWorkerError, RayExecutor

        executor, no_workers = RayExecutor(cluster, make_generator, None, max_unit_retries=options.max_unit_retries), (NoWorkerError,)
    try:
        summary = run_judge(
            config,
            executor=executor,
            model_info=describe_model(args.model),
            **options.job_flags(),
        )
    except (InputError, ConfigMismatchError, ShardsError) as error:
        return usage_error(COMMAND, str(error))
    except no_workers as error:  # the cluster has no room for a worker, or none can load the model
        print(f"labeler {COMMAND}: error: {error}; committed units are kept: rerun to resume", file=sys.stderr)
        return EXIT_FAILURE
    print(json.dumps(asdict(summary), indent=1) if options.json else _format_summary(summary))
    return EXIT_OK


def _format_summary(summary) -> str:
    agreement = "n/a" if summary.mean_agreement is None else f"{summary.mean_agreement:.1%}"
    return "\n".join(
        [
            f"solutions judged   : {summary.solutions}",
            f"found no error in  : {summary.found_no_error}",
            f"votes per solution : {summary.votes}",
            f"mean agreement     : {agreement}",
            f"critiques drawn    : {summary.critiques} ({summary.critique_resamples} resampled)",
            f"rejected rows      : {summary.rejected_rows}",
            f"generated tokens   : {summary.generated_tokens}",
            f"units              : {summary.units_total} ({summary.units_run_now} run now)",
            f"wall time          : {summary.seconds:.1f}s",
            f"judgments          : {summary.files['judgments']}/*.parquet",
            f"rejected           : {summary.files['rejected']}/*.parquet",
            f"manifest           : {summary.files['manifest']}",
        ]
    )

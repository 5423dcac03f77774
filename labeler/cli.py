"""The `labeler` command: label, status, check. Logs go to stderr, results to stdout."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from dataclasses import asdict

from labeler import __version__
from labeler.command_line import add_format_arguments, column_flags
from labeler.config import FINAL_STEP_MODES, LabelConfig
from labeler.strategies import AFTER_FIRST_ERROR, STRATEGIES

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="labeler", description="Math-Shepherd-style step labels for Process Reward Models.")
    parser.add_argument("--version", action="version", version=f"prm-labeler {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_label_parser(subparsers)
    _add_status_parser(subparsers)
    from labeler.check_command import register as register_check

    register_check(subparsers)
    from labeler import eval_command, export_command, report_command, score_command, train_command

    for command in (train_command, score_command, eval_command, export_command, report_command):
        command.register(subparsers)
    return parser


def _add_label_parser(subparsers) -> None:

    p = subparsers.add_parser(
        "label",
        help="label the steps of math solutions with Monte-Carlo rollouts",
        description="Sample N completions from every step prefix of every solution, check their final answers, "
        "and write per-step soft/hard labels as Parquet shards. Rerun the same command to resume.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    data = p.add_argument_group("input and output")
    data.add_argument(
        "--input", default=None, help="jsonl, json (array), parquet, or hf:NAME[:CONFIG][@SPLIT]; default: the shipped sample problems"
    )
    add_format_arguments(data)
    data.add_argument("--output", required=True, help="output directory (labels/, rollouts/, rejected/, manifest.json)")
    data.add_argument("--limit", type=int, default=None, help="take only the first K rows")
    data.add_argument("--no-rollouts", action="store_true", help="do not write the rollouts/ table")
    data.add_argument("--overwrite", action="store_true", help="delete a previous job in --output and start over")

    sampling = p.add_argument_group("rollouts")
    sampling.add_argument("--model", default=None, help="hub id or local folder; default: the embedded SmolLM2-135M-Instruct")
    sampling.add_argument("--rollouts", type=int, default=8, help="completions sampled per step prefix (N)")
    sampling.add_argument("--temperature", type=float, default=0.7)
    sampling.add_argument("--top-p", type=float, default=1.0)
    sampling.add_argument("--max-new-tokens", type=int, default=256, help="token budget of each completion")
    sampling.add_argument("--seed", type=int, default=0, help="base seed; per-request seeds derive from it and the ids")
    sampling.add_argument("--shard-size", type=int, default=64, help="solutions per work unit (one shard, one commit)")
    sampling.add_argument("--solutions-per-problem", type=int, default=4, help="solutions sampled for rows that carry only a problem (M)")
    sampling.add_argument("--solution-max-new-tokens", type=int, default=512, help="token budget of each sampled solution")
    sampling.add_argument(
        "--final-step",
        choices=FINAL_STEP_MODES,
        default="check",
        help="label the last step by checking its stated answer (one rollout) or by rollouts",
    )
    sampling.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default="exhaustive",
        help="exhaustive: N rollouts from every prefix; first-error: binary search for the first error (hard labels); "
        "adaptive: rollouts in rounds until each prefix's label is settled",
    )
    sampling.add_argument(
        "--after-first-error",
        choices=AFTER_FIRST_ERROR,
        default="negative",
        help="first-error: label of the unsampled steps after the first error",
    )
    sampling.add_argument(
        "--no-stop-after-answer",
        action="store_true",
        help='let completions run on after the line that states "The answer is: ..." (by default they end with it)',
    )
    sampling.add_argument("--stop", action="append", default=[], metavar="TEXT", help="extra stop string (repeatable)")
    sampling.add_argument("--round-size", type=int, default=2, help="adaptive: rollouts per prefix per round")
    sampling.add_argument("--ci-width", type=float, default=0.5, help="adaptive: stop a prefix once its 95%% Wilson interval is narrower")
    sampling.add_argument("--checker-timeout", type=float, default=5.0, help="seconds per answer check before it is a 'timeout' verdict")

    engine = p.add_argument_group("engine")
    engine.add_argument("--dtype", default="auto")
    engine.add_argument("--max-model-len", type=int, default=None)
    engine.add_argument("--tensor-parallel-size", type=int, default=1, help="GPUs per engine")
    engine.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    engine.add_argument("--trust-remote-code", action="store_true", help="allow model/dataset repositories to run their own code")
    cluster = p.add_argument_group("Ray cluster (without --workers the job runs in this process)")
    cluster.add_argument("--workers", type=int, default=None, help="Ray workers, one vLLM engine each")
    cluster.add_argument("--ray-address", default=None, help="cluster to join: auto, ray://HOST:10001; unset: RAY_ADDRESS or a local Ray")
    cluster.add_argument(
        "--gpus-per-worker",
        type=int,
        default=None,
        help="GPUs per worker = its engine's tensor parallel size; unset: --tensor-parallel-size where the cluster has GPUs, else 0",
    )
    cluster.add_argument("--max-unit-retries", type=int, default=2, help="retries of a unit whose worker failed, then rows to rejected/")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--verbose", action="store_true", help="show vLLM's own log (INFO) on stderr; by default only its errors")
    p.set_defaults(handler=run_label)


def _add_status_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "status", help="show the progress of a labeling job", description="Units done/total, rows, tokens and rate of the job in DIR."
    )
    p.add_argument("directory", metavar="DIR")
    p.add_argument("--json", action="store_true", help="print the status as JSON")
    p.set_defaults(handler=run_status)


def config_from_args(args: argparse.Namespace, model_name: str) -> LabelConfig:
    from labeler.job import SAMPLE_INPUT

    return LabelConfig(
        input=args.input or SAMPLE_INPUT,
        output=args.output,
        model=model_name,
        preset=args.preset,
        limit=args.limit,
        split_rule=args.split_rule,
        max_row_chars=args.max_row_chars,
        columns=column_flags(args),
        rollouts=args.rollouts,
        temperature=args.temperature,
        top_p=args.top_p,
        max_new_tokens=args.max_new_tokens,
        seed=args.seed,
        shard_size=args.shard_size,
        solutions_per_problem=args.solutions_per_problem,
        solution_max_new_tokens=args.solution_max_new_tokens,
        final_step=args.final_step,
        strategy=args.strategy,
        after_first_error=args.after_first_error,
        stop_after_answer=not args.no_stop_after_answer,
        stop=tuple(args.stop),
        round_size=args.round_size,
        ci_width=args.ci_width,
        write_rollouts=not args.no_rollouts,
        trust_remote_code=args.trust_remote_code,
        dtype=args.dtype,
        max_model_len=args.max_model_len,
        tensor_parallel_size=args.tensor_parallel_size,
        gpu_memory_utilization=args.gpu_memory_utilization,
    )


def run_label(args: argparse.Namespace) -> int:
    from labeler.checker import AnswerChecker
    from labeler.inputs import InputError
    from labeler.job import run_job
    from labeler.manifest import ConfigMismatchError
    from workers.model_source import EMBEDDED_MODEL, describe_model, resolve_model

    model_name = args.model or EMBEDDED_MODEL
    if args.workers is None and (args.ray_address or args.gpus_per_worker is not None):
        return _fail("--ray-address and --gpus-per-worker need --workers")
    if args.gpus_per_worker:
        args.tensor_parallel_size = args.gpus_per_worker  # one engine spans its worker's GPUs
    try:
        config = config_from_args(args, model_name)
    except ValueError as error:
        return _fail(str(error))

    def make_generator():
        from workers.vllm_generator import VLLMGenerator

        source = resolve_model(args.model)
        return VLLMGenerator(
            source.path,
            model_name=source.name,
            dtype=config.dtype,
            max_model_len=config.max_model_len,
            tensor_parallel_size=config.tensor_parallel_size,
            gpu_memory_utilization=config.gpu_memory_utilization,
            trust_remote_code=config.trust_remote_code,
            seed=config.seed,
        )

    try:
        executor = _ray_executor(args, make_generator) if args.workers is not None else None
    except ValueError as error:
        return _fail(str(error))
    try:
        with AnswerChecker(timeout_s=args.checker_timeout) as checker:
            summary = run_job(
                config,
                generator_factory=make_generator,
                checker=checker,
                model_info=describe_model(args.model),
                overwrite=args.overwrite,
                progress_enabled=not args.quiet,
                executor=executor,
            )
    except (InputError, ConfigMismatchError) as error:
        return _fail(str(error))
    if args.json:
        print(json.dumps(asdict(summary), indent=1))
    else:
        print(_format_summary(summary))
    return EXIT_OK


def _ray_executor(args: argparse.Namespace, make_generator):
    from functools import partial

    from labeler.checker import AnswerChecker
    from workers.ray_executor import ClusterSettings, RayExecutor

    settings = ClusterSettings(
        workers=args.workers,
        address=args.ray_address,
        gpus_per_worker=args.gpus_per_worker,
        max_unit_retries=args.max_unit_retries,
        engine_log_level="INFO" if args.verbose else "ERROR",
    )
    return RayExecutor(settings, make_generator, partial(AnswerChecker, timeout_s=args.checker_timeout))


def _format_summary(summary) -> str:
    mean = "n/a" if summary.mean_soft_label is None else f"{summary.mean_soft_label:.3f}"
    positive = "n/a" if summary.positive_step_fraction is None else f"{summary.positive_step_fraction:.1%}"
    return "\n".join(
        [
            f"solutions labelled : {summary.solutions}",
            f"steps labelled     : {summary.steps}",
            f"mean soft label    : {mean}",
            f"steps hard-positive: {positive}",
            f"rejected rows      : {summary.rejected_rows}",
            f"generated tokens   : {summary.generated_tokens}",
            f"units              : {summary.units_total} ({summary.units_run_now} run now)",
            f"wall time          : {summary.seconds:.1f}s",
            f"labels             : {summary.files['labels']}/*.parquet",
            f"rollouts           : {summary.files['rollouts']}/*.parquet",
            f"rejected           : {summary.files['rejected']}/*.parquet",
            f"manifest           : {summary.files['manifest']}",
        ]
    )


def run_status(args: argparse.Namespace) -> int:
    from labeler.status import job_status, format_status

    try:
        status = job_status(args.directory)
    except (FileNotFoundError, ValueError) as error:
        return _fail(str(error))
    print(json.dumps(status, indent=1) if args.json else format_status(status))
    return EXIT_OK


def _fail(message: str) -> int:
    print(f"labeler: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=os.environ.get("LABELER_LOG_LEVEL", "WARNING"), stream=sys.stderr)
    args = build_parser().parse_args(argv)
    if "VLLM_LOGGING_CONFIG_PATH" not in os.environ:
        from workers.engine_logging import route_vllm_logs

        route_vllm_logs("INFO" if getattr(args, "verbose", False) else "ERROR")
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())

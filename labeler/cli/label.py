"""`labeler label`: Monte-Carlo step labels for the solutions of an input, written as a resumable job."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from functools import partial

from labeler.cli.common import EXIT_OK, add_format_arguments, column_flags, usage_error
from labeler.labeling.config import FINAL_STEP_MODES, LabelConfig
from labeler.labeling.strategies import AFTER_FIRST_ERROR, STRATEGIES


def register(subparsers) -> None:

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


def config_from_args(args: argparse.Namespace, model_name: str) -> LabelConfig:
    from labeler.labeling.job import SAMPLE_INPUT

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
    from labeler.checking.checker import AnswerChecker
    from labeler.inputs.readers import InputError
    from labeler.labeling.job import run_job
    from labeler.store.manifest import ConfigMismatchError
    from workers.local_executor import LocalExecutor
    from workers.model_source import EMBEDDED_MODEL, describe_model
    from workers.vllm_generator import start_engine

    model_name = args.model or EMBEDDED_MODEL
    if args.workers is None and (args.ray_address or args.gpus_per_worker is not None):
        return usage_error("label", "--ray-address and --gpus-per-worker need --workers")
    if args.gpus_per_worker:
        args.tensor_parallel_size = args.gpus_per_worker  # one engine spans its worker's GPUs
    try:
        config = config_from_args(args, model_name)
    except ValueError as error:
        return usage_error("label", str(error))

    make_generator = partial(start_engine, args.model, config)
    with AnswerChecker(timeout_s=args.checker_timeout) as checker:
        try:
            if args.workers is None:
                executor = LocalExecutor(make_generator, checker, model_name=model_name)
            else:
                executor = _ray_executor(args, make_generator)
        except ValueError as error:
            return usage_error("label", str(error))
        try:
            summary = run_job(
                config, executor=executor, model_info=describe_model(args.model), overwrite=args.overwrite, progress_enabled=not args.quiet
            )
        except (InputError, ConfigMismatchError) as error:
            return usage_error("label", str(error))
    if args.json:
        print(json.dumps(asdict(summary), indent=1))
    else:
        print(_format_summary(summary))
    return EXIT_OK


def _ray_executor(args: argparse.Namespace, make_generator):
    from labeler.checking.checker import AnswerChecker
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



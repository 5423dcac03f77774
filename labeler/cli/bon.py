"""`labeler bon`: best-of-N with one or more PRMs, against majority vote, pass@N and a random pick.

    labeler bon --input problems.jsonl --output runs/bon --candidates 64 --prm runs/prm --prm OTHER

Problem-only rows get --candidates solutions sampled by the model (rows that carry a solution are
candidates as they are, several rows per problem, and no model loads when every row does; --candidates
is then refused: --sample-solutions samples them in place of the given ones); each candidate's final answer is checked
against the reference, and each PRM scores every step. Accuracy at N = 1, 2, 4, ... up to the pool:
PRM selection by the min, product, last and mean of the step scores, PRM-weighted vote with each,
majority vote, pass@N (the oracle) and random, each the expected accuracy over subsets of N of the
pool (labeler/evaluation/best_of_n.py). A candidate a PRM could not fully score (past its max
length) ranks below every scored one; the results count those, and per method the share of
problems counted wrong only for a candidate whose answer was not checked. The candidates are a
labeling job in --output (strategy final-answer): a rerun resumes it, and a rerun with another
--prm samples nothing again; each PRM's scores are kept in OUTPUT/bon/scores/, reused while the
PRM's files, precision and max length are the same. Writes OUTPUT/bon/results.json and OUTPUT/bon/curves.png,
prints the table (or the results with --json).
"""

from __future__ import annotations

import argparse
import json
from functools import partial

from labeler.cli.common import EXIT_OK, RunOptions, add_command, log_to_stderr, quiet_transformers, usage_error
from labeler.cli.flags import add_flags, flag_values
from labeler.decoding.config import BestOfNConfig
from labeler.labeling.config import LabelConfig
from labeler.prm.backends import BackendConfig
from labeler.prm.config import TrainConfig

COMMAND = "bon"
# The candidates job's settings: LabelConfig's, minus what the final-answer strategy fixes
CANDIDATE_FIELDS = (
    "output", "model", "preset", "limit", "split_rule", "max_row_chars", "max_rejected_share", "columns", "sample_solutions",
    "temperature", "top_p", "seed", "shard_size", "solution_max_new_tokens", "stop_after_answer", "stop",
    "trust_remote_code", "dtype", "max_model_len", "tensor_parallel_size", "gpu_memory_utilization",
)  # fmt: skip
RUN_OPTIONS = (
    "overwrite", "rebuild_manifest", "max_unit_retries", "retry_rejected", "output_lock", "checker_timeout",
    "allow_engine_change", "json", "quiet", "verbose",
)  # fmt: skip
INPUT_HELP = "problems (and maybe solutions): jsonl, json, parquet, a folder of them or hf:NAME[:CONFIG][@SPLIT], the formats of labeler label"
USAGE_ERRORS = (
    "bad usage (a setting out of range), unreadable input or PRM, an --output that cannot be written or read or that "
    "another driver holds, or a candidates job in --output with other settings"
)


def register(subparsers) -> None:
    parser = add_command(subparsers, COMMAND, help="best-of-N accuracy with PRMs, votes and pass@N", description=__doc__, usage_errors=USAGE_ERRORS)
    add_candidate_flags(parser)
    add_flags(parser, BestOfNConfig)
    parser.set_defaults(handler=run_bon, candidates=None)  # None: --candidates not given (its default is BestOfNConfig's)


def add_candidate_flags(parser) -> None:
    """What `bon` and `search` share: the input, the candidates job, the PRM's device, the run options."""
    parser.add_argument("--input", required=True, help=INPUT_HELP)
    add_flags(parser, LabelConfig, only=CANDIDATE_FIELDS)
    add_flags(parser, TrainConfig, only=("device", "precision"))
    add_flags(parser, BackendConfig)
    add_flags(parser, RunOptions, only=RUN_OPTIONS)


def candidate_job_from_args(args: argparse.Namespace, candidates: int) -> LabelConfig:
    from labeler.decoding.candidates import candidate_job
    from workers.model_source import EMBEDDED_MODEL

    settings = {**flag_values(args, LabelConfig, only=CANDIDATE_FIELDS), "input": args.input, "model": args.model or EMBEDDED_MODEL}
    return candidate_job(settings, candidates)


def run_candidates_job(job: LabelConfig, args: argparse.Namespace, options: RunOptions, engine, checker):
    """Sample and check the candidates (or resume their job); the job's summary."""
    from labeler.labeling.job import run_job
    from workers.local_executor import LocalExecutor
    from workers.model_source import describe_model

    executor = LocalExecutor(engine, checker, model_name=job.model, max_unit_retries=options.max_unit_retries)
    return run_job(
        job,
        executor=executor,
        model_info=describe_model(args.model),
        **options.job_flags(),
    )


def hold_results(location, options: RunOptions):
    """The output's lock while the results are scored and written (the candidates job released its own)."""
    import contextlib

    from labeler.store.lock import OutputLock

    return OutputLock(location) if options.output_lock else contextlib.nullcontext()


def run_bon(args: argparse.Namespace) -> int:
    from labeler.checking.checker import AnswerChecker
    from labeler.decoding.candidates import read_candidates
    from labeler.decoding.prm_scores import scoring_settings
    from labeler.decoding.reranking import PrmToUse, best_of_n, format_table, write_results
    from labeler.inputs.readers import InputError
    from labeler.labeling.generation import NoGeneration, needs_generation
    from labeler.labeling.job import plan_job
    from labeler.prm.devices import place
    from labeler.cli.common import backend_config, prm_scorer
    from labeler.store.location import OutputLocation
    from labeler.store.manifest import ConfigMismatchError
    from labeler.store.reader import LabelsError
    from workers.vllm_generator import SharedEngine, start_engine

    candidates_given = args.candidates is not None
    if not candidates_given:
        args.candidates = BestOfNConfig.__dataclass_fields__["candidates"].default
    try:  # every setting checked before a checker, an engine or a PRM starts
        options = RunOptions(**flag_values(args, RunOptions, only=RUN_OPTIONS))
        config = BestOfNConfig(**flag_values(args, BestOfNConfig))
        job = candidate_job_from_args(args, config.candidates)
        placement = place(args.device, args.precision)
        backend = backend_config(args)
        checker = AnswerChecker(timeout_s=options.checker_timeout)
    except ValueError as error:
        return usage_error(COMMAND, str(error))
    try:
        plan = plan_job(job)  # what is to be sampled, before any model loads
    except InputError as error:
        return usage_error(COMMAND, str(error))
    given_only = not needs_generation(job.strategy, (row for unit in plan.units for row in unit.rows))
    if candidates_given and given_only and plan.units:
        return usage_error(
            COMMAND,
            f"--candidates {config.candidates} samples nothing here: every row of {job.input} carries a solution, and those "
            f"are the candidates as they are; add --sample-solutions to sample {config.candidates} solutions per problem "
            "in their place, or leave --candidates out to score the given ones",
        )
    log_to_stderr(options.quiet)
    if not options.verbose:
        quiet_transformers()
    start = partial(NoGeneration, job.model) if given_only else partial(start_engine, args.model, job)
    engine = SharedEngine(start)  # no model loads for a job that samples nothing
    with checker:
        try:
            run_candidates_job(job, args, options, engine, checker)
        except (InputError, ConfigMismatchError) as error:
            return usage_error(COMMAND, str(error))
        finally:
            engine.close()  # before the PRMs load: on a GPU they need its memory
    location = OutputLocation(job.output)
    load = lambda spec: prm_scorer(backend, spec, placement, config.prm_batch_size, job.trust_remote_code)
    with hold_results(location, options):
        if options.overwrite:
            location.delete_tree("bon")
        try:
            candidates = read_candidates(job.output)
            scoring = scoring_settings(placement.precision, backend=backend.prm_backend)
            prms = [PrmToUse(spec, partial(load, spec), scoring) for spec in config.prm]
            results = best_of_n(location, candidates, prms, subsets=config.subsets, seed=job.seed, rescore=config.rescore)
        except LabelsError as error:
            return usage_error(COMMAND, str(error).splitlines()[0])
        except ValueError as error:  # a PRM that cannot load
            return usage_error(COMMAND, f"--prm: {str(error).splitlines()[0]} (the candidates are saved: a rerun samples nothing again)")
        files = write_results(location, results)
    if options.json:
        print(json.dumps({**results, "files": files}, indent=1))
    else:
        print(format_table(results))
        print(f"results: {files['results']}\ncurves : {files['curves']}")
    return EXIT_OK

"""`labeler search`: step-level beam search guided by a PRM, beside best-of-N at equal generated tokens.

    labeler search --input problems.jsonl --output runs/search --prm runs/prm --beams 4 --proposals 4

B beams, K proposals per beam, each step cut at the step separator; the PRM ranks the partial
solutions and the top B are kept, until every kept beam has ended (an answer, the end of the turn)
or --max-steps (labeler/decoding/beam_search.py). Then, from the same run's counts, best-of-N at
equal generated tokens: --candidates solutions per problem are sampled and checked as `labeler bon`
samples them (a candidates job in --output: a rerun, or a bon run with the same settings, samples
nothing again), scored by the same PRM, and every best-of-N method is estimated at the N whose
candidates cost what the search cost per problem. Writes OUTPUT/search/results.json,
OUTPUT/search/problems.jsonl (per problem: the answer and every round's candidates, scores and
which were kept) and OUTPUT/search/comparison.png; prints the summary (or the results with --json).
Rerunning redoes the search (the same result: every request has its own seed).
"""

from __future__ import annotations

import argparse
import json
from functools import partial

from labeler.cli.bon import RUN_OPTIONS, USAGE_ERRORS, add_candidate_flags, candidate_job_from_args, hold_results, run_candidates_job
from labeler.cli.common import EXIT_OK, RunOptions, add_command, log_to_stderr, quiet_transformers, usage_error
from labeler.cli.flags import add_flags, flag_values
from labeler.decoding.config import BestOfNConfig, SearchConfig

COMMAND = "search"
BEST_OF_N_FIELDS = ("candidates", "subsets", "prm_batch_size", "rescore")


def register(subparsers) -> None:
    parser = add_command(
        subparsers, COMMAND, help="PRM-guided beam search, beside best-of-N at equal tokens", description=__doc__, usage_errors=USAGE_ERRORS
    )
    add_candidate_flags(parser)
    add_flags(parser, SearchConfig)
    add_flags(parser, BestOfNConfig, only=BEST_OF_N_FIELDS)
    parser.set_defaults(handler=run_search)


def run_search(args: argparse.Namespace) -> int:
    from labeler.checking.checker import AnswerChecker
    from labeler.decoding.beam_search import SearchSettings, beam_search, check_answers, step_sampling
    from labeler.decoding.comparison import search_problems, search_results, write_search
    from labeler.decoding.prm_scores import scoring_settings
    from labeler.inputs.readers import InputError
    from labeler.labeling.job import plan_job
    from labeler.prm.devices import place
    from labeler.cli.common import backend_config, prm_scorer
    from labeler.prm.scorers import release
    from labeler.store.location import OutputLocation
    from labeler.store.manifest import ConfigMismatchError
    from labeler.store.reader import LabelsError
    from workers.vllm_generator import SharedEngine, start_engine

    try:  # every setting checked before a checker, an engine or a PRM starts
        options = RunOptions(**flag_values(args, RunOptions, only=RUN_OPTIONS))
        config = SearchConfig(**flag_values(args, SearchConfig))
        bon = BestOfNConfig(**flag_values(args, BestOfNConfig, only=BEST_OF_N_FIELDS))
        job = candidate_job_from_args(args, bon.candidates)
        placement = place(args.device, args.precision)
        backend = backend_config(args)
        checker = AnswerChecker(timeout_s=options.checker_timeout)
        if job.greedy and config.beams * config.proposals > 1:  # beam_search asks for B x K completions of a prompt
            raise ValueError(
                f"--temperature {job.temperature:g} is greedy sampling: the --beams {config.beams} x --proposals "
                f"{config.proposals} = {config.beams * config.proposals} next steps sampled from each problem would all be "
                "the same one (vLLM refuses to draw more than one per prompt); use a temperature above 0, or --beams 1 "
                "--proposals 1"
            )
    except ValueError as error:
        return usage_error(COMMAND, str(error))
    log_to_stderr(options.quiet)
    if not options.verbose:
        quiet_transformers()
    import logging

    log = logging.getLogger("labeler.search")
    engine = SharedEngine(partial(start_engine, args.model, job))
    settings = SearchSettings(
        beams=config.beams, proposals=config.proposals, max_steps=config.max_steps, separator=config.separator,
        aggregate=config.aggregate, seed=job.seed, sampling=step_sampling(job.sampling, config.separator, config.step_max_new_tokens),
    )  # fmt: skip
    location = OutputLocation(job.output)
    scorer = None  # loaded once the candidates are sampled
    with checker:
        try:
            try:
                if config.best_of_n:
                    run_candidates_job(job, args, options, engine, checker)
                plan = plan_job(job)
            except (InputError, ConfigMismatchError) as error:
                return usage_error(COMMAND, str(error))
            with hold_results(location, options):
                try:
                    scorer = prm_scorer(backend, config.prm, placement, bon.prm_batch_size, job.trust_remote_code)
                except ValueError as error:
                    return usage_error(COMMAND, f"--prm: {str(error).splitlines()[0]}")
                problems = search_problems(plan)
                log.info("beam search on %d problems: %d beams, %d proposals each, up to %d steps", len(problems), config.beams, config.proposals, config.max_steps)
                searches = beam_search(problems, engine(), scorer, settings, progress=log.info)
                engine.close()
                check_answers(searches, checker)
                try:
                    results = search_results(
                        location, searches, plan, config, settings, scorer, bon if config.best_of_n else None, job,
                        scoring_settings(placement.precision, backend=backend.prm_backend),
                    )  # fmt: skip
                except LabelsError as error:
                    return usage_error(COMMAND, str(error).splitlines()[0])
                files = write_search(location, results, searches)
        finally:
            engine.close()
            release(scorer)
    if options.json:
        print(json.dumps({**results, "files": files}, indent=1))
    else:
        from labeler.decoding.comparison import format_summary

        print(format_summary(results))
        print("\n".join(f"{name:<9}: {path}" for name, path in files.items()))
    return EXIT_OK

"""`labeler select`: keep the best trajectories by a PRM's score, written as a fine-tuning dataset.

    labeler select --prm prm-run/best --input traces.jsonl --top 0.2 --output sft.jsonl
    labeler select --scores scores.jsonl --input traces.jsonl --top 0.2 --output sft.parquet

Scores every solution of --input with --prm (or takes the lines `labeler score` wrote for the same
input, --scores), ranks them by --by (default combined: the mean step score and the trajectory
score, weighted by --trajectory-weight) and writes the best --top share as {prompt, response}
records (plus ids and scores) to --output, .jsonl or .parquet. A trace's response is written as
`<think>...</think>` and its response, a plain solution as its steps joined by blank lines. The
input is read as `labeler label` reads it (--preset, --split, --max-steps, column flags). A summary
goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import asdict

from labeler.cli.common import (
    EXIT_OK,
    RunOptions,
    add_command,
    add_format_arguments,
    check_format_flags,
    column_flags,
    log_to_stderr,
    quiet_transformers,
    usage_error,
)
from labeler.cli.flags import add_flags, flag_values
from labeler.prm.backends import BackendConfig
from labeler.prm.config import TrainConfig

COMMAND = "select"
log = logging.getLogger("labeler.select")
RUN_OPTIONS = ("json", "quiet", "verbose")


def register(subparsers) -> None:
    from labeler.prm.scorers import PRM_SPEC_HELP
    from labeler.prm.selection import SelectConfig
    from labeler.prm.trajectory import CombinedScore

    parser = add_command(
        subparsers,
        COMMAND,
        help="keep the best trajectories by a PRM's score, as a fine-tuning dataset",
        description=__doc__,
        usage_errors="bad usage, an unreadable input, PRM or scores file, or nothing to select by",
    )
    scores = parser.add_mutually_exclusive_group(required=True)
    scores.add_argument(
        "--prm", metavar="SPEC", help=f"the PRM to score the input with: {PRM_SPEC_HELP} (a public PRM has no trajectory score: --by mean)"
    )
    scores.add_argument("--scores", metavar="FILE.jsonl", help="the lines `labeler score` wrote for this same input, instead of --prm")
    data = parser.add_argument_group("input")
    data.add_argument("--input", required=True, help="jsonl, json, parquet, hf:NAME[:CONFIG][@SPLIT], or labels shards (a job's output directory)")
    add_format_arguments(data)
    data.add_argument("--limit", type=int, default=None, metavar="K", help="only the first K rows (default: all rows)")
    out = parser.add_argument_group("output")
    out.add_argument("--output", required=True, metavar="FILE", help="the fine-tuning dataset, .jsonl or .parquet")
    add_flags(parser, SelectConfig)
    add_flags(parser, CombinedScore)
    run = parser.add_argument_group("run")
    run.add_argument("--batch-size", type=int, default=8, help="solutions per forward pass (default: 8)")
    add_flags(parser, TrainConfig, only=("device", "precision", "trust_remote_code"), into=run)
    add_flags(parser, BackendConfig, into=run)
    add_flags(parser, RunOptions, only=RUN_OPTIONS)
    parser.set_defaults(handler=run_select)


def run_select(args: argparse.Namespace) -> int:
    from labeler.evaluation.solutions import read_solutions
    from labeler.inputs.presets import PresetOptions
    from labeler.inputs.readers import InputError
    from labeler.prm.selection import SelectConfig, select, write_selection
    from labeler.prm.trajectory import CombinedScore

    options_run = RunOptions(**flag_values(args, RunOptions, only=RUN_OPTIONS))
    log_to_stderr(options_run.quiet)
    if not options_run.verbose:
        quiet_transformers()
    try:
        config = SelectConfig(**flag_values(args, SelectConfig))
        combined = CombinedScore(**flag_values(args, CombinedScore))
        check_format_flags(args)
    except ValueError as error:
        return usage_error(COMMAND, str(error))
    if args.batch_size < 1:
        return usage_error(COMMAND, "--batch-size must be at least 1")
    if args.limit is not None and args.limit < 0:
        return usage_error(COMMAND, "--limit must be >= 0")
    options = PresetOptions.from_columns(args.split_rule, args.max_row_chars, column_flags(args), max_steps=args.max_steps)
    try:
        read = read_solutions(args.input, args.preset, options, args.limit, args.trust_remote_code)
        if args.prm is not None:
            scored = _score(args, read.solutions, combined)
        else:
            scored = _scored_from_file(args.scores, read.solutions, combined)
        records = select(read.solutions, scored, config)
        unscored = sum(s.aggregates.get(config.by) is None for s in scored)
        summary = write_selection(records, args.output, len(scored) - unscored, unscored, config.by)
    except (ValueError, InputError, OSError) as error:
        return usage_error(COMMAND, str(error).splitlines()[0])
    for rejected in read.rejected[:5]:
        log.warning("row %d rejected: %s: %s", rejected.row_index, rejected.field, rejected.reason)
    if options_run.json:
        print(json.dumps(asdict(summary) | {"rows_rejected": len(read.rejected)}, indent=1))
    else:
        lowest = "n/a" if summary.lowest_kept is None else f"{summary.lowest_kept:.4f}"
        print(f"{summary.kept} of {summary.scored} solutions kept (top {config.top:g} by {config.by}, lowest kept {lowest}) in {summary.path}")
        if summary.unscored or read.rejected:
            print(f"{summary.unscored} solutions without a {config.by} score and {len(read.rejected)} rejected rows left out")
    return EXIT_OK


def _score(args, solutions, combined):
    from labeler.cli.common import backend_config, prm_scorer
    from labeler.prm.scorers import backend_of, release
    from labeler.prm.devices import place
    from labeler.prm.scoring import score_solutions

    placement = place(args.device, args.precision)
    scorer = prm_scorer(backend_config(args), args.prm, placement, args.batch_size, args.trust_remote_code)
    log.info("%d solutions to score with %s on %s, %s backend", len(solutions), args.prm, placement.describe(), backend_of(scorer))
    try:
        return score_solutions(scorer, solutions, combined=combined)
    finally:
        release(scorer)


def _scored_from_file(path: str, solutions, combined):
    """The score lines of `path` for `solutions`, matched by solution_id, their aggregates recomputed
    from the step and trajectory scores (so --trajectory-weight applies); ValueError when one is missing."""
    from labeler.prm.scoring import scored_solution

    lines = {}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    record = json.loads(line)
                    lines[record["solution_id"]] = record
                except (ValueError, KeyError, TypeError) as error:
                    raise ValueError(f"{path}: line {number} is not a score line of `labeler score`: {error}") from None
    missing = [s for s in solutions if s.solution_id not in lines]
    if missing:
        raise ValueError(
            f"{path} has no score for {len(missing)} of the input's {len(solutions)} solutions (first: row {missing[0].row_index}, "
            f"solution_id {missing[0].solution_id}): score this same input, with the same format flags"
        )
    return [scored_solution(s, lines[s.solution_id]["step_scores"], lines[s.solution_id].get("trajectory_score"), combined) for s in solutions]

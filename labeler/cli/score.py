"""`labeler score`: score solutions with a trained PRM, or a public one through its adapter.

    labeler score --prm prm-run/best --input solutions.jsonl --output scores.jsonl
    labeler score --prm qwen-prm:Qwen/Qwen2.5-Math-PRM-7B --input solutions.jsonl --output scores.jsonl

--prm takes a folder saved by `labeler train` or KIND:MODEL for a public PRM (KIND math-shepherd,
rlhflow or qwen-prm; MODEL a hub id or folder). Remote code runs only with --trust-remote-code.

Input: the formats `labeler label` reads (jsonl, json, parquet, hf:NAME[:CONFIG][@SPLIT], with
--preset and column flags), or labels shards (a job's output directory or a shard). One JSON line
per solution: problem_id, solution_id, row_index, step_scores (probability that the solution is
still on track after each step; null for a step it could not score), steps_scored,
score_min, score_product, score_last, score_mean, trajectory_score (a PRM trained with trajectory
labels: the probability that the whole trajectory reaches the answer; else null), score_combined
((score_mean + W x trajectory_score) / (1 + W), W = --trajectory-weight), and `selected`: the best
of N solutions of its problem by --select-by (none, for a problem none of whose solutions has that score:
counted in the summary's problems_without_selection), and unscored_reason: why a step has no score, when one
has none (past the PRM's length limit; the problem or a step holds the PRM's own step marker, e.g. '<extra_0>'
or 'ки', and it cannot be read at all: --max-length does not help; a step or trajectory score from the PRM that is
not a finite number, NaN or inf, written as null), and solution_fingerprint (of the problem and steps scored:
what `labeler view` and `select --scores` check a join by solution_id with). Lines go to --output,
or to stdout when it is not given; a summary goes to stderr (to stdout with --output): it counts the steps past
the PRM's max length and the solutions not fully scored apart, by reason. --output is written whole once every
solution is scored (FILE.tmp, then moved onto FILE); a directory, or a file in a folder that does not exist, is
refused before the PRM loads; a FILE.tmp that cannot be moved onto FILE is kept, and the error names it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections import Counter

from labeler.cli.common import (
    EXIT_FAILURE,
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

COMMAND = "score"
log = logging.getLogger("labeler.score")
RUN_OPTIONS = ("json", "quiet", "verbose")


def register(subparsers) -> None:
    from labeler.prm.scorers import PRM_SPEC_HELP
    from labeler.prm.solution_scores import SELECT_BY
    from labeler.prm.trajectory import CombinedScore

    parser = add_command(
        subparsers,
        COMMAND,
        help="score solutions with a trained or a public PRM",
        description=__doc__,
        usage_errors="bad usage, or an unreadable input or PRM",
    )
    parser.add_argument("--prm", required=True, metavar="SPEC", help=f"the PRM: {PRM_SPEC_HELP}")
    data = parser.add_argument_group("input")
    data.add_argument(
        "--input", required=True, help="jsonl, json, parquet, hf:NAME[:CONFIG][@SPLIT], or labels shards (a job's output directory)"
    )
    add_format_arguments(data)
    data.add_argument("--limit", type=int, default=None, metavar="K", help="score only the first K rows (default: all rows)")
    out = parser.add_argument_group("output")
    out.add_argument("--output", default=None, metavar="FILE.jsonl", help="where the score lines go (default: stdout)")
    out.add_argument(
        "--select-by", choices=SELECT_BY, default="min", help="solution score that picks the best of N per problem (default: min)"
    )
    add_flags(parser, CombinedScore)
    run = parser.add_argument_group("run")
    run.add_argument("--batch-size", type=int, default=8, help="solutions per forward pass (default: 8)")
    add_flags(parser, TrainConfig, only=("device", "precision", "trust_remote_code"), into=run)
    add_flags(parser, BackendConfig, into=run)
    add_flags(parser, RunOptions, only=RUN_OPTIONS)
    # what `main` says after Ctrl-C or SIGTERM: the lines go to --output only once every solution is scored
    parser.set_defaults(handler=run_score, on_interrupt="nothing was written (score writes its lines once all are scored): rerun the command to score")


def run_score(args: argparse.Namespace) -> int:
    from labeler.prm.devices import place
    from labeler.inputs.readers import InputError
    from labeler.inputs.presets import PresetOptions
    from labeler.cli.common import backend_config, prm_scorer
    from labeler.prm.scorers import backend_of, release
    from labeler.prm.scoring import score_solutions
    from labeler.prm.solution_scores import PAST_LENGTH_LIMIT
    from labeler.evaluation.solutions import read_solutions

    run_options = RunOptions(**flag_values(args, RunOptions, only=RUN_OPTIONS))
    log_to_stderr(run_options.quiet)
    if not run_options.verbose:
        quiet_transformers()
    from labeler.prm.trajectory import CombinedScore

    if args.batch_size < 1:
        return usage_error(COMMAND, "--batch-size must be at least 1")
    try:
        combined = CombinedScore(**flag_values(args, CombinedScore))
    except ValueError as error:
        return usage_error(COMMAND, str(error))
    if args.limit is not None and args.limit < 0:
        return usage_error(COMMAND, "--limit must be >= 0")
    try:
        check_format_flags(args)
    except ValueError as error:
        return usage_error(COMMAND, str(error))
    problem = _output_problem(args.output)
    if problem:  # before the PRM loads: a path that cannot take the lines is refused, not found out after scoring
        return usage_error(COMMAND, problem)
    options = PresetOptions.from_columns(args.split_rule, args.max_row_chars, column_flags(args), max_steps=args.max_steps)
    try:
        read = read_solutions(args.input, args.preset, options, args.limit, args.trust_remote_code)
        placement = place(args.device, args.precision)
        scorer = prm_scorer(backend_config(args), args.prm, placement, args.batch_size, args.trust_remote_code)
    except (ValueError, InputError) as error:
        return usage_error(COMMAND, str(error).splitlines()[0])
    for rejected in read.rejected[:5]:
        log.warning("row %d rejected: %s: %s", rejected.row_index, rejected.field, rejected.reason)
    log.info(
        "%d solutions to score (%s), %d rows rejected; PRM %s on %s, %s backend",
        len(read.solutions),
        read.source,
        len(read.rejected),
        args.prm,
        placement.describe(),
        backend_of(scorer),
    )
    try:
        scored = score_solutions(scorer, read.solutions, select_by=args.select_by, combined=combined)
    finally:
        release(scorer)
    try:
        _write_lines((json.dumps(s.to_dict()) for s in scored), args.output)
    except OSError as error:  # after scoring: what could be written is kept, and where it is said
        kept = f"{args.output}.tmp"
        where = f"the scores are in {kept}: move it to where you want them" if os.path.isfile(kept) else "nothing was written"
        print(f"labeler {COMMAND}: error: cannot write --output {args.output}: {error}; {where}", file=sys.stderr)
        return EXIT_FAILURE
    summary = {
        "solutions": len(scored),
        "problems": len({s.problem_id for s in scored}),
        "prm_backend": backend_of(scorer),
        "rows_rejected": len(read.rejected),
        "steps_scored": sum(s.to_dict()["steps_scored"] for s in scored),
        "steps_past_max_length": sum(
            len(s.step_scores) - s.to_dict()["steps_scored"] for s in scored if s.unscored_reason == PAST_LENGTH_LIMIT
        ),
        "solutions_not_fully_scored": sum(s.unscored_reason is not None for s in scored),
        "unscored_reasons": dict(Counter(s.unscored_reason for s in scored if s.unscored_reason is not None).most_common()),
        "trajectories_scored": sum(s.trajectory_score is not None for s in scored),
        "select_by": args.select_by,
        # none of their solutions has a --select-by score: none is selected
        "problems_without_selection": len({s.problem_id for s in scored} - {s.problem_id for s in scored if s.selected}),
        "output": args.output or "-",
    }
    summary_stream = sys.stdout if args.output else sys.stderr
    text = json.dumps(summary, indent=1) if run_options.json else "\n".join(f"{key:<26}: {value}" for key, value in summary.items())
    cut = summary["solutions_not_fully_scored"]
    if cut and not run_options.json:
        reasons = "; ".join(f"{reason}: {count}" for reason, count in summary["unscored_reasons"].items())
        text += f"\n{cut} solution{'' if cut == 1 else 's'} not fully scored, by reason: {reasons}"
    print(text, file=summary_stream)
    return EXIT_OK


def _output_problem(output: str | None) -> str | None:
    """Why --output cannot take the score lines (None: it can): a directory, or a file in a folder that does not exist."""
    if output is None:
        return None
    if os.path.isdir(output):
        return f"--output {output} is a directory; give the file the score lines go to (e.g. {os.path.join(output, 'scores.jsonl')})"
    folder = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(folder):
        return f"--output {output}: its folder {folder} does not exist"
    return None


def _write_lines(lines, output: str | None) -> None:
    """The lines to stdout, or to `output` whole: written to OUTPUT.tmp, then moved onto it. A write cut short
    (a full disk, Ctrl-C) leaves no OUTPUT.tmp; one written whole that cannot be moved stays, for the caller to name."""
    if output is None:
        for line in lines:
            print(line)
        return
    temp = f"{output}.tmp"
    try:
        with open(temp, "w", encoding="utf-8") as handle:
            for line in lines:
                handle.write(line + "\n")
    except BaseException:
        if os.path.isfile(temp):
            os.remove(temp)
        raise
    os.replace(temp, output)

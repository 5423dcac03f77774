"""`labeler select`: keep the best trajectories by a PRM's score, written as a fine-tuning dataset, or
pick a review queue for humans (--queue).

    labeler select --prm prm-run/best --input traces.jsonl --top 0.2 --output sft.jsonl
    labeler select --scores scores.jsonl --input traces.jsonl --top 0.2 --output sft.parquet
    labeler select --queue convincing-wrong --prm SPEC --input OUT --budget 50 --output queue.jsonl
    labeler select --queue uncertain --judgments JUDGE_OUT --input OUT --budget 50 --output queue.jsonl

Scores every solution of --input with --prm (or takes the lines `labeler score` wrote for the same
input, --scores), ranks them by --by (default combined: the mean step score and the trajectory
score, weighted by --trajectory-weight) and writes the best --top share as {prompt, response}
records (plus ids and scores) to --output, .jsonl or .parquet. A trace's response is written as
`<think>...</think>` and its response, a plain solution as its steps joined by blank lines. The
input is read as `labeler label` reads it (--preset, --split, --max-steps, column flags). A summary
goes to stdout.

With --queue instead of --top it writes at most --budget solutions for a human to look at, in rank
order (labeler/review/queue.py): `convincing-wrong`, the solutions whose final answer is wrong that
the PRM scores highest by --by (default min), PRM800K's choice; or `uncertain`, those whose step
scores come nearest --threshold (default: the threshold a PRM of `labeler train` stored, else 0.5) and, with --judgments (a `labeler judge` output of the --input labels),
those whose Monte-Carlo first error the judge puts elsewhere, first. Solutions a reviewer already
corrected in `labeler view` are left out and counted (--include-reviewed queues them). The queue is an input that
`labeler label` and `labeler judge` read as it is, with the source's solution ids, and that
`labeler view` shows.
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
    from labeler.prm.selection import SELECTION, SelectConfig
    from labeler.prm.trajectory import CombinedScore
    from labeler.review.queue import QUEUE, QueueConfig

    parser = add_command(
        subparsers,
        COMMAND,
        help="keep the best trajectories by a PRM's score, as a fine-tuning dataset, or write a review queue",
        description=__doc__,
        usage_errors="bad usage, an unreadable input, PRM, scores or judgments file, or nothing to select by",
    )
    scores = parser.add_mutually_exclusive_group()
    scores.add_argument(
        "--prm",
        metavar="SPEC",
        help=f"the PRM to score the input with: {PRM_SPEC_HELP} (a public PRM has no trajectory score: --by mean, or min); "
        "needed by --top and --queue convincing-wrong, unless --scores",
    )
    scores.add_argument("--scores", metavar="FILE.jsonl", help="the lines `labeler score` wrote for this same input, instead of --prm")
    data = parser.add_argument_group("input")
    data.add_argument("--input", required=True, help="jsonl, json, parquet, hf:NAME[:CONFIG][@SPLIT], or labels shards (a job's output directory)")
    add_format_arguments(data)
    data.add_argument("--limit", type=int, default=None, metavar="K", help="only the first K rows (default: all rows)")
    out = parser.add_argument_group("output")
    out.add_argument(
        "--output", required=True, metavar="FILE", help="the fine-tuning dataset (--top) or the review queue (--queue), .jsonl or .parquet"
    )
    what = parser.add_argument_group(SELECTION).add_mutually_exclusive_group(required=True)
    add_flags(parser, SelectConfig, only=("top",), into=what)
    add_flags(parser, QueueConfig, only=("queue",), into=what)
    add_flags(parser, SelectConfig, only=("by",))
    add_flags(parser, QueueConfig, only=("budget", "threshold", "include_reviewed"))
    queue = next(group for group in parser._action_groups if group.title == QUEUE)
    queue.add_argument(
        "--judgments",
        metavar="OUT",
        help="--queue uncertain on a labels --input: a `labeler judge` output of those labels; solutions whose "
        "Monte-Carlo first error the judge puts elsewhere come first (then --prm or --scores is optional)",
    )
    add_flags(parser, RunOptions, only=("checker_timeout",), into=queue)
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
    if args.queue is not None:
        return run_queue(args, options_run)
    try:
        values = flag_values(args, SelectConfig)
        if values["by"] is None:
            del values["by"]  # the config's default
        config = SelectConfig(**values)
        combined = CombinedScore(**flag_values(args, CombinedScore))
        check_format_flags(args)
    except ValueError as error:
        return usage_error(COMMAND, str(error))
    queue_only = (("--budget", args.budget), ("--judgments", args.judgments), ("--include-reviewed", args.include_reviewed or None),
                  ("--threshold", args.threshold))  # fmt: skip
    given = [flag for flag, value in queue_only if value is not None]
    if given:
        return usage_error(COMMAND, f"{' and '.join(given)} {'apply' if len(given) > 1 else 'applies'} to --queue only, not --top")
    if args.prm is None and args.scores is None:
        return usage_error(COMMAND, "--top ranks by a PRM's score: pass --prm SPEC or --scores FILE")
    if args.batch_size < 1:
        return usage_error(COMMAND, "--batch-size must be at least 1")
    if args.limit is not None and args.limit < 0:
        return usage_error(COMMAND, "--limit must be >= 0")
    options = PresetOptions.from_columns(args.split_rule, args.max_row_chars, column_flags(args), max_steps=args.max_steps)
    try:
        read = read_solutions(args.input, args.preset, options, args.limit, args.trust_remote_code)
        if args.prm is not None:
            scored, _ = _score(args, read.solutions, combined)
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


def run_queue(args: argparse.Namespace, options_run: RunOptions) -> int:
    """`--queue NAME`: rank the input's solutions for review and write at most --budget of them (labeler/review/queue.py)."""
    from labeler.evaluation.solutions import SolutionsRead, is_labels_input, labelled_solution, read_solutions
    from labeler.inputs.presets import PresetOptions
    from labeler.inputs.readers import InputError
    from labeler.prm.trajectory import CombinedScore
    from labeler.review import queue as queues
    from labeler.store.reader import read_labelled_rows

    try:
        given = {"budget": args.budget, "by": args.by, "threshold": args.threshold}
        config = queues.QueueConfig(
            queue=args.queue, include_reviewed=args.include_reviewed, **{name: value for name, value in given.items() if value is not None}
        )
        combined = CombinedScore(**flag_values(args, CombinedScore))
        checker_timeout = RunOptions(checker_timeout=args.checker_timeout).checker_timeout
        check_format_flags(args)
        queues.check_output(args.output)
    except ValueError as error:
        return usage_error(COMMAND, str(error))
    with_prm = args.prm is not None or args.scores is not None
    if config.queue == queues.CONVINCING_WRONG:
        if not with_prm:
            return usage_error(COMMAND, "--queue convincing-wrong ranks by a PRM's score: pass --prm SPEC or --scores FILE")
        if args.judgments is not None:
            return usage_error(COMMAND, "--judgments applies to --queue uncertain only")
        if args.threshold is not None:
            return usage_error(COMMAND, "--threshold applies to --queue uncertain only: convincing-wrong ranks by the --by score")
    elif not (with_prm or args.judgments):
        return usage_error(COMMAND, "--queue uncertain needs --prm SPEC or --scores FILE, --judgments OUT, or both")
    elif args.threshold is not None and not with_prm:
        return usage_error(COMMAND, "--threshold places the PRM's scores: it needs --prm SPEC or --scores FILE")
    elif args.by is not None:
        return usage_error(COMMAND, "--by applies to --top and --queue convincing-wrong: --queue uncertain looks at every step's score")
    if args.batch_size < 1:
        return usage_error(COMMAND, "--batch-size must be at least 1")
    if args.limit is not None and args.limit < 0:
        return usage_error(COMMAND, "--limit must be >= 0")
    labels_input = is_labels_input(args.input)
    if args.judgments is not None and not labels_input:
        return usage_error(
            COMMAND, "--judgments compares the judge with Monte-Carlo labels: --input must be a labels output (of `labeler label`)"
        )
    options = PresetOptions.from_columns(args.split_rule, args.max_row_chars, column_flags(args), max_steps=args.max_steps)
    try:
        if labels_input:
            rows = read_labelled_rows(args.input)[: args.limit]
            read = SolutionsRead("labels", [labelled_solution(row) for row in rows])
            labels = queues.labels_facts(args.input, rows)
        else:
            read = read_solutions(args.input, args.preset, options, args.limit, args.trust_remote_code)
            labels = None
        judgments = queues.judge_facts(args.judgments, read.solutions) if args.judgments is not None else None
        scored, backend = None, None
        if args.prm is not None:
            scored, backend = _score(args, read.solutions, combined)
        elif args.scores is not None:
            scored = _scored_from_file(args.scores, read.solutions, combined)
        verdicts = None
        if config.queue == queues.CONVINCING_WRONG and not labels_input:
            verdicts = queues.check_final_answers(read.solutions, checker_timeout)
        candidates = queues.gather(read.solutions, scored=scored, by=config.by, verdicts=verdicts, labels=labels, judgments=judgments)
        if config.queue == queues.CONVINCING_WRONG:
            result = queues.rank_convincing_wrong(candidates, config.budget, config.by, config.include_reviewed)
            threshold = None
        else:
            threshold = _doubt_threshold(config.threshold, args.prm) if scored is not None else None
            result = queues.rank_uncertain(
                candidates, config.budget, prm=scored is not None, judged=judgments is not None, include_reviewed=config.include_reviewed,
                threshold=queues.DEFAULT_THRESHOLD if threshold is None else threshold,
            )  # fmt: skip
        by = config.by if config.queue == queues.CONVINCING_WRONG else None
        summary = queues.write_queue(result, args.output, config.budget, by, threshold)
    except (ValueError, InputError, OSError) as error:
        return usage_error(COMMAND, str(error).splitlines()[0])
    for rejected in read.rejected[:5]:
        log.warning("row %d rejected: %s: %s", rejected.row_index, rejected.field, rejected.reason)
    if options_run.json:
        print(json.dumps(asdict(summary) | {"rows_rejected": len(read.rejected), "prm_backend": backend}, indent=1))
    else:
        print(queue_summary_text(summary, len(read.rejected)))
    return EXIT_OK


def queue_summary_text(summary, rows_rejected: int) -> str:
    """The summary of a queue, one figure a line."""
    from labeler.review.queue import CONVINCING_WRONG

    counts = summary.counts
    lines = [f"queue {summary.queue}: {summary.queued} solutions queued (budget {summary.budget}) in {summary.path}"]
    figure = lambda name, value: lines.append(f"  {name:<34}: {value}")
    figure("solutions read", counts["candidates"])
    figure("already reviewed, left out", f"{counts['already_reviewed']} (--include-reviewed queues them)" if counts["already_reviewed"] else 0)
    if summary.queue == CONVINCING_WRONG:
        figure("final answer correct", counts["correct"])
        figure("final answer wrong", counts["wrong"])
        figure(f"  of them without a {summary.by} score", counts["wrong_unscored"])
        why = ", ".join(f"{name} {count}" for name, count in sorted(summary.unknown_verdicts.items()))
        figure("final answer not known", f"{counts['unknown_verdict']}" + (f" ({why})" if why else ""))
    else:
        if "disagree" in counts:
            figure("Monte-Carlo and judge disagree", counts["disagree"])
            figure("Monte-Carlo and judge agree", counts["agree"])
            figure("not judged", counts["not_judged"])
            figure("Monte-Carlo first error not known", counts["monte_carlo_unknown"])
            figure("labels not by Monte-Carlo", counts["not_monte_carlo"])
        if "unscored" in counts:
            figure("no step scored by the PRM", counts["unscored"])
        if summary.threshold is not None:
            figure("PRM scores most in doubt at", f"{summary.threshold:.3f}")
    figure("left out by the budget", counts["over_budget"])
    if rows_rejected:
        figure("rows rejected", rows_rejected)
    if summary.ids_changed:
        figure("read back under another solution_id", summary.ids_changed)
    lines.append(f"  read by `labeler label` and `labeler judge` as the {summary.layout} preset")
    return "\n".join(lines)


def _doubt_threshold(given: float | None, prm: str | None) -> float:
    """The uncertain queue's point of most doubt: --threshold, else the one a checkpoint of `labeler train`
    stored (it calls a first error below it), else 0.5 (--scores lines, public PRMs)."""
    from labeler.prm.scorers import stored_threshold
    from labeler.review.queue import DEFAULT_THRESHOLD

    if given is not None:
        return given
    stored = stored_threshold(prm) if prm is not None else None
    if stored is not None and not 0 < stored < 1:
        log.warning("%s stores the threshold %s, at an end of [0, 1] (its prm.json edited?): the uncertain queue doubts most at 0.5",
                    prm, stored)  # fmt: skip
        stored = None
    if stored is not None:
        log.info("the uncertain queue's point of most doubt: %.3f, the threshold %s chose on its validation split", stored, prm)
        return stored
    return DEFAULT_THRESHOLD


def _score(args, solutions, combined):
    """The PRM's scores of `solutions`, and the backend that scored them."""
    from labeler.cli.common import backend_config, prm_scorer
    from labeler.prm.scorers import backend_of, release
    from labeler.prm.devices import place
    from labeler.prm.scoring import score_solutions

    placement = place(args.device, args.precision)
    scorer = prm_scorer(backend_config(args), args.prm, placement, args.batch_size, args.trust_remote_code)
    backend = backend_of(scorer)
    log.info("%d solutions to score with %s on %s, %s backend", len(solutions), args.prm, placement.describe(), backend)
    try:
        return score_solutions(scorer, solutions, combined=combined), backend
    finally:
        release(scorer)


def _scored_from_file(path: str, solutions, combined):
    """The score lines of `path` for `solutions`, matched by solution_id, their aggregates recomputed
    from the step and trajectory scores (so --trajectory-weight applies); ValueError when one is missing,
    is not a score line (a score that is not a finite number or null), or scores another number of steps
    than its solution has or, by its solution_fingerprint, another problem or steps (scores of other solutions
    under the same ids: a job's sampled solutions); a line without a fingerprint is unchecked (a warning)."""
    from labeler.prm.scoring import scored_solution
    from labeler.ids import same_solution

    def no_constant(name):
        raise ValueError(f"{name} is not a score")

    lines, numbers = {}, {}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    record = json.loads(line, parse_constant=no_constant)
                    problem = _score_line_problem(record)
                    if problem:
                        raise ValueError(problem)
                except ValueError as error:
                    raise ValueError(f"{path}: line {number} is not a score line of `labeler score`: {error}") from None
                lines[record["solution_id"]] = record
                numbers[record["solution_id"]] = number
    missing = [s for s in solutions if s.solution_id not in lines]
    if missing:
        raise ValueError(
            f"{path} has no score for {len(missing)} of the input's {len(solutions)} solutions (first: row {missing[0].row_index}, "
            f"solution_id {missing[0].solution_id}): score this same input, with the same format flags"
        )
    unchecked = 0
    for s in solutions:
        given = len(lines[s.solution_id]["step_scores"])
        if given != len(s.steps):
            raise ValueError(
                f"{path}: line {numbers[s.solution_id]}: {given} step scores for solution {s.solution_id}, which has {len(s.steps)} "
                "steps: these are scores of other solutions (score this same input)"
            )
        same = same_solution(lines[s.solution_id].get("solution_fingerprint"), s.problem, s.steps)
        if same is False:
            raise ValueError(
                f"{path}: line {numbers[s.solution_id]}: scores of another solution under the id {s.solution_id} (its "
                "solution_fingerprint is not of this problem and steps): score this same input"
            )
        unchecked += same is None
    if unchecked:
        log.warning(
            "%s: %d score lines name no solution_fingerprint (written by an older `labeler score`): joined by solution_id and "
            "step count only, unchecked", path, unchecked,
        )  # fmt: skip
    return [scored_solution(s, lines[s.solution_id]["step_scores"], lines[s.solution_id].get("trajectory_score"), combined) for s in solutions]


def _score_line_problem(record) -> str | None:
    """What makes `record` not a line of `labeler score` (None: it is one): its step scores, and its trajectory score."""
    from labeler.prm.solution_scores import is_score, score_line_problem

    problem = score_line_problem(record)
    if problem is None and record.get("trajectory_score") is not None and not is_score(record["trajectory_score"]):
        return f"trajectory_score {record['trajectory_score']!r} is not a number"
    return problem

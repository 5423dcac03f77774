"""`labeler eval`: compare step labels, or a PRM's step scores, with human labels.

    labeler eval --labels OUT --reference processbench/gsm8k.jsonl --reference processbench/math.jsonl
    labeler eval --scores scores.jsonl --threshold 0.5 --reference processbench/gsm8k.jsonl --json
    labeler eval --prm runs/prm --prm qwen-prm:Qwen/Qwen2.5-Math-PRM-7B --reference processbench/gsm8k.jsonl

--prm (repeatable) scores the reference solutions themselves with each PRM (a folder saved by
`labeler train`, or KIND:MODEL for a public PRM, as `labeler score` takes it) and prints one table
per PRM, or with --json a list of reports in the order of the --prm flags.

Rows are matched by problem_id (and by their steps when a problem has several solutions).
ProcessBench files (steps, label = first wrong step or -1): accuracy on erroneous rows (predicted
first error == label), on correct rows (predicted -1), and their harmonic mean F1, per file (a
subset). PRM800K files (step ratings -1/0/+1; --neutral says what a 0 counts as): the same
first-error metrics plus step accuracy, error precision/recall/F1 and AUC.

A step is predicted wrong when its hard label is False (--labels), when its soft label is below
--threshold (--labels with --threshold), or when its score is below --threshold (--scores,
--prm, default 0.5). The predicted first error is the first step predicted wrong, -1 if none.
"""

from __future__ import annotations

import argparse
import json
import logging

from labeler.cli.common import EXIT_OK, RunOptions, add_command, log_to_stderr, quiet_transformers, usage_error
from labeler.cli.flags import add_flags
from labeler.prm.config import TrainConfig

COMMAND = "eval"


def register(subparsers) -> None:
    from labeler.evaluation.metrics import NEUTRAL_MODES
    from labeler.evaluation.references import REFERENCE_FORMATS
    from labeler.prm.scorers import PRM_SPEC_HELP

    parser = add_command(
        subparsers,
        COMMAND,
        help="compare labels or PRM scores with human step labels",
        description=__doc__,
        usage_errors="bad usage or unreadable files",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--labels", metavar="DIR", help="labels shards: a job's output directory, a folder of shards, or one shard")
    source.add_argument("--scores", metavar="FILE.jsonl", help="the output of `labeler score`")
    source.add_argument(
        "--prm", action="append", metavar="SPEC", help=f"score the reference solutions with this PRM (repeatable): {PRM_SPEC_HELP}"
    )
    parser.add_argument(
        "--reference",
        required=True,
        action="append",
        metavar="FILE",
        help="human labels (ProcessBench or PRM800K rows); repeat for several subsets",
    )
    parser.add_argument(
        "--reference-format",
        choices=REFERENCE_FORMATS,
        default="auto",
        help="format of the reference files (default: auto, detected from the first row)",
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="a step is wrong below this soft label or score (default: hard labels; 0.5 for scores)",
    )
    parser.add_argument("--neutral", choices=NEUTRAL_MODES, default="exclude", help="PRM800K: what a 0 rating counts as (default: exclude)")
    parser.add_argument("--id-column", default=None, help="the reference's id column, as given to `labeler label` (default: id)")
    run = parser.add_argument_group("run (with --prm)")
    run.add_argument("--batch-size", type=int, default=8, help="solutions per forward pass (default: 8)")
    add_flags(parser, TrainConfig, only=("device", "precision", "trust_remote_code"), into=run)
    add_flags(parser, RunOptions, only=("json", "quiet", "verbose"))
    parser.set_defaults(handler=run_eval)


def run_eval(args: argparse.Namespace) -> int:
    from labeler.evaluation.human_agreement import (
        DEFAULT_SCORE_THRESHOLD,
        evaluate,
        format_table,
        predictions_from_labels,
        predictions_from_scores,
    )
    from labeler.evaluation.references import read_reference
    from labeler.inputs.readers import InputError

    if args.threshold is not None and not 0 <= args.threshold <= 1:
        return usage_error(COMMAND, "--threshold must be in [0, 1]")
    if args.batch_size < 1:
        return usage_error(COMMAND, "--batch-size must be at least 1")
    score_threshold = DEFAULT_SCORE_THRESHOLD if args.threshold is None else args.threshold
    try:
        references = [read_reference(path, args.reference_format, args.id_column) for path in args.reference]
        if args.prm:
            return _eval_prms(args, references, score_threshold)
        if args.labels:
            predictions = predictions_from_labels(args.labels, args.threshold)
        else:
            predictions = predictions_from_scores(args.scores, score_threshold)
    except (ValueError, InputError) as error:
        return usage_error(COMMAND, str(error).splitlines()[0])
    report = evaluate(references, predictions, args.neutral)
    threshold = args.threshold if args.labels else score_threshold
    report = {"predictions": args.labels or args.scores, "kind": "labels" if args.labels else "scores", "threshold": threshold} | report
    print(json.dumps(report, indent=1) if args.json else format_table(report))
    return EXIT_OK


def _eval_prms(args: argparse.Namespace, references, threshold: float) -> int:
    """Each PRM scores the reference solutions; one report per PRM. ValueError when one cannot load."""
    from labeler.evaluation.human_agreement import evaluate, format_table, predictions_from_step_scores, reference_solutions
    from labeler.prm.devices import place
    from labeler.prm.scorers import load_scorer

    log_to_stderr(args.quiet)
    if not args.verbose:
        quiet_transformers()
    placement = place(args.device, args.precision)
    solutions = reference_solutions(references)
    reports = []
    for spec in args.prm:
        scorer = load_scorer(spec, placement=placement, batch_size=args.batch_size, trust_remote_code=args.trust_remote_code)
        logging.getLogger("labeler.eval").info("scoring %d reference solutions with %s on %s", len(solutions), spec, placement.describe())
        predictions = predictions_from_step_scores(solutions, scorer.step_scores(solutions), threshold)
        reports.append({"predictions": spec, "kind": "prm", "threshold": threshold} | evaluate(references, predictions, args.neutral))
        del scorer  # one PRM in memory at a time
    if args.json:
        print(json.dumps(reports, indent=1))
    else:
        print("\n\n".join(f"prm {report['predictions']} (threshold {threshold})\n{format_table(report)}" for report in reports))
    return EXIT_OK

"""`labeler eval`: compare step labels, a PRM's step scores, or a judge's verdicts with human labels.

    labeler eval --labels OUT --reference processbench/gsm8k.jsonl --reference processbench/math.jsonl
    labeler eval --scores scores.jsonl --threshold 0.5 --reference processbench/gsm8k.jsonl --json
    labeler eval --judgments JUDGED --reference processbench/gsm8k.jsonl

Rows are matched by problem_id (and by their steps when a problem has several solutions).
ProcessBench files (steps, label = first wrong step or -1): accuracy on erroneous rows (predicted
first error == label), on correct rows (predicted -1), and their harmonic mean F1, per file (a
subset). PRM800K files (step ratings -1/0/+1; --neutral says what a 0 counts as): the same
first-error metrics plus step accuracy, error precision/recall/F1 and AUC.

A step is predicted wrong when its hard label is False (--labels), when its soft label is below
--threshold (--labels with --threshold), or when its score is below --threshold (--scores,
default 0.5). The predicted first error is the first step predicted wrong, -1 if none. With
--judgments (the output of `labeler judge`) it is the judge's verdict, the majority of its votes:
how good a critic the judge is, before a large run trusts it.
"""

from __future__ import annotations

import argparse
import json

from labeler.cli.common import EXIT_OK, RunOptions, add_command, usage_error
from labeler.cli.flags import add_flags

COMMAND = "eval"


def register(subparsers) -> None:
    from labeler.evaluation.metrics import NEUTRAL_MODES
    from labeler.evaluation.references import REFERENCE_FORMATS

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
    source.add_argument("--judgments", metavar="DIR", help="a judge's verdicts: a `labeler judge` output, a folder of judgments shards, or one shard")
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
        help="a step is wrong below this soft label or score (default: hard labels; 0.5 for scores; not with --judgments)",
    )
    parser.add_argument("--neutral", choices=NEUTRAL_MODES, default="exclude", help="PRM800K: what a 0 rating counts as (default: exclude)")
    parser.add_argument("--id-column", default=None, help="the reference's id column, as given to `labeler label` (default: id)")
    add_flags(parser, RunOptions, only=("json",))
    parser.set_defaults(handler=run_eval)


def run_eval(args: argparse.Namespace) -> int:
    from labeler.evaluation.human_agreement import (
        DEFAULT_SCORE_THRESHOLD,
        evaluate,
        format_table,
        predictions_from_judgments,
        predictions_from_labels,
        predictions_from_scores,
    )
    from labeler.inputs.readers import InputError
    from labeler.evaluation.references import read_reference

    if args.threshold is not None and not 0 <= args.threshold <= 1:
        return usage_error(COMMAND, "--threshold must be in [0, 1]")
    if args.threshold is not None and args.judgments:
        return usage_error(COMMAND, "--threshold does not apply to --judgments: a judge names a step, it gives no score")
    try:
        if args.judgments:
            predictions = predictions_from_judgments(args.judgments)
        elif args.labels:
            predictions = predictions_from_labels(args.labels, args.threshold)
        else:
            predictions = predictions_from_scores(args.scores, DEFAULT_SCORE_THRESHOLD if args.threshold is None else args.threshold)
        references = [read_reference(path, args.reference_format, args.id_column) for path in args.reference]
    except (ValueError, InputError) as error:
        return usage_error(COMMAND, str(error).splitlines()[0])
    report = evaluate(references, predictions, args.neutral)
    threshold = args.threshold if args.threshold is not None or args.labels or args.judgments else DEFAULT_SCORE_THRESHOLD
    kind = "judgments" if args.judgments else ("labels" if args.labels else "scores")
    report = {"predictions": args.judgments or args.labels or args.scores, "kind": kind, "threshold": threshold} | report
    print(json.dumps(report, indent=1) if args.json else format_table(report))
    return EXIT_OK

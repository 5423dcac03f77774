"""`labeler eval`: compare step labels, a PRM's step scores, or a judge's verdicts with human labels.

    labeler eval --labels OUT --reference processbench/gsm8k.jsonl --reference processbench/math.jsonl
    labeler eval --scores scores.jsonl --threshold 0.5 --reference processbench/gsm8k.jsonl --json
    labeler eval --judgments JUDGED --reference processbench/gsm8k.jsonl
    labeler eval --labels mc=runs/mc --labels human=runs/pb-import --scores prm=scores.jsonl --reference gsm8k.jsonl --common
    labeler eval --prm ours=runs/prm --prm qwen=qwen-prm:Qwen/Qwen2.5-Math-PRM-7B --reference processbench/gsm8k.jsonl

Rows are matched by problem_id (and by their steps when a problem has several solutions).
ProcessBench files (steps, label = first wrong step or -1): accuracy on erroneous rows (predicted
first error == label), on correct rows (predicted -1), and their harmonic mean F1, per file (a
subset). PRM800K files (step ratings -1/0/+1; --neutral says what a 0 counts as): the same
first-error metrics plus step accuracy, error precision/recall/F1 and AUC.

--prm scores the reference solutions themselves with a PRM: a folder saved by `labeler train`,
or KIND:MODEL for a public PRM, as `labeler score` takes it (remote code only with
--trust-remote-code). A step is predicted wrong when its hard label is False (--labels), when its
soft label is below --threshold (--labels with --threshold), or when its score is below
--threshold (--scores, --prm; default 0.5, and for a PRM of `labeler train` the threshold it chose on
its validation split, which the report names). The predicted first error is the first step
predicted wrong, -1 if none. With --judgments (the output of `labeler judge`) it is the judge's
verdict, the majority of its votes: how good a critic the judge is, before a large run trusts it.

Missing is never a value: a row whose first predicted error is unknown, because a step before it
(any step, for a prediction of -1) has no prediction (an unlabelled step, step scores cut at the
PRM's max length), is counted apart as "no prediction", with its reason, and left out of the
figures; --missing as-correct reads such steps as predicted right instead. Each subset shows the
rows it scored and the rows with no prediction; PRM800K step metrics count their unpredicted steps.

--labels, --scores, --prm and --judgments repeat: several sources (Monte-Carlo, judge, consensus,
imported human labels, PRM scores, PRMs, a judge's verdicts) go side by side in one table, a row
per source and subset, each named by NAME= before its path or else by its folder or file name (a
PRM by its spec); --common compares them all on the reference rows that every source matched.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from functools import partial
from pathlib import Path

from labeler.cli.common import EXIT_OK, RunOptions, add_command, log_to_stderr, quiet_transformers, usage_error
from labeler.cli.flags import add_flags, flag_values
from labeler.prm.backends import BackendConfig
from labeler.prm.scorers import stored_threshold
from labeler.prm.config import TrainConfig

COMMAND = "eval"


def register(subparsers) -> None:
    from labeler.evaluation.human_agreement import EvalSettings
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
    parser.add_argument(
        "--labels",
        action="append",
        metavar="[NAME=]DIR",
        help="labels shards: a job's output directory, a folder of shards, or one shard; repeat to compare several",
    )
    parser.add_argument("--scores", action="append", metavar="[NAME=]FILE.jsonl", help="the output of `labeler score`; repeatable")
    parser.add_argument(
        "--prm",
        action="append",
        metavar="[NAME=]SPEC",
        help=f"score the reference solutions with this PRM; repeatable. SPEC: {PRM_SPEC_HELP}",
    )
    parser.add_argument(
        "--judgments",
        action="append",
        metavar="[NAME=]DIR",
        help="a judge's verdicts: a `labeler judge` output, a folder of judgments shards, or one shard; repeatable",
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
        help="a step is wrong below this soft label or score (default: hard labels; 0.5 for scores; for a PRM of `labeler train`, "
        "the threshold it chose on its validation split, else 0.5; not with --judgments)",
    )
    add_flags(parser, EvalSettings, into=parser)
    parser.add_argument("--neutral", choices=NEUTRAL_MODES, default="exclude", help="PRM800K: what a 0 rating counts as (default: exclude)")
    parser.add_argument("--id-column", default=None, help="the reference's id column, as given to `labeler label` (default: id)")
    parser.add_argument(
        "--common", action="store_true", help="with several sources: compare them only on the reference rows that every one of them matched"
    )
    run = parser.add_argument_group("run (with --prm)")
    run.add_argument("--batch-size", type=int, default=8, help="solutions per forward pass (default: 8)")
    add_flags(parser, TrainConfig, only=("device", "precision", "trust_remote_code"), into=run)
    add_flags(parser, BackendConfig, into=run)
    add_flags(parser, RunOptions, only=("json", "quiet", "verbose"))
    # what `main` says after Ctrl-C or SIGTERM: eval writes nothing until it prints its report, so nothing resumes
    parser.set_defaults(handler=run_eval, on_interrupt="nothing was saved (eval writes nothing before its report): rerun the command to evaluate")


def run_eval(args: argparse.Namespace) -> int:
    from labeler.evaluation.human_agreement import (
        DEFAULT,
        DEFAULT_SCORE_THRESHOLD,
        GIVEN,
        HARD_LABELS,
        JUDGE_VERDICTS,
        VALIDATION_SPLIT,
        EvalSettings,
        PredictionSource,
        evaluate,
        SWEPT_KINDS,
        evaluate_sources,
        format_comparison,
        format_table,
        predictions_from_judgments,
        predictions_from_labels,
        predictions_from_scores,
    )
    from labeler.evaluation.references import read_reference
    from labeler.inputs.readers import InputError

    args.labels, args.scores, args.prm, args.judgments = args.labels or [], args.scores or [], args.prm or [], args.judgments or []
    if not args.labels and not args.scores and not args.prm and not args.judgments:
        return usage_error(COMMAND, "give --labels DIR or --scores FILE or --prm SPEC or --judgments DIR (or several)")
    if args.threshold is not None and not 0 <= args.threshold <= 1:
        return usage_error(COMMAND, "--threshold must be in [0, 1]")
    if args.threshold is not None and not args.labels and not args.scores and not args.prm:
        return usage_error(COMMAND, "--threshold does not apply to --judgments: a judge names a step, it gives no score")
    if args.batch_size < 1:
        return usage_error(COMMAND, "--batch-size must be at least 1")
    named = [(kind, *_named(spec)) for kind in ("labels", "scores") for spec in getattr(args, kind)]
    named += [("prm", *_named(spec, by_spec=True)) for spec in args.prm]
    named += [("judgments", *_named(spec)) for spec in args.judgments]
    names = [name for _, name, _ in named]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        return usage_error(COMMAND, f"two sources are named {repeated[0]!r}: name them, as NAME=PATH")
    score_threshold = DEFAULT_SCORE_THRESHOLD if args.threshold is None else args.threshold
    settings = EvalSettings(**flag_values(args, EvalSettings))
    try:
        references = [read_reference(path, args.reference_format, args.id_column) for path in args.reference]
        sources = []
        for kind, name, path in named:
            if kind == "labels":
                from_ = GIVEN if args.threshold is not None else HARD_LABELS
                sources.append(PredictionSource(name, kind, path, args.threshold, predictions_from_labels(path, args.threshold), from_))
            elif kind == "scores":
                from_ = GIVEN if args.threshold is not None else DEFAULT
                sources.append(PredictionSource(name, kind, path, score_threshold, predictions_from_scores(path, score_threshold), from_))
            elif kind == "prm":
                stored = stored_threshold(path)  # a checkpoint's own, chosen on its validation split
                threshold = score_threshold if args.threshold is not None or stored is None else stored
                from_ = GIVEN if args.threshold is not None else DEFAULT if stored is None else VALIDATION_SPLIT
                predictions = _prm_predictions(args, path, references, threshold)
                sources.append(PredictionSource(name, kind, path, threshold, predictions, from_))
            else:
                sources.append(PredictionSource(name, kind, path, None, predictions_from_judgments(path), JUDGE_VERDICTS))
    except (ValueError, InputError) as error:
        return usage_error(COMMAND, str(error).splitlines()[0])
    if len(sources) == 1:
        (source,) = sources
        report = source.header() | evaluate(references, source.predictions, args.neutral, settings.missing, sweep=source.kind in SWEPT_KINDS)
        print(json.dumps(report, indent=1) if args.json else format_table(report))
        return EXIT_OK
    report = evaluate_sources(references, sources, args.neutral, args.common, settings.missing)
    print(json.dumps(report, indent=1) if args.json else format_comparison(report))
    return EXIT_OK


def _named(spec: str, by_spec: bool = False) -> tuple[str, str]:
    """(name, path) of `NAME=PATH`, or of a bare PATH named by its folder or file name (by itself with `by_spec`)."""
    name, equals, path = spec.partition("=")
    if equals and name and "/" not in name and ":" not in name:
        return name, path
    return spec if by_spec else (Path(spec.rstrip("/")).stem or spec), spec


def _prm_predictions(args: argparse.Namespace, spec: str, references, threshold: float):
    """A PRM's predictions on the reference solutions, scored now; ValueError when it cannot load."""
    from labeler.evaluation.human_agreement import predictions_from_step_scores, reference_solutions
    from labeler.cli.common import backend_config, prm_scorer
    from labeler.prm.scorers import backend_of, release, render_problem
    from labeler.prm.devices import place

    log_to_stderr(args.quiet)
    if not args.verbose:
        quiet_transformers()
    placement = place(args.device, args.precision)
    solutions = reference_solutions(references)
    scorer = prm_scorer(backend_config(args), spec, placement, args.batch_size, args.trust_remote_code)
    logging.getLogger("labeler.eval").info(
        "scoring %d reference solutions with %s on %s, %s backend", len(solutions), spec, placement.describe(), backend_of(scorer)
    )
    try:
        return predictions_from_step_scores(solutions, _scored_with_progress(scorer, solutions, args.batch_size), threshold,
                                            partial(render_problem, scorer))  # fmt: skip
    finally:
        release(scorer)


PROGRESS_BATCHES = 8  # the reference solutions are scored in chunks of this many --batch-size batches, a line each


def _scored_with_progress(scorer, solutions: list, batch_size: int) -> list:
    """The scorer's step scores of `solutions`, scored a chunk at a time with a progress line on stderr after each (how
    many are scored, their rate, an ETA): a few hundred rows on a CPU take minutes, which were silent."""
    from labeler.store.progress import format_duration

    log = logging.getLogger("labeler.eval")
    chunk, scores, started = max(batch_size * PROGRESS_BATCHES, 1), [], time.monotonic()
    for start in range(0, len(solutions), chunk):
        scores += scorer.step_scores(solutions[start : start + chunk])
        elapsed = max(time.monotonic() - started, 1e-9)
        rate, left = len(scores) / elapsed, len(solutions) - len(scores)
        log.info("%d/%d reference solutions scored (%.1f/s) | elapsed %s | ETA %s",
                 len(scores), len(solutions), rate, format_duration(elapsed), format_duration(left / rate))  # fmt: skip
    return scores

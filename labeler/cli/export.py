"""`labeler export`: write labels shards in the format another PRM trainer reads.

    labeler export OUT --format trl --output prm-train.jsonl
    labeler export OUT --format math-shepherd --output math-shepherd.parquet --threshold 0.5
    labeler export OUT --format openrlhf --output openrlhf.jsonl --tokenizer mistralai/Mistral-7B-v0.1
    labeler export OUT --format jsonl --output labels.jsonl

trl: {prompt, completions, labels} rows for TRL's PRMTrainer (boolean labels: it would truncate
floats); the PRMTrainer needs trl<=1.13 (trl.experimental.prm, removed in 1.14). openrlhf:
{input, label} for OpenRLHF's train_prm (openrlhf<=0.9.5; removed in 0.9.6): `input` with a
placeholder token after each step (`ки`, or --placeholder), `label` a list of "+"/"-", one per
placeholder; train it with --input_key input --label_key label --placeholder_token ки
--reward_tokens + -. math-shepherd: {input, label} with `ки` step tags and +/- labels in the text.
jsonl: the label columns as they are. Boolean labels are the hard labels, or soft >= --threshold;
a step not measured at N (label_method early_stop, inferred, retraced: a search strategy's, with a hard
label only) is written with its hard label, under --threshold too, and counted apart in the summary;
a solution is cut before its first unlabelled step. Steps and labels of every row are checked to
line up before anything is written; the output's extension (.jsonl or .parquet) picks the file type.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from labeler.cli.common import EXIT_OK, RunOptions, add_command, add_output_flag, log_to_stderr, usage_error
from labeler.cli.flags import add_flags

COMMAND = "export"


def register(subparsers) -> None:
    from labeler.inputs.splitting import KI_TAG
    from labeler.prm.export import EXPORT_FORMATS

    parser = add_command(
        subparsers,
        COMMAND,
        help="export labels for TRL (trl<=1.13), OpenRLHF (<=0.9.5), Math-Shepherd-format trainers or as plain jsonl",
        description=__doc__,
        usage_errors="bad usage, unreadable or misaligned labels",
    )
    parser.add_argument("labels", metavar="DIR", help="labels shards: a job's output directory, a folder of shards, or one shard")
    parser.add_argument(
        "--format",
        required=True,
        choices=EXPORT_FORMATS,
        help="output format: trl is for TRL's PRMTrainer, which needs trl<=1.13 (gone from 1.14); openrlhf for OpenRLHF's "
        "train_prm, which needs openrlhf<=0.9.5 (gone from 0.9.6)",
    )
    add_output_flag(parser, required=True, metavar="PATH", help="output file, .jsonl or .parquet")
    parser.add_argument("--threshold", type=float, default=None, help="boolean label = soft label >= this (default: the hard labels)")
    parser.add_argument(
        "--placeholder",
        default=KI_TAG,
        metavar="TOKEN",
        help=f"openrlhf: the placeholder after each step, train_prm's --placeholder_token; one token of the model's tokenizer "
        f"(default: {KI_TAG}, Math-Shepherd's step tag)",
    )
    parser.add_argument(
        "--tokenizer",
        default=None,
        metavar="MODEL",
        help="openrlhf: read every row with this model's tokenizer (hub id or folder) as OpenRLHF's reader will, and refuse "
        "the export unless each row holds one placeholder token per label (default: no check)",
    )
    add_flags(parser, RunOptions, only=("json",))
    parser.set_defaults(handler=run_export)


def run_export(args: argparse.Namespace) -> int:
    from labeler.prm.export import export_labels

    log_to_stderr()
    if args.threshold is not None and not 0 <= args.threshold <= 1:
        return usage_error(COMMAND, "--threshold must be in [0, 1]")
    try:
        summary = export_labels(args.labels, args.format, args.output, args.threshold, args.placeholder, args.tokenizer)
    except ValueError as error:  # ExportError, LabelsError
        return usage_error(COMMAND, str(error).splitlines()[0])
    if args.json:
        print(json.dumps(asdict(summary), indent=1))
    else:
        print(f"{summary.solutions} solutions, {summary.steps} steps written to {summary.path} ({summary.format})")
        if summary.solutions_cut or summary.solutions_skipped:  # a boolean format writes no step without a label
            print(
                f"{summary.solutions_cut} solutions cut before their first unlabelled step; "
                f"{summary.solutions_skipped} left out: their first step is unlabelled"
            )
        if summary.not_measured:  # a search strategy's early-stopped, inferred or retraced steps: no c/N behind them
            methods = ", ".join(f"{count} {method}" for method, count in summary.not_measured.items())
            how = "their label_method says which" if args.format == "jsonl" else "written from their hard label"
            if args.threshold is not None and args.format != "jsonl":
                how += f" (no soft label to compare with --threshold {args.threshold:g})"
            print(f"{sum(summary.not_measured.values())} steps not measured at N ({methods}) {how}")
    return EXIT_OK

"""`labeler import`: the step labels a dataset already holds, as a labels output of our schema.

    labeler import --preset processbench --input ../shared/data/processbench/gsm8k.jsonl --output runs/pb-gsm8k
    labeler import --preset prm800k --input prm800k/phase2_train.jsonl --output runs/prm800k --neutral positive
    labeler import --preset math-shepherd --input hf:peiyi9979/Math-Shepherd --answers gsm8k-and-math.jsonl --output runs/ms

The output is written as `labeler label` writes one (labels/ shards, rejected/, manifest.json,
commit records), so `labeler train`, `eval`, `export`, `report` and `status` read it unchanged.
Each labelled step has label_method "human" (its hard label the dataset's, soft label null, counts
0); a step the dataset does not label is "unlabelled" with the reason; label_source says who made
the labels. What each format says:

  processbench   label = the first wrong step (-1: none): the steps before it positive, it negative,
                 the steps after it unlabelled (ProcessBench does not judge them). label_source human.
  prm800k        ratings +1 / -1 per step; a 0 (neutral) is what --neutral says (exclude: unlabelled);
                 a step the rater wrote is +1; label_source human.
  math-shepherd  the +/- tags of `label`: Math-Shepherd's released automatic labels (Monte-Carlo hard
                 estimates), not human ones: label_source monte-carlo. Rows whose final step is tagged
                 '-' state no right answer: --answers FILE gives it by problem text. OpenRLHF's process
                 reward rows (`label` a list of '+'/'-', placeholder ки) read the same way.

Rows that cannot be read go to rejected/ with the row, field and reason. Rerun the same command to
resume; other settings or another input in the same --output are refused.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from labeler.cli.common import EXIT_OK, RunOptions, add_command, usage_error
from labeler.cli.flags import add_flags, flag_values
from labeler.importing.config import ImportConfig

COMMAND = "import"
RUN_OPTIONS = ("overwrite", "rebuild_manifest", "output_lock", "json", "quiet")


def register(subparsers) -> None:
    parser = add_command(
        subparsers,
        COMMAND,
        help="import a dataset's human (or released) step labels as labels shards",
        description=__doc__,
        usage_errors="bad usage, an unreadable input or --answers file, an input with no rows or too many rejected, "
        "an --output that cannot be written or that another driver holds, or a different import already in --output",
    )
    add_flags(parser, ImportConfig)
    add_flags(parser, RunOptions, only=RUN_OPTIONS)
    parser.set_defaults(handler=run_import_command)


def run_import_command(args: argparse.Namespace) -> int:
    from labeler.importing.job import run_import
    from labeler.inputs.readers import InputError
    from labeler.store.manifest import ConfigMismatchError

    try:
        options = RunOptions(**flag_values(args, RunOptions, only=RUN_OPTIONS))
        config = ImportConfig(**flag_values(args, ImportConfig))
    except ValueError as error:
        return usage_error(COMMAND, str(error))
    try:
        summary = run_import(
            config,
            overwrite=options.overwrite,
            rebuild=options.rebuild_manifest,
            progress_enabled=not options.quiet,
            lock_output=options.output_lock,
        )
    except (InputError, ConfigMismatchError) as error:
        return usage_error(COMMAND, str(error))
    if options.json:
        print(json.dumps(asdict(summary), indent=1))
        return EXIT_OK
    positive = f"{summary.steps_positive / summary.steps_labelled:.1%}" if summary.steps_labelled else "n/a"
    lines = [
        ("solutions imported", f"{summary.solutions} ({summary.preset}, label_source {summary.label_source})"),
        ("steps", f"{summary.steps} ({summary.steps_labelled} labelled, {summary.steps - summary.steps_labelled} unlabelled)"),
        ("steps positive", positive),
        ("rejected rows", str(summary.rejected_rows)),
        ("units", f"{summary.units_total} ({summary.units_run_now} written now)"),
        ("labels", f"{summary.files['labels']}/*.parquet"),
        ("rejected", f"{summary.files['rejected']}/*.parquet"),
        ("manifest", summary.files["manifest"]),
    ]
    print("\n".join(f"{name:<19}: {value}" for name, value in lines))
    return EXIT_OK

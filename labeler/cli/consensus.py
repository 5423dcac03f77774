"""`labeler consensus`: Monte-Carlo labels kept where an LLM judge names the same first error (Qwen's consensus filter)."""

from __future__ import annotations

import argparse
import json

from labeler.cli.common import EXIT_OK, RunOptions, add_command, usage_error
from labeler.cli.flags import add_flags, flag_values
from schemas.tables import SCHEMA_VERSION

COMMAND = "consensus"
RUN_OPTIONS = ("overwrite", "output_lock", "json")


def register(subparsers) -> None:
    from labeler.judging.consensus import ConsensusConfig

    parser = add_command(
        subparsers,
        COMMAND,
        help="keep the Monte-Carlo labels whose first error an LLM judge confirms",
        description="Join a labels output (`labeler label`) and a judgments output (`labeler judge`) on solution_id and write a "
        "labels output of the solutions whose Monte-Carlo first error equals the judge's (label_source \"consensus\"); "
        "--on-disagreement says what becomes of the others. Prints the agreement, overall and by first-error position "
        "(also in OUTPUT/consensus.json). Rerun the same command to complete an interrupted run.",
        usage_errors="bad usage, labels or judgments that cannot be read or joined (labels not from Monte-Carlo, steps that "
        "differ), an --output that cannot be written or that holds another job",
    )
    add_flags(parser, ConsensusConfig)
    add_flags(parser, RunOptions, only=RUN_OPTIONS)
    parser.set_defaults(handler=run_consensus_command)


def run_consensus_command(args: argparse.Namespace) -> int:
    from labeler.judging.consensus import ConsensusConfig, ConsensusError, run_consensus
    from labeler.store.manifest import ConfigMismatchError
    from labeler.store.reader import ShardsError

    try:
        config = ConsensusConfig(**flag_values(args, ConsensusConfig))
        options = RunOptions(**flag_values(args, RunOptions, only=RUN_OPTIONS))
    except ValueError as error:
        return usage_error(COMMAND, str(error))
    try:
        result = run_consensus(config, overwrite=options.overwrite, lock_output=options.output_lock)
    except (ConsensusError, ShardsError, ConfigMismatchError) as error:
        return usage_error(COMMAND, str(error))
    print(json.dumps(result, indent=1) if options.json else format_summary(result))
    return EXIT_OK


def format_summary(result: dict) -> str:
    def rate(value) -> str:
        return "n/a" if value is None else f"{value:.1%}"

    determined = result["compared"] - result["undetermined"]
    lines = [
        f"compared           : {result['compared']} solutions ({result['not_judged']} labelled but not judged, "
        f"{result['not_labelled']} judged but not labelled)",
        f"agreed             : {result['agreed']} ({rate(result['agreement_rate'])} of the {determined} determined)",
        f"disagreed          : {result['disagreed']}",
        f"undetermined       : {result['undetermined']} (an unlabelled step before the Monte-Carlo first error: out of the rates)",
        f"written            : {result['solutions_written']} ({', '.join(f'{n} {source}' for source, n in result['written'].items()) or 'none'}; "
        f"--on-disagreement {result['on_disagreement']})",
        *(
            [f"schema versions    : {', '.join(f'{n} of {v}' for v, n in result['schema_versions'].items())} (rows of older shards "
             f"keep their version and its rules)"]
            if set(result.get("schema_versions", {})) - {SCHEMA_VERSION} else []
        ),  # fmt: skip
        f"labels             : {result['output']}/labels/*.parquet",
        "",
        "agreement by first error (-1: none)",
        f"{'first error':>12} {'monte-carlo':>22} {'judge':>36}",
    ]
    by_mc = {row["first_error"]: row for row in result["by_monte_carlo_first_error"]}
    by_judge = {row["first_error"]: row for row in result["by_judge_first_error"]}

    def cell(row) -> str:
        if row is None:
            return ""
        undetermined = f", {row['undetermined']} undetermined" if row["undetermined"] else ""
        return f"{row['agreed']}/{row['solutions'] - row['undetermined']} ({rate(row['agreement_rate'])}){undetermined}"

    for position in sorted(set(by_mc) | set(by_judge)):
        lines.append(f"{position:>12} {cell(by_mc.get(position)):>22} {cell(by_judge.get(position)):>36}")
    return "\n".join(lines)

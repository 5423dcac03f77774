"""Consensus labels: Monte-Carlo labels kept where an LLM judge names the same first error.

Qwen's study of PRM training (Zhang et al., 2025) found that Monte-Carlo estimates train weaker PRMs
than an LLM judge or human labels, and that keeping only the solutions on which the Monte-Carlo first
error and the judge's agree ("consensus filtering") beats either alone. `labeler consensus` does that
filtering on a labels output (`labeler label`) and a judgments output (`labeler judge`) of the same
solutions, joined by solution_id, and writes a labels output that train, eval, export and report read.

Each solution of both is compared on its first error (the labels' first hard-negative step, -1 if none;
the judge's majority verdict). The Monte-Carlo first error is undetermined when an unlabelled step
comes before it (any step, when it is -1): such a solution is never an agreement, is counted apart
(`undetermined`), and is out of every agreement rate and of the groups by Monte-Carlo first error. What is written:
- an agreement: the Monte-Carlo row as it is, label_source "consensus";
- any other solution, by --on-disagreement: `drop` (the default) leaves it out; `judge` writes the
  judge's labels (label_method "judge" on every step: the steps before its first error positive, that
  step and the later ones negative; label_source "judge"); `monte-carlo` writes the Monte-Carlo row,
  label_source "monte-carlo".
Solutions only one side has are left out, and counted. The summary (agreement overall and by first-error
position) goes to OUTPUT/consensus.json, and to stdout.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass

import pyarrow as pa

from labeler.ids import stable_id
from labeler.labeling.config import INPUT_OUTPUT, JobSettings, check_choices, check_numbers, names_with, setting
from labeler.labeling.job import JobPlan, open_output
from labeler.labeling.planning import PlannedRow, plan_units
from labeler.records import SourceRow
from labeler.store.lock import hold_output
from labeler.store.manifest import resumable_schema
from labeler.store.progress import ProgressReporter
from labeler.store.corrections import correction_files
from labeler.store.reader import read_judgments_table, read_labels_table
from labeler.store.shard_store import LABELS_DIR, REJECTED_DIR, ShardStore
from labeler.labeling.tables import rejected_table
from schemas.judgments import NO_ERROR
from schemas.tables import LABELS_SCHEMA, MONTE_CARLO, SCHEMA_VERSION, UNCHECKED

log = logging.getLogger("labeler.consensus")

JOB_KIND = "consensus"
SUMMARY_NAME = "consensus.json"
ON_DISAGREEMENT = ("drop", "judge", "monte-carlo")
CONSENSUS, JUDGE = "consensus", "judge"  # label_source values written here (and MONTE_CARLO)


class ConsensusError(ValueError):
    """The labels and judgments cannot be joined as they are; the message names the solution."""


@dataclass(frozen=True)
class ConsensusConfig(JobSettings):
    labels: str = setting(help="Monte-Carlo labels: a `labeler label` output, a folder of labels shards, or one shard", group=INPUT_OUTPUT)
    judgments: str = setting(
        help="the judge's verdicts on the same solutions: a `labeler judge` output, a folder of judgments shards, or one shard",
        group=INPUT_OUTPUT,
    )
    output: str = setting(
        help="output directory: labels/ and manifest.json as `labeler label` writes them, and consensus.json (the summary)",
        group=INPUT_OUTPUT,
        may_change_on_resume=True,
    )
    on_disagreement: str = setting(
        "drop",
        choices=ON_DISAGREEMENT,
        help="a solution whose Monte-Carlo first error is not the judge's: drop it, write the judge's labels, or the Monte-Carlo ones",
        group=INPUT_OUTPUT,
    )
    shard_size: int = setting(1024, at_least=1, help="solutions per labels shard", group=INPUT_OUTPUT)

    def __post_init__(self) -> None:
        check_choices(self)
        check_numbers(self)

    @property
    def input(self) -> str:
        """How the manifest names the input (the job machinery's `input`)."""
        return f"labels {self.labels}, judgments {self.judgments}"


ConsensusConfig.ENGINE_ONLY = names_with(ConsensusConfig, "may_change_on_resume")
ConsensusConfig.GUARDS = ()


@dataclass(frozen=True)
class Comparison:
    solution_id: str
    monte_carlo: int | None  # first error, -1: none, None: not known (the labels' first_error is null)
    judge: int
    determined: bool  # False: an unlabelled step comes before the Monte-Carlo first error

    @property
    def agree(self) -> bool:
        return self.determined and self.monte_carlo == self.judge


def compare(labels: list[dict], judgments: list[dict]) -> tuple[list[tuple[dict, dict, Comparison]], dict]:
    """Join on solution_id: each (labels row, judgments row, comparison), and what was left out."""
    by_id = {row["solution_id"]: row for row in judgments}
    joined, not_judged = [], 0
    for row in labels:
        if row["label_source"] != MONTE_CARLO:
            raise ConsensusError(
                f"labels row solution_id={row['solution_id']}: label_source is {row['label_source']!r}; consensus compares a judge with Monte-Carlo labels only"
            )
        judgment = by_id.get(row["solution_id"])
        if judgment is None:
            not_judged += 1
            continue
        if list(judgment["steps"]) != list(row["steps"]):
            raise ConsensusError(
                f"solution {row['solution_id']}: its steps in the judgments differ from those in the labels "
                f"({len(judgment['steps'])} and {len(row['steps'])} steps): these judgments are not of these labels"
            )
        joined.append((row, judgment, Comparison(row["solution_id"], row["first_error"], judgment["first_error"], _determined(row))))
    labelled = {row["solution_id"] for row in labels}
    left_out = {"not_judged": not_judged, "not_labelled": sum(1 for sid in by_id if sid not in labelled)}
    return joined, left_out


def _determined(row: dict) -> bool:
    return row["first_error"] is not None  # null (schema 1.6; older shards recomputed on read): an unlabelled step before it


def consensus_rows(joined: list[tuple[dict, dict, Comparison]], on_disagreement: str) -> list[dict]:
    """The labels rows to write, in the labels' order."""
    rows = []
    for labels_row, judgment, comparison in joined:
        if comparison.agree:
            rows.append(_relabelled(labels_row, CONSENSUS))
        elif on_disagreement == "judge":
            rows.append(judge_row(labels_row, judgment))
        elif on_disagreement == "monte-carlo":
            rows.append(_relabelled(labels_row, MONTE_CARLO))
    return rows


def with_trajectory(row: dict) -> dict:
    """A labels row with the columns of the current schema: a row of a shard older than 1.4 has no trajectory
    columns, and its trajectory was never checked (trajectory_verdict "unchecked", no trajectory label); one older
    than 1.5 has no n_timeouts, and no rollout was left out of its labels for a timeout (they counted as wrong)."""
    if row.get("n_timeouts") is None:
        row = {**row, "n_timeouts": [0] * len(row["steps"])}
    if "trajectory_verdict" in row and row["trajectory_verdict"] is not None:
        return row
    return {**row, "thinking_steps": 0, "trajectory_verdict": UNCHECKED, "trajectory_label": None}


def _relabelled(row: dict, source: str) -> dict:
    """The Monte-Carlo row with its new label_source and its own schema_version: a row of an older schema was
    labelled by that schema's rules (before 1.5, a timed-out check counted as a wrong answer) and says so. A row of
    a schema that differs from the current one only in what the readers recomputed or in rules its strategy does not use
    (resumable_schema: 1.5, whose first_error it now carries by 1.6's rule, and 1.6, but for posterior's rows) is a
    current row, and says SCHEMA_VERSION."""
    version = SCHEMA_VERSION if resumable_schema(row.get("schema_version"), row.get("strategy")) else row.get("schema_version")
    return {**row, "label_source": source, "schema_version": version}


def judge_row(labels_row: dict, judgment: dict) -> dict:
    """The solution labelled from the judge's first error: steps before it positive, it and later ones negative."""
    n, first = len(labels_row["steps"]), judgment["first_error"]
    hard = [True] * n if first == NO_ERROR else [True] * first + [False] * (n - first)
    return {
        **labels_row,
        "soft_labels": [None] * n,
        "hard_labels": hard,
        "n_correct": [0] * n,
        "n_rollouts": [0] * n,
        "n_truncated": [0] * n,
        "n_timeouts": [0] * n,
        "label_method": [JUDGE] * n,
        "unlabelled_reason": [None] * n,
        "first_error": first,
        # the critiques made these labels; a sampled solution's own tokens stay counted (labels.generated_tokens)
        "generated_tokens": judgment["generated_tokens"] + labels_row["solution_tokens"],
        "unit_id": judgment["unit_id"],
        "model": judgment["model"],
        "strategy": JUDGE,
        "seed": judgment["seed"],
        "config_hash": judgment["config_hash"],
        "schema_version": SCHEMA_VERSION,
        "label_source": JUDGE,
    }


def summary(config: ConsensusConfig, labels: int, judgments: int, joined: list, left_out: dict, written: list[dict]) -> dict:
    comparisons = [comparison for _, _, comparison in joined]
    agreed = sum(c.agree for c in comparisons)
    undetermined = sum(not c.determined for c in comparisons)
    return {
        "labels": config.labels,
        "judgments": config.judgments,
        "output": config.output,
        "on_disagreement": config.on_disagreement,
        "labelled_solutions": labels,
        "judged_solutions": judgments,
        "compared": len(comparisons),
        **left_out,
        "agreed": agreed,
        "disagreed": len(comparisons) - agreed - undetermined,
        "undetermined": undetermined,
        "agreement_rate": _rate(comparisons),
        # an undetermined solution has no known Monte-Carlo first error: in no group of these
        "by_monte_carlo_first_error": _by_position([c for c in comparisons if c.determined], lambda c: c.monte_carlo),
        "by_judge_first_error": _by_position(comparisons, lambda c: c.judge),
        "written": dict(sorted(Counter(row["label_source"] for row in written).items())),
        "solutions_written": len(written),
        # per labels schema version: rows kept from an older shard keep its version (and its rules)
        "schema_versions": dict(sorted(Counter(row["schema_version"] for row in written).items())),
    }


def _by_position(comparisons: list[Comparison], position) -> list[dict]:
    groups: dict[int, list[Comparison]] = {}
    for comparison in comparisons:
        groups.setdefault(position(comparison), []).append(comparison)
    return [
        {
            "first_error": key,
            "solutions": len(group),
            "undetermined": sum(not c.determined for c in group),
            "agreed": sum(c.agree for c in group),
            "agreement_rate": _rate(group),
        }
        for key, group in sorted(groups.items())
    ]


def _rate(comparisons: list[Comparison]) -> float | None:
    """The share of the determined comparisons that agree; None when none is determined."""
    determined = [c for c in comparisons if c.determined]
    return sum(c.agree for c in determined) / len(determined) if determined else None


def run_consensus(config: ConsensusConfig, *, overwrite: bool = False, lock_output: bool = True) -> dict:
    """Write the consensus labels of `config` into config.output (resumable like a job: a rerun of the
    same command completes an interrupted run, and refuses other settings or inputs) and return the summary."""
    labels = [with_trajectory(row) for row in read_labels_table(config.labels).to_pylist()]
    reviewed = correction_files(config.labels)
    if reviewed:  # consensus compares the Monte-Carlo labels with the judge: a human label is neither
        log.warning(
            "%s keeps %d correction file(s) from `labeler view`: not applied here (consensus compares the job's own "
            "labels with the judge); `labeler train` and `eval` apply them to the labels output itself",
            config.labels, reviewed,
        )  # fmt: skip
    judgments = read_judgments_table(config.judgments).to_pylist()
    joined, left_out = compare(labels, judgments)
    written = consensus_rows(joined, config.on_disagreement)
    plan, by_key = _plan(written, config.shard_size)
    result = summary(config, len(labels), len(judgments), joined, left_out, written)
    store = ShardStore(config.output, (LABELS_DIR, REJECTED_DIR))
    content = "consensus:" + stable_id(json.dumps(written, sort_keys=True, default=str))  # what a resume must find again
    model = {"name": f"consensus of {config.labels} and {config.judgments}"}
    with hold_output(store, enabled=lock_output) as lock_warnings:
        warnings = list(lock_warnings) + open_output(store, config, plan, model, content, JOB_KIND, overwrite, False)
        progress = ProgressReporter(len(plan.units), len(written), enabled=False)
        for warning in warnings:
            progress.warn(warning)
        store.remove_uncommitted()
        store.write_input_rejected(rejected_table([], stage="input"))
        for unit in plan.units:
            if store.is_committed(unit.unit_id):
                continue
            rows = [by_key[row.row_key] for row in unit.rows]
            stats = {"solutions": len(rows), "steps": sum(len(row["steps"]) for row in rows), "rollouts": 0, "generated_tokens": 0, "rejected": 0, "seconds": 0.0}
            store.commit_unit(unit.unit_id, unit.shard_name, {LABELS_DIR: pa.Table.from_pylist(rows, schema=LABELS_SCHEMA)}, stats)
        store.compact()
        store.location.write_bytes(SUMMARY_NAME, (json.dumps(result, indent=1) + "\n").encode())
    return result


def _plan(rows: list[dict], shard_size: int) -> tuple[JobPlan, dict[str, dict]]:
    """Units of the rows to write, planned like a job's: deterministic ids from the solution ids."""
    planned = [
        PlannedRow(SourceRow(index, row["problem_id"], row["problem"], row["reference_answer"], tuple(row["steps"]), row["source"]), row["solution_id"])
        for index, row in enumerate(rows)
    ]
    return JobPlan("labels", len(rows), [], plan_units(planned, shard_size)), {row["solution_id"]: row for row in rows}

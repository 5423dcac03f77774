"""Arrow schemas of the labeling job's three output tables (a judge's judgments table: schemas/judgments.py).
Bump SCHEMA_VERSION on any change of columns or meaning."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

# 1.1: label_method gains "inferred"/"unlabelled"; their soft (and unlabelled hard) items are null.
# 1.2: rollouts cut by their token budget get verdict "truncated" and are counted apart (n_truncated);
#      label_method gains "early_stop"; unlabelled steps say why (unlabelled_reason); sampled solutions
#      carry their own tokens and whether their budget cut them; rollouts record their token budget.
# 1.3: label_method gains "human" (a label the input dataset gives, imported by `labeler import`: hard
#      label only, soft null, no rollouts) and "judge" (from an LLM judge's first error: labeler consensus);
#      each solution says where its labels come from (label_source, the last column: "monte-carlo",
#      "judge", "consensus", "human"). Shards of 1.2 have no label_source: readers take it as
#      "monte-carlo", the only source 1.2 knew.
# 1.4: trajectory-level labels beside the step labels: thinking_steps (a reasoning trace's thinking,
#      then its response), trajectory_verdict and trajectory_label (does the final answer it states,
#      a trace's response, match the reference). Shards of 1.3 and older stay readable
#      (labeler/store/reader.py): they read as plain solutions with no trajectory label.
# 1.5: an answer check that timed out (even after a retry) is left out of the label, like a cut rollout, and
#      counted per step in n_timeouts (before, it counted as a wrong answer); a timed-out final-step check
#      leaves that step unlabelled. A rollout from inside a trace's thinking that ends before closing it is
#      truncated, never checked (before, the answer it wrote while thinking was checked). A trace whose
#      thinking closes with nothing after it is unfinished. Shards of 1.4 and older have no n_timeouts:
#      readers that need it take 0 (no rollout was left out for a timeout then). A step none of whose rollouts is
#      correct is hard 0 only when at least --min-counted-rollouts (default 1) were counted and timed-out checks
#      are not the most of those sampled; else it is unlabelled, keeping its counts (n_rollouts may be > 0 there,
#      n_correct is 0).
# 1.6: first_error is null where the steps do not determine it: an unlabelled step comes before the first
#      hard-negative step (before any step, when none is negative). Before, it read -1 or the first negative step
#      whatever came before it. Readers (labeler/store/reader.py) recompute the column of older shards by this rule.
# 1.7: label_method gains "retraced" (posterior): a step the search passed without probing it, on rollouts of a shorter
#      prefix that wrote it word for word, enough of them, at least half right (hard label positive, soft null, no counts of its
#      own: those rollouts are in the rollouts table under the prefix they were drawn from). Before, such steps were
#      "inferred", on one correct rollout and no failures counted. Columns carry their descriptions as field metadata.
SCHEMA_VERSION = "1.7"


class SchemaError(ValueError):
    """A table about to be written breaks its data contract."""


def first_error(hard_labels: Sequence[bool | None]) -> int | None:
    """The labels table's first_error from a solution's hard labels: the index of the first step labelled
    False provided every step before it is labelled; -1 when every step is labelled and none is False; None
    (not known) when an unlabelled step (hard label None) comes first."""
    for i, label in enumerate(hard_labels):
        if label is None:
            return None
        if label is False:
            return i
    return -1


def _versioned(fields: list[pa.Field], table: str) -> pa.Schema:
    # each column says what it means in the files too (field metadata b"description": schemas/descriptions.py)
    from schemas.descriptions import COLUMN_DESCRIPTIONS, DESCRIPTION_KEY

    described = COLUMN_DESCRIPTIONS.get(table, {})
    fields = [f.with_metadata({DESCRIPTION_KEY: described[f.name]}) if f.name in described else f for f in fields]
    return pa.schema(fields, metadata={b"prm_labeler.table": table.encode(), b"prm_labeler.schema_version": SCHEMA_VERSION.encode()})


# One row per solution. Counts are kept beside the labels so users can re-derive
# hard/soft labels or thresholds without generating again.
LABELS_SCHEMA = _versioned(
    [
        pa.field("problem_id", pa.string(), nullable=False),
        pa.field("solution_id", pa.string(), nullable=False),
        pa.field("problem", pa.string(), nullable=False),
        pa.field("reference_answer", pa.string(), nullable=False),
        pa.field("steps", pa.list_(pa.string()), nullable=False),
        pa.field("soft_labels", pa.list_(pa.float64()), nullable=False),
        pa.field("hard_labels", pa.list_(pa.bool_()), nullable=False),
        pa.field("n_correct", pa.list_(pa.int32()), nullable=False),
        # Rollouts the label counts: soft = n_correct / n_rollouts. Under --truncated excluded (the
        # default) rollouts cut by their token budget, and those from inside a trace's thinking that
        # ended before closing it, are not among them but in n_truncated; under --truncated incorrect
        # they are among them too (a budget-cut one checked as it stands, one still thinking as wrong).
        pa.field("n_rollouts", pa.list_(pa.int32()), nullable=False),
        pa.field("n_truncated", pa.list_(pa.int32()), nullable=False),
        # Rollouts (or a final-step check) whose answer check timed out, even after a retry: never among
        # n_rollouts, never in the label. A step whose rollouts all timed out or were cut is unlabelled.
        pa.field("n_timeouts", pa.list_(pa.int32()), nullable=False),
        # "rollouts": sampled completions of the prefix; "final_answer": the step itself states
        # the answer and was checked directly (counted as one rollout); "early_stop" (adaptive, posterior):
        # sampled but stopped before N rollouts, hard label only, soft null; "inferred": not sampled,
        # hard label deduced from other steps (first-error search), soft label null; "retraced" (posterior): not sampled,
        # hard label positive from rollouts of a shorter prefix that wrote this step word for word, soft null; "unlabelled":
        # no label (soft and hard null), for the reason in unlabelled_reason (null on other steps), its
        # counts kept (some rollouts may have been counted, none correct: too few to call it wrong);
        # "human": given by the input dataset (`labeler import`) or by a reviewer (`labeler view`'s corrections,
        # which readers lay over the rows: labeler/store/corrections.py), hard label only, soft null, no rollouts;
        # "judge": from an LLM judge's first error (`labeler consensus`): steps before it positive, it and
        # the steps after it negative, soft null, no counted rollouts (in a row whose label_source is "judge",
        # or "human": a judge's row a reviewer corrected).
        pa.field("label_method", pa.list_(pa.string()), nullable=False),
        pa.field("unlabelled_reason", pa.list_(pa.string()), nullable=False),
        # The first hard-negative step when every step before it is labelled; -1 when every step is labelled and
        # none is negative; null otherwise (an unlabelled step comes first: it may be the true first error). first_error below.
        pa.field("first_error", pa.int32(), nullable=True),
        # A reasoning model's trace (the trace preset): steps[:thinking_steps] are its thinking, the
        # rest its response. 0: a plain step-by-step solution.
        pa.field("thinking_steps", pa.int32(), nullable=False),
        # The trajectory as a whole: the checker's verdict on the final answer it states (a trace: its
        # response): correct, incorrect, unparseable (it states none), timeout, or unfinished (it stops
        # before its answer: thinking cut off, a PRM800K trajectory that gave up, a sampled solution cut
        # by its budget), or unchecked (labels imported by `labeler import`). trajectory_label: verdict ==
        # correct; null on timeout and unchecked (not known).
        pa.field("trajectory_verdict", pa.string(), nullable=False),
        pa.field("trajectory_label", pa.bool_(), nullable=True),
        # Tokens generated for this solution: its rollouts, plus solution_tokens when the job sampled
        # the solution itself (problem-only rows; 0 otherwise). solution_truncated: its budget cut it.
        pa.field("generated_tokens", pa.int64(), nullable=False),
        pa.field("solution_tokens", pa.int64(), nullable=False),
        pa.field("solution_truncated", pa.bool_(), nullable=False),
        # provenance
        pa.field("row_index", pa.int64(), nullable=False),
        pa.field("unit_id", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("model", pa.string(), nullable=False),
        pa.field("strategy", pa.string(), nullable=False),
        pa.field("seed", pa.int64(), nullable=False),
        pa.field("config_hash", pa.string(), nullable=False),
        pa.field("schema_version", pa.string(), nullable=False),
        # Who made this solution's labels (LABEL_SOURCES): "monte-carlo" for `labeler label`; an import
        # says what the dataset's labels are ("human" for PRM800K and ProcessBench, "monte-carlo" for
        # Math-Shepherd's released automatic labels); "judge" and "consensus" for `labeler consensus`
        # (an LLM judge's first error; Monte-Carlo labels whose first error the judge confirmed).
        pa.field("label_source", pa.string(), nullable=False),
    ],
    "labels",
)

# One row per completion (or per final-answer check).
ROLLOUTS_SCHEMA = _versioned(
    [
        pa.field("problem_id", pa.string(), nullable=False),
        pa.field("solution_id", pa.string(), nullable=False),
        pa.field("step_index", pa.int32(), nullable=False),
        pa.field("rollout_index", pa.int32(), nullable=False),
        pa.field("seed", pa.int64(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("extracted_answer", pa.string(), nullable=True),
        pa.field("verdict", pa.string(), nullable=False),
        pa.field("tokens", pa.int32(), nullable=False),
        pa.field("finish_reason", pa.string(), nullable=False),
        # tokens the completion was allowed: --max-new-tokens, or less near the context limit (null: a final-answer check)
        pa.field("token_budget", pa.int32(), nullable=True),
    ],
    "rollouts",
)

# Input rows (or solutions) the job refused, with where and why.
REJECTED_SCHEMA = _versioned(
    [
        pa.field("row_index", pa.int64(), nullable=False),
        pa.field("problem_id", pa.string(), nullable=True),
        pa.field("stage", pa.string(), nullable=False),  # "input", "generation" or "import"
        pa.field("field", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("raw", pa.string(), nullable=False),
    ],
    "rejected",
)

VERDICTS = ("correct", "incorrect", "unparseable", "timeout", "truncated")
LABEL_METHODS = ("rollouts", "final_answer", "early_stop", "inferred", "retraced", "unlabelled", "human", "judge")
LABEL_SOURCES = ("monte-carlo", "judge", "consensus", "human")
MONTE_CARLO = "monte-carlo"  # the label_source of `labeler label`'s rows, and of every 1.2 shard
MEASURED_METHODS = ("rollouts", "final_answer", "early_stop")
# Steps whose hard label was not measured at N rollouts of their own prefix: "early_stop" (sampled, stopped before N:
# counts kept, soft null), "inferred" (not sampled: deduced from other steps), "retraced" (a rollout of an earlier
# prefix wrote this step word for word). A trainer or exporter must not read their hard label as a c/N estimate.
NOT_MEASURED_AT_N = ("early_stop", "inferred", "retraced")
UNCHECKED = "unchecked"  # trajectory_verdict of labels imported from a dataset, or older than 1.4: no answer was checked
TRAJECTORY_VERDICTS = ("correct", "incorrect", "unparseable", "timeout", "unfinished", UNCHECKED)

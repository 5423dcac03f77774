"""The corrections table: step labels a reviewer gave in `labeler view`, kept in OUT/corrections/.

Each save is one JSON Lines file of its own, written whole (temp file, then rename), named by its time,
its reviewer and a random part: reviewers working at once never write the same file, so none loses a
correction, and a file can be read or edited by hand. One line per correction, with the fields below
(the Arrow schema is the contract; JSON carries it). Bump CORRECTIONS_SCHEMA_VERSION on any change of
fields or meaning.

Actions (what `step_index` means for each):
  right, wrong   the step at step_index is right / wrong
  first_error    the step at step_index is the first wrong one: the steps before it are right; the steps
                 after it are left unlabelled (a reviewer judges up to the first error, as PRM800K's and
                 ProcessBench's labellers did)
  no_error       every step is right (step_index null)
  clear          the step at step_index goes back to the output's own label; step_index null: every step
                 of the solution does
A later correction of a step overrides an earlier one (ordered by created_at, then by file name and line).
A correction names the solution's steps as the reviewer saw them (steps_hash): on a solution whose steps
are no longer those, or that is no longer in the output, it is stale and not applied.
"""

from __future__ import annotations

import pyarrow as pa

CORRECTIONS_SCHEMA_VERSION = "1.0"
CORRECTIONS_DIR = "corrections"

RIGHT, WRONG, FIRST_ERROR, NO_ERROR, CLEAR = "right", "wrong", "first_error", "no_error", "clear"
ACTIONS = (RIGHT, WRONG, FIRST_ERROR, NO_ERROR, CLEAR)
STEP_ACTIONS = (RIGHT, WRONG, FIRST_ERROR)  # need a step_index; clear may have one

CORRECTIONS_SCHEMA = pa.schema(
    [
        pa.field("solution_id", pa.string(), nullable=False),
        pa.field("problem_id", pa.string(), nullable=False),
        # labeler.ids.stable_id(*steps) of the solution the reviewer saw
        pa.field("steps_hash", pa.string(), nullable=False),
        pa.field("action", pa.string(), nullable=False),  # ACTIONS
        pa.field("step_index", pa.int32(), nullable=True),  # 0-based
        pa.field("note", pa.string(), nullable=False),  # the reviewer's words, "" for none
        pa.field("reviewer", pa.string(), nullable=False),
        pa.field("created_at", pa.string(), nullable=False),  # ISO 8601, UTC, microseconds
        pa.field("schema_version", pa.string(), nullable=False),
    ],
    metadata={b"prm_labeler.table": b"corrections", b"prm_labeler.schema_version": CORRECTIONS_SCHEMA_VERSION.encode()},
)

"""Arrow schema of the judgments table that `labeler judge` writes (judgments/part-NNNNN.parquet): one row
per judged solution, with every vote's critique, and the rule that turns the votes into its verdict.
Bump JUDGMENTS_SCHEMA_VERSION on any change of columns or meaning."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pyarrow as pa

JUDGMENTS_SCHEMA_VERSION = "1.0"
NO_ERROR = -1  # the index a critique gives when it finds every step correct

JUDGMENTS_SCHEMA = pa.schema(
    [
        pa.field("problem_id", pa.string(), nullable=False),
        # the id `labeler label` gives the same solution (or the labels row's own, when judging labels)
        pa.field("solution_id", pa.string(), nullable=False),
        pa.field("problem", pa.string(), nullable=False),
        pa.field("steps", pa.list_(pa.string()), nullable=False),
        # One entry per vote: the critique that was kept (the first of its samples that could be
        # parsed), the 0-based index of the earliest wrong step it names (-1: none), the seed that
        # sampled it, and how many samples the vote took (1, plus the resamples of unparseable ones).
        pa.field("critiques", pa.list_(pa.string()), nullable=False),
        pa.field("critique_indices", pa.list_(pa.int32()), nullable=False),
        pa.field("critique_seeds", pa.list_(pa.int64()), nullable=False),
        pa.field("critique_samples", pa.list_(pa.int32()), nullable=False),
        # The judge's verdict: the majority of critique_indices (`majority`), and the share of votes that name it.
        pa.field("first_error", pa.int32(), nullable=False),
        pa.field("agreement", pa.float64(), nullable=False),
        pa.field("votes", pa.int32(), nullable=False),
        pa.field("generated_tokens", pa.int64(), nullable=False),  # every sample's tokens, the unparseable ones too
        # provenance
        pa.field("row_index", pa.int64(), nullable=False),
        pa.field("unit_id", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),  # the input's preset, or "labels"
        pa.field("model", pa.string(), nullable=False),  # the judge
        pa.field("seed", pa.int64(), nullable=False),  # the base seed of the critiques' seeds
        pa.field("template_hash", pa.string(), nullable=False),  # of the prompt template's text
        pa.field("config_hash", pa.string(), nullable=False),
        pa.field("schema_version", pa.string(), nullable=False),
    ],
    metadata={b"prm_labeler.table": b"judgments", b"prm_labeler.schema_version": JUDGMENTS_SCHEMA_VERSION.encode()},
)


def majority(indices: Sequence[int]) -> tuple[int, float]:
    """The verdict of a judge's votes: the index most of them name, and the share that name it.

    A tie goes to the earliest error among the tied indices (-1, no error, counts as later than every
    step): a judge that names a step as often as it names another, or as often as it finds none,
    is taken to flag the earliest, so that a consensus with Monte-Carlo must confirm it there.
    """
    if not indices:
        raise ValueError("no votes")
    counts = Counter(indices)
    most = max(counts.values())
    tied = [index for index, count in counts.items() if count == most]
    errors = [index for index in tied if index != NO_ERROR]
    return (min(errors) if errors else NO_ERROR), most / len(indices)

"""Whether an input is worth labelling: one whose rows are mostly rejected (another format than the
preset reads, a binary file read as JSON Lines) is refused as a whole, with its commonest reason,
before a model loads, instead of a job that labels nothing and exits 0.

A few bad rows are normal: they go to rejected/ and the job goes on. The rows of a refused input go there too,
into an output that holds no job yet (labeler/labeling/job.py keep_refused_rows). The share is judged over the
first JUDGED_ROWS rows read (all rows when fewer), so a huge input is refused without reading it all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from labeler.inputs.readers import InputError
from labeler.records import RejectedRow

JUDGED_ROWS = 100
SHOWN_REASONS = 3  # the commonest reasons an input refused for its rejected rows names
SHOWN_ROWS = 5  # the rejected rows whose reasons a job shows as it starts (all of them are in rejected/)


class TooManyRejectedError(InputError):
    """An input refused for its rejected rows; `rejected`: every row rejected so far, with its reason (the job
    writes them where the user can read them all: labeler/labeling/job.py keep_refused_rows)."""

    def __init__(self, message: str, rejected: Sequence[RejectedRow]):
        super().__init__(message)
        self.rejected = list(rejected)


def check_rejected_share(input_name: str, rows_read: int, rejected: Sequence[RejectedRow], max_share: float, preset: str | None) -> None:
    """TooManyRejectedError when more than `max_share` of the `rows_read` rows (at most JUDGED_ROWS: the job
    calls this once that many are read, or at the end) are rejected; `max_share` 1 never refuses."""
    if not rows_read or len(rejected) / rows_read <= max_share:
        return
    reasons = Counter((row.field, row.reason) for row in rejected)  # most_common: ties in the order first seen

    def described(field: str, reason: str, count: int) -> str:
        example = next(row.row_index for row in rejected if (row.field, row.reason) == (field, reason))
        return f"{count} row{'s' if count > 1 else ''} (e.g. row {example}): {field}: {reason}"

    (field, reason), count = reasons.most_common(1)[0]
    others = [described(field, reason, count) for (field, reason), count in reasons.most_common(SHOWN_REASONS)[1:]]
    more = len(reasons) - SHOWN_REASONS
    also = f"; also {'; '.join(others)}" if others else ""
    also += f"; and {more} other reason{'s' if more > 1 else ''}" if more > 0 else ""
    read_as = f"read as {preset}" if preset else "none readable"
    if len(rejected) == rows_read and rows_read < JUDGED_ROWS:
        how_many = f"every row rejected ({rows_read} of {rows_read}, {read_as})"
    else:
        how_many = f"{len(rejected)} of the first {rows_read} rows rejected ({read_as}), more than --max-rejected-share {max_share}"
    raise TooManyRejectedError(f"{input_name}: {how_many}; commonest reason, {described(field, reason, count)}{also}", rejected)


def describe_rejected(rejected: Sequence[RejectedRow], where: str) -> list[str]:
    """One line per rejected row, with its reason, for the first SHOWN_ROWS of them (rows numbered from 0,
    as in rejected/); then how many more there are and `where` they are written."""
    lines = [f"row {row.row_index} rejected: {row.field}: {row.reason}" for row in rejected[:SHOWN_ROWS]]
    if len(rejected) > SHOWN_ROWS:
        lines.append(f"{len(rejected) - SHOWN_ROWS} more rows rejected, each with its reason in {where}")
    return lines

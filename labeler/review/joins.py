"""Whether a row of another output that names a solution's id is of that solution.

Outputs are joined by solution_id, but an id names a solution within one job only: a labeling job's
sampled solutions get theirs from the problem row and a sample number, not from their steps, so
another run's judgment, queue line, labels row or PRM scores under the same id can be of other steps.
Such a row is another solution's: `labeler select --queue` refuses judgments of other steps, and
`labeler view` shows them as of a different solution, never as this one's verdict, critiques, rank or
scores. Rows that hold the steps are compared by them; PRM scores (`labeler score` lines, bon's kept
scores) carry the scored solution's fingerprint instead, a digest of its problem and steps
(labeler/ids.py solution_fingerprint, same_solution).
"""

from __future__ import annotations

from collections.abc import Sequence


def same_steps(theirs: Sequence[str] | None, steps: Sequence[str]) -> bool:
    """Whether the steps a joined row holds (`theirs`; None: it holds none) are the solution's `steps`."""
    return theirs is not None and list(theirs) == list(steps)

"""Stable identifiers: the same content gives the same id on every run and machine."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

_SEPARATOR = "\x1f"  # unit separator: cannot collide with ordinary text boundaries


def stable_id(*parts: str, length: int = 16) -> str:
    """Hex digest of the parts, joined unambiguously."""
    digest = hashlib.sha256(_SEPARATOR.join(parts).encode("utf-8")).hexdigest()
    return digest[:length]


def derived_seed(base_seed: int, *parts: str) -> int:
    """A per-request sampling seed that depends only on `parts` (callers pass the prompt's text:
    problem, reference answer, steps so far), never on row ids, batch order or worker."""
    digest = hashlib.sha256(_SEPARATOR.join((str(base_seed), *parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def solution_fingerprint(problem: str, steps: Sequence[str]) -> str:
    """What a score record names the solution it scored by: a stable digest of its problem and steps."""
    return stable_id("solution", problem, *steps, length=32)


def same_solution(fingerprint: str | None, problem: str, steps: Sequence[str]) -> bool | None:
    """Whether a joined record carrying `fingerprint` (solution_fingerprint) is of the solution of `problem`
    and `steps`; None when it carries none (written before records carried it): unchecked."""
    return None if fingerprint is None else fingerprint == solution_fingerprint(problem, steps)

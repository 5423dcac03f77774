"""Human corrections of step labels: written by `labeler view`, read over the labels by every reader.

The table and its actions are defined in schemas/corrections.py. Readers of a labels output
(`labeler train --labels OUT`, `eval --labels OUT`, `export`, `score`, `select`) see each corrected
solution with its reviewers' labels: a corrected step has label_method "human", its hard label the
reviewer's and no soft label (training uses the hard label as 0/1, as for imported human labels);
the steps after a marked first error are unlabelled; the solution's label_source is "human" and its
first_error is recomputed; a reviewed step's counts (n_correct, n_rollouts, n_truncated, n_timeouts)
read 0, as a human label's do (schemas/tables.py): its label no longer derives from them (the shards
keep them; `labeler report` and a labels folder read the labels as the job wrote them). The
trajectory verdict and label stay: they are the answer check of the final step, not a step label.
A folder of shards (OUT/labels itself) has no corrections: it reads the labels as the job wrote them.

A corrections line that cannot be read (a file edited by hand) stops every reader but the review
app with an error naming its file, line and field: training on the label it meant to change would
be training on a label the reviewer said is wrong. A stale correction (its solution's steps changed,
or the solution is no longer in the output) is not applied and is logged.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone

from labeler.ids import stable_id
from labeler.store.location import OutputLocation
from schemas.corrections import (
    ACTIONS,
    CLEAR,
    CORRECTIONS_DIR,
    CORRECTIONS_SCHEMA,
    CORRECTIONS_SCHEMA_VERSION,
    FIRST_ERROR,
    NO_ERROR,
    RIGHT,
    STEP_ACTIONS,
    WRONG,
)
from schemas.tables import first_error

log = logging.getLogger("labeler.corrections")

HUMAN = "human"  # the label_method and label_source of a corrected step and solution
AFTER_REVIEWED_ERROR = "after the first error a reviewer marked: not reviewed"
_FIELDS = tuple(CORRECTIONS_SCHEMA.names)
_INTEGER_FIELDS = ("step_index",)
_STEP_COUNTS = ("n_correct", "n_rollouts", "n_truncated", "n_timeouts")  # a reviewed step counts none


class CorrectionError(ValueError):
    """A correction that cannot be read or made; `field` names the field at fault."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True)
class Correction:
    solution_id: str
    problem_id: str
    steps_hash: str
    action: str
    step_index: int | None
    note: str
    reviewer: str
    created_at: str
    schema_version: str = CORRECTIONS_SCHEMA_VERSION
    where: str = field(default="", compare=False)  # file:line it was read from

    def record(self) -> dict:
        return {name: value for name, value in asdict(self).items() if name in _FIELDS}


@dataclass(frozen=True)
class BadCorrection:
    where: str  # corrections/FILE:LINE
    field: str
    reason: str

    def describe(self) -> str:
        return f"{self.where}: {self.field}: {self.reason}"


@dataclass
class Corrections:
    """Every correction of an output, in the order they apply, and the lines that could not be read."""

    records: list[Correction] = field(default_factory=list)
    bad: list[BadCorrection] = field(default_factory=list)

    def of(self, solution_id: str) -> list[Correction]:
        return [c for c in self.records if c.solution_id == solution_id]

    def by_solution(self) -> dict[str, list[Correction]]:
        grouped: dict[str, list[Correction]] = {}
        for correction in self.records:
            grouped.setdefault(correction.solution_id, []).append(correction)
        return grouped


@dataclass(frozen=True)
class StepReview:
    """A step's label after its corrections: right (True), wrong (False), or None, left unlabelled after a
    marked first error; `by` is the correction that decided it."""

    label: bool | None
    by: Correction


def steps_hash(steps: Sequence[str]) -> str:
    return stable_id(*steps)


def new_correction(
    solution_id: str, problem_id: str, steps: Sequence[str], action: str, step_index: int | None, note: str, reviewer: str
) -> Correction:
    """A correction made now; CorrectionError when it does not fit the solution."""
    correction = Correction(
        solution_id, problem_id, steps_hash(steps), action, step_index, note.strip(), reviewer.strip(), _now()
    )
    check(correction, len(steps))
    return correction


def check(correction: Correction, n_steps: int | None = None) -> None:
    """CorrectionError naming the field when the correction breaks the contract (n_steps: of its solution)."""
    for name in ("solution_id", "problem_id", "steps_hash", "reviewer", "created_at"):
        if not getattr(correction, name):
            raise CorrectionError(name, "is empty")
    if correction.action not in ACTIONS:
        raise CorrectionError("action", f"{correction.action!r} is not one of {', '.join(ACTIONS)}")
    index = correction.step_index
    if correction.action in STEP_ACTIONS and index is None:
        raise CorrectionError("step_index", f"is needed by {correction.action}")
    if correction.action == NO_ERROR and index is not None:
        raise CorrectionError("step_index", "must be null for no_error")
    if index is not None and (index < 0 or (n_steps is not None and index >= n_steps)):
        raise CorrectionError("step_index", f"{index} is not a step of the solution ({n_steps} steps)" if n_steps else f"{index} < 0")
    try:
        at = datetime.fromisoformat(correction.created_at)
    except ValueError:
        raise CorrectionError("created_at", f"{correction.created_at!r} is not an ISO 8601 time") from None
    if at.tzinfo is None:  # its place among the others would be a guess
        raise CorrectionError("created_at", f"{correction.created_at!r} has no time zone")
    try:
        at.astimezone(timezone.utc)
    except OverflowError:
        raise CorrectionError("created_at", f"{correction.created_at!r} is out of range") from None


def applying_order(correction: Correction) -> tuple:
    """When it was made (in UTC, whatever zone it was written in), then its file, then its line."""
    where, _, line = (correction.where or "").rpartition(":")
    return (datetime.fromisoformat(correction.created_at).astimezone(timezone.utc), where, int(line) if line.isdigit() else 0)


def parse_line(text: str, where: str) -> Correction:
    try:
        record = json.loads(text)
    except ValueError as error:
        raise CorrectionError("line", f"not JSON: {error}") from None
    if not isinstance(record, dict):
        raise CorrectionError("line", "not a JSON object")
    for schema_field in CORRECTIONS_SCHEMA:
        value = record.get(schema_field.name)
        if value is None:
            if not schema_field.nullable:
                raise CorrectionError(schema_field.name, "missing")
            continue
        wanted = int if schema_field.name in _INTEGER_FIELDS else str
        if not isinstance(value, wanted) or isinstance(value, bool):
            raise CorrectionError(schema_field.name, f"{value!r} is not {'an integer' if wanted is int else 'a string'}")
    unknown = sorted(set(record) - set(_FIELDS))
    if unknown:
        raise CorrectionError(unknown[0], "is not a field of the corrections table")
    correction = Correction(**{name: record.get(name) for name in _FIELDS}, where=where)
    check(correction)
    return correction


def read_corrections(output: str | OutputLocation) -> Corrections:
    """The corrections kept in OUTPUT/corrections/ (none when there are none)."""
    location = output if isinstance(output, OutputLocation) else OutputLocation(output)
    read = Corrections()
    for name in location.list_names(CORRECTIONS_DIR):
        if name.startswith(".") or not name.endswith(".jsonl"):
            continue  # a temp file of a save under way
        data = location.read_bytes(f"{CORRECTIONS_DIR}/{name}")
        if data is None:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            read.bad.append(BadCorrection(f"{CORRECTIONS_DIR}/{name}", "file", f"not UTF-8: {error}"))
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{CORRECTIONS_DIR}/{name}:{number}"
            try:
                read.records.append(parse_line(line, where))
            except CorrectionError as error:
                read.bad.append(BadCorrection(where, error.field, error.reason))
    read.records.sort(key=applying_order)
    return read


def correction_files(output: str | OutputLocation) -> int:
    """How many corrections files the output keeps (0 for a path with no corrections folder)."""
    location = output if isinstance(output, OutputLocation) else OutputLocation(output)
    return sum(1 for name in location.list_names(CORRECTIONS_DIR) if name.endswith(".jsonl") and not name.startswith("."))


def write_correction(output: str | OutputLocation, correction: Correction) -> str:
    """Save one correction as a file of its own, whole or not at all; returns its name under the output."""
    location = output if isinstance(output, OutputLocation) else OutputLocation(output)
    location.make_dirs(CORRECTIONS_DIR)
    stamp = re.sub(r"[^0-9]", "", correction.created_at)[:20]
    reviewer = re.sub(r"[^A-Za-z0-9_-]+", "-", correction.reviewer)[:32] or "reviewer"
    name = f"{CORRECTIONS_DIR}/{stamp}-{reviewer}-{uuid.uuid4().hex[:12]}.jsonl"
    location.write_bytes(name, (json.dumps(correction.record(), ensure_ascii=False) + "\n").encode("utf-8"))
    return name


def applicable(corrections: Sequence[Correction], steps: Sequence[str]) -> list[Correction]:
    """Those of a solution's corrections that name its steps as they are (the others are stale)."""
    digest = steps_hash(steps)
    return [c for c in corrections if c.steps_hash == digest and (c.step_index is None or c.step_index < len(steps))]


def resolve(corrections: Sequence[Correction], n_steps: int) -> dict[int, StepReview]:
    """Each reviewed step's label, the corrections applied in order (a later one overrides)."""
    reviews: dict[int, StepReview] = {}
    for c in corrections:
        if c.action in (RIGHT, WRONG):
            reviews[c.step_index] = StepReview(c.action == RIGHT, c)
        elif c.action == FIRST_ERROR:
            for i in range(n_steps):
                reviews[i] = StepReview(True if i < c.step_index else (False if i == c.step_index else None), c)
        elif c.action == NO_ERROR:
            reviews = {i: StepReview(True, c) for i in range(n_steps)}
        elif c.action == CLEAR:
            if c.step_index is None:
                reviews = {}
            else:
                reviews.pop(c.step_index, None)
    return reviews


def reviewed_labels(hard: Sequence, soft: Sequence, methods: Sequence, reviews: dict[int, StepReview]) -> tuple[list, list, list]:
    """A solution's hard labels, soft labels and label methods with its reviewed steps' (module docstring)."""
    hard, soft, methods = list(hard), list(soft), list(methods)
    for i, review in reviews.items():
        hard[i], soft[i] = review.label, None
        methods[i] = HUMAN if review.label is not None else "unlabelled"
    return hard, soft, methods


def corrected(row, reviews: dict[int, StepReview]):
    """The LabelledRow with its reviewed steps' labels (module docstring); the row itself when none is."""
    if not reviews:
        return row
    n = len(row.steps)
    hard, soft, method = reviewed_labels(row.hard_labels, row.soft_labels, row.label_method, reviews)
    reason = list(row.unlabelled_reason) if row.unlabelled_reason is not None else [None] * n
    counts = {name: list(getattr(row, name)) for name in _STEP_COUNTS if getattr(row, name) is not None}  # None: an older shard's
    for i, review in reviews.items():
        reason[i] = None if review.label is not None else AFTER_REVIEWED_ERROR
        for values in counts.values():
            values[i] = 0  # the label no longer comes from these rollouts (the shards keep them)
    return replace(
        row,
        soft_labels=tuple(soft),
        hard_labels=tuple(hard),
        label_method=tuple(method),
        unlabelled_reason=tuple(reason),
        first_error=first_error(hard),  # null where an unlabelled step still comes first
        label_source=HUMAN,
        **{name: tuple(values) for name, values in counts.items()},
    )


@dataclass
class Applied:
    rows: list
    solutions: int  # corrected
    steps: int  # reviewed steps among them
    stale: list[Correction]  # not applied: the solution's steps changed, or it is gone


def apply_corrections(rows: Sequence, corrections: Corrections) -> Applied:
    """The rows with their corrections; a correction of other steps than the row's, or of no row, is stale."""
    grouped = corrections.by_solution()
    out, solutions, steps, stale = [], 0, 0, []
    for row in rows:
        mine = grouped.pop(row.solution_id, [])
        current = applicable(mine, row.steps)
        stale += [c for c in mine if c not in current]
        reviews = resolve(current, len(row.steps))
        if reviews:
            solutions += 1
            steps += sum(review.label is not None for review in reviews.values())
        out.append(corrected(row, reviews))
    for orphans in grouped.values():
        stale += orphans
    return Applied(out, solutions, steps, stale)


def corrected_rows(path, rows: Sequence, error: type[ValueError]) -> list:
    """`rows`, read from the labels at `path`, with the corrections kept beside them (a job's output
    directory): `error` for a corrections line that cannot be read; stale corrections are logged."""
    location = OutputLocation(path)
    if not location.exists(CORRECTIONS_DIR):
        return list(rows)
    corrections = read_corrections(location)
    if corrections.bad:
        first = "; ".join(bad.describe() for bad in corrections.bad[:3])
        raise error(
            f"{path}: {len(corrections.bad)} corrections line(s) cannot be read ({first}): fix or remove them, "
            f"or read the labels without corrections from {location.display('labels')}"
        )
    applied = apply_corrections(rows, corrections)
    if applied.solutions:
        log.info("%s: human corrections on %d steps of %d solutions applied (label_source human)", path, applied.steps, applied.solutions)
    if applied.stale:
        log.warning(
            "%s: %d stale corrections not applied (their solution's steps changed, or it is no longer in the output); first: %s",
            path,
            len(applied.stale),
            applied.stale[0].where,
        )
    return applied.rows


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")

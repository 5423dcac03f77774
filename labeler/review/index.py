"""The table of solutions `labeler view` filters, sorts and pages: one small row per solution of every
labels output, built with Arrow from the committed shards and kept in memory (no step text but for the
search column), refreshed as a running job commits units; the judge's verdict, the PRM's score, the
queue's rank and the reviewers' corrections joined by solution_id.

What is not known is never a value: a first error after an unlabelled step is "unknown" (sorted after
every known one), a PRM score with a step past the PRM's max length, or with another number of steps
than the solution, is "not fully scored" (no minimum), a shard older than n_truncated says "not
recorded"; each is a filter value of its own.

A reviewed solution's row is its corrected labels, as `labeler train` reads them: its first error,
label source ("human"), label methods, unlabelled count and mean soft label follow the corrections.
The judge filter alone compares the job's own Monte-Carlo labels with the judge (`judge_first_error`
against the first error as the job wrote it).

A judgment or queue line joins a solution only when it holds the solution's steps (labeler/review/joins.py):
one of another solution under the same id (another run's sampled solutions) is "other-solution" in the judge
filter, never agree or disagree, and gives no queue rank.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from labeler.evaluation.metrics import first_predicted_error
from labeler.records import is_score
from labeler.store.corrections import HUMAN, Corrections, applicable, read_corrections, resolve, reviewed_labels
from labeler.ids import same_solution
from labeler.review.joins import same_steps
from labeler.review.queue import is_record_of
from labeler.review.sources import LabelsOutput, Sources
from schemas.corrections import CORRECTIONS_DIR
from schemas.tables import MONTE_CARLO, UNCHECKED

PAGE_SIZE = 50
ANY = ""
# Filter values
YES, NO = "yes", "no"
FIRST_ERROR_CHOICES = ("none", "some", "unknown")  # no wrong step; a known first error; an unlabelled step before it
OTHER_SOLUTION = "other-solution"  # the judgment under this id is of other steps: another solution's
JUDGE_CHOICES = ("agree", "disagree", "unknown", "not-judged", OTHER_SOLUTION)  # unknown: the Monte-Carlo first error is not known
SORTS = ("input", "first_error", "steps", "prm_min", "mean_soft", "unlabelled", "truncated", "judge_agreement", "queue_rank", "reviewed")
# the summary column each sort orders by (None: the input's order); first_error: the known ones only
SORT_COLUMNS = {"input": None, "first_error": "known_first_error", "steps": "n_steps", "unlabelled": "n_unlabelled", "truncated": "n_truncated"}


class QueryError(ValueError):
    """A filter or sort the table does not have; the message is for the user."""


@dataclass(frozen=True)
class Query:
    output: str = ANY
    source: str = ANY  # label_source
    method: str = ANY  # a label_method one of its steps has
    first_error: str = ANY
    verdict: str = ANY  # trajectory_verdict
    truncated: str = ANY
    unlabelled: str = ANY
    judge: str = ANY
    reviewed: str = ANY
    queued: str = ANY
    prm_min: str = ANY  # lowest PRM min score kept
    prm_max: str = ANY
    text: str = ANY
    sort: str = "input"
    order: str = "asc"
    page: int = 1

    @classmethod
    def from_params(cls, params: dict[str, str]) -> "Query":
        known = {f.name for f in fields(cls)}
        values = {k: v.strip() for k, v in params.items() if k in known}
        if "page" in values:
            try:
                values["page"] = max(1, int(values["page"] or 1))
            except ValueError:
                raise QueryError(f"page: {values['page']!r} is not a number") from None
        query = cls(**values)
        query.check()
        return query

    def check(self) -> None:
        choices = {
            "first_error": FIRST_ERROR_CHOICES,
            "judge": JUDGE_CHOICES,
            "truncated": (YES, NO, "not-recorded"),
            "unlabelled": (YES, NO),
            "reviewed": (YES, NO),
            "queued": (YES, NO),
            "sort": SORTS,
            "order": ("asc", "desc"),
        }
        for name, allowed in choices.items():
            value = getattr(self, name)
            if value and value not in allowed:
                raise QueryError(f"{name}: {value!r} is not one of {', '.join(allowed)}")
        for name in ("prm_min", "prm_max"):
            if getattr(self, name):
                try:
                    float(getattr(self, name))
                except ValueError:
                    raise QueryError(f"{name}: {getattr(self, name)!r} is not a number") from None
        if self.output and not (self.output.isascii() and self.output.isdigit() and len(self.output) <= 6):
            raise QueryError(f"output: {self.output!r} is not an output's number")

    def params(self, **changes) -> dict[str, str]:
        """The query string's values (the defaults left out), with `changes`."""
        merged = {f.name: getattr(self, f.name) for f in fields(self)} | changes
        defaults = Query()
        return {k: str(v) for k, v in merged.items() if v != getattr(defaults, k)}


@dataclass
class Page:
    rows: list[dict]
    total: int  # solutions in the outputs
    matched: int  # solutions the filters keep
    page: int
    pages: int


@dataclass(frozen=True)
class Located:
    output: LabelsOutput
    file: str
    row: int


class SolutionIndex:
    def __init__(self, sources: Sources):
        self.sources = sources
        self._parts: dict[tuple[int, str, str], pa.Table] = {}  # (output, file, version) -> summary rows
        self._table: pa.Table | None = None
        self._key = None
        self.corrections: dict[int, Corrections] = {}
        self._corrections_key: dict[int, tuple] = {}
        self._lock = threading.Lock()  # the app answers requests from several threads

    # -- building -------------------------------------------------------------
    def table(self, force: bool = False) -> pa.Table:
        """Every solution's summary row, joined; rebuilt when a shard is committed or a correction saved
        (the shards are listed again at most once a second, unless `force`)."""
        with self._lock:
            return self._current(force)

    def _current(self, force: bool = False) -> pa.Table:
        for output in self.sources.labels:
            output.shards.refresh(force)
        for judged in self.sources.judgments:
            judged.shards.refresh(force)
        key = (
            tuple(tuple(o.shards.files) for o in self.sources.labels),
            tuple(tuple(j.shards.files) for j in self.sources.judgments),
            self._refresh_corrections(),
        )
        if key != self._key or self._table is None:
            self._table = self._build()
            self._key = key
        return self._table

    def _refresh_corrections(self) -> tuple:
        for output in self.sources.labels:
            if output.corrections is None:
                continue
            listed = tuple(output.corrections.list_versions(CORRECTIONS_DIR))  # a file edited in place is read again
            if self._corrections_key.get(output.number) != listed:
                self.corrections[output.number] = read_corrections(output.corrections)
                self._corrections_key[output.number] = listed
        return tuple(sorted(self._corrections_key.items()))

    def _build(self) -> pa.Table:
        wanted = [(output, relative, (output.number, relative, version)) for output in self.sources.labels for relative, version in output.shards.files]
        new = [(output, relative, key) for output, relative, key in wanted if key not in self._parts]
        # Parquet reads release the GIL, so a few at once; the summary is then made once per output and
        # set of columns (per shard, its many small Arrow calls would cost more than the reads)
        with ThreadPoolExecutor(READERS) as pool:
            read = list(pool.map(lambda job: _read_columns(job[0], job[1]), new))
        groups: dict[tuple, list] = {}
        for (output, relative, key), shard in zip(new, read):
            groups.setdefault((output.number, tuple(shard.column_names)), []).append((relative, key, shard))
        for (number, _), members in groups.items():
            summary = summarize(pa.concat_tables([shard for *_, shard in members], promote_options="permissive"), number, [(relative, shard.num_rows) for relative, _, shard in members])
            start = 0
            for _, key, shard in members:
                self._parts[key] = summary.slice(start, shard.num_rows)
                start += shard.num_rows
        keys = {key for *_, key in wanted}
        for stale in set(self._parts) - keys:
            del self._parts[stale]
        parts = [self._parts[key] for *_, key in wanted]
        table = pa.concat_tables(parts) if parts else _empty_summary()
        return self._joined(table.combine_chunks())

    def _joined(self, table: pa.Table) -> pa.Table:
        ids = table.column("solution_id")
        steps = table.column("steps")
        # the judge's verdict: the first judgments output that judged these steps (module docstring)
        judge_first: list[int | None] = [None] * len(table)
        judge_agreement: list[float | None] = [None] * len(table)
        other = [False] * len(table)  # judged under this id, but only with other steps
        for judged in self.sources.judgments:
            verdicts = [judged.shards.read(f, ["solution_id", "steps", "first_error", "agreement"]) for f, _ in judged.shards.files]
            if not verdicts:
                continue
            verdicts = pa.concat_tables(verdicts).combine_chunks()
            where = pc.index_in(ids, value_set=verdicts.column("solution_id"))
            rows = pc.indices_nonzero(pc.is_valid(where))
            at = pc.take(where, rows)
            found = zip(
                rows.to_pylist(), pc.take(steps, rows).to_pylist(),
                *(pc.take(verdicts.column(name), at).to_pylist() for name in ("steps", "first_error", "agreement")),
            )  # fmt: skip
            for i, mine, theirs, first, agreement in found:
                if judge_first[i] is not None:
                    continue
                if same_steps(theirs, mine):
                    judge_first[i], judge_agreement[i], other[i] = first, agreement, False
                else:
                    other[i] = True
        table = table.append_column("judge_first_error", pa.array(judge_first, pa.int32()))
        table = table.append_column("judge_agreement", pa.array(judge_agreement, pa.float64()))
        table = table.append_column("judge", _judge_status(table, np.array(other, dtype=bool)))
        # the first PRM's scores
        prm_min = [None] * len(table)
        prm_partial = [False] * len(table)
        prm_join = [None] * len(table)  # SCORES_CHECKED, SCORES_UNCHECKED (the scores name no solution) or OTHER_SOLUTION
        n_steps = table.column("n_steps").to_pylist()
        if self.sources.scores:
            source = self.sources.scores[0]
            problems = table.column("problem")
            for i, solution_id in enumerate(ids.to_pylist()):
                scores = source.scores.get(solution_id)
                if scores is None:
                    continue
                prm_join[i] = scores_join(source, solution_id, problems[i].as_py(), steps[i].as_py())
                if prm_join[i] == OTHER_SOLUTION:
                    continue
                if not scores or len(scores) != n_steps[i] or not all(is_score(s) for s in scores):
                    prm_partial[i] = True
                else:
                    prm_min[i] = min(scores)
        table = table.append_column("prm_min", pa.array(prm_min, pa.float64())).append_column("prm_partial", pa.array(prm_partial))
        table = table.append_column("prm_join", pa.array(prm_join, pa.string()))
        # the queue's rank (the first queue that has these steps); a line of other steps under this id is no rank
        ranks: list[int | None] = [None] * len(table)
        queue_other = [False] * len(table)
        if self.sources.queues:
            thinking = table.column("thinking_steps").to_pylist()
            for i, solution_id in enumerate(ids.to_pylist()):
                entries = [q.entries[solution_id] for q in self.sources.queues if solution_id in q.entries]
                if not entries:
                    continue
                mine = steps[i].as_py()
                ranks[i] = next((e["queue_rank"] for e in entries if is_record_of(e, mine, thinking[i])), None)
                queue_other[i] = ranks[i] is None
        table = table.append_column("queue_rank", pa.array(ranks, pa.int64())).append_column("queue_other", pa.array(queue_other))
        return self._reviewed(table)

    def _reviewed(self, table: pa.Table) -> pa.Table:
        """The steps reviewers labelled, and each reviewed row's summary after the corrections (module docstring)."""
        ids = table.column("solution_id")
        reviewed = [0] * len(table)
        changed: dict[int, dict] = {}  # row -> its corrected summary values
        for number, corrections in self.corrections.items():
            by_solution = corrections.by_solution()
            if not by_solution:
                continue
            mine = pc.and_(pc.equal(table.column("output"), number), pc.is_in(ids, value_set=pa.array(list(by_solution), pa.string())))
            rows, seen = [], set()
            for i in pc.indices_nonzero(mine).to_pylist():  # a repeated id: its first row only, as the readers apply them
                if ids[i].as_py() not in seen:
                    seen.add(ids[i].as_py())
                    rows.append(i)
            by_file: dict[str, list[int]] = {}
            for i in rows:
                by_file.setdefault(table.column("file")[i].as_py(), []).append(i)
            output = self.sources.labels[number]
            for relative, members in by_file.items():
                labels = output.shards.read(relative, ["solution_id", "hard_labels", "soft_labels", "label_method"])
                for i in members:
                    row = labels.slice(table.column("row")[i].as_py(), 1).to_pylist()
                    if not row or row[0]["solution_id"] != ids[i].as_py():
                        continue  # the shard was rewritten since the table was built: the next refresh reads it
                    steps = table.column("steps")[i].as_py()
                    reviews = resolve(applicable(by_solution[ids[i].as_py()], steps), len(steps))
                    if reviews:
                        reviewed[i] = sum(r.label is not None for r in reviews.values())
                        changed[i] = _corrected_summary(row[0], reviews)
        table = table.append_column("reviewed", pa.array(reviewed, pa.int32()))
        if not changed:
            return table
        for name in ("first_error", "first_error_known", "label_source", "n_unlabelled", "mean_soft", "methods"):
            values = table.column(name).to_pylist()
            for i, summary in changed.items():
                values[i] = summary[name]
            table = table.set_column(table.schema.get_field_index(name), name, pa.array(values, table.schema.field(name).type))
        return table

    # -- querying -------------------------------------------------------------
    def query(self, query: Query) -> Page:
        table = self.table()
        mask = _mask(table, query)
        kept = table.filter(mask) if mask is not None else table
        order = "descending" if query.order == "desc" else "ascending"
        sort_column = SORT_COLUMNS.get(query.sort, query.sort)
        if query.sort == "first_error":  # an unknown first error is no position: after every known one
            known = pc.if_else(kept.column("first_error_known"), kept.column("first_error"), pa.scalar(None, pa.int32()))
            kept = kept.append_column(sort_column, known)
        if sort_column is None:
            keys = [("output", order), ("file", order), ("row", order)]
        else:
            keys = [(sort_column, order), ("output", "ascending"), ("file", "ascending"), ("row", "ascending")]
        kept = kept.take(pc.sort_indices(kept, sort_keys=keys, null_placement="at_end"))
        pages = max(1, -(-kept.num_rows // PAGE_SIZE))
        page = min(query.page, pages)
        rows = kept.slice((page - 1) * PAGE_SIZE, PAGE_SIZE).drop_columns(["text", "steps"]).to_pylist()
        return Page(rows, table.num_rows, kept.num_rows, page, pages)

    def solution_row(self, output_number: int, solution_id: str, columns: list[str] | None = None) -> tuple[Located, dict] | None:
        """Where the solution is and its labels row (`columns` of it); None when no output has it. The row
        read is checked to be the solution's: a shard rewritten since the table was built is listed again."""
        for force in (False, True):
            located = self.locate(output_number, solution_id, force)
            if located is None:
                return None
            wanted = None if columns is None else list(dict.fromkeys(["solution_id", *columns]))
            shard = located.output.shards.read(located.file, wanted)
            if located.row < shard.num_rows:
                row = shard.slice(located.row, 1).to_pylist()[0]
                if row["solution_id"] == solution_id:
                    return located, row
        return None

    def locate(self, output_number: int, solution_id: str, force: bool = False) -> Located | None:
        table = self.table(force)
        if not 0 <= output_number < len(self.sources.labels):
            return None
        mask = pc.and_(pc.equal(table.column("output"), output_number), pc.equal(table.column("solution_id"), solution_id))
        found = table.filter(mask)
        if not found.num_rows:
            return None
        return Located(self.sources.labels[output_number], found.column("file")[0].as_py(), found.column("row")[0].as_py())

    def others(self, solution_id: str, but: int) -> list[Located]:
        """The same solution in the other labels outputs (imported human labels, consensus, another run)."""
        table = self.table()
        found = table.filter(pc.and_(pc.equal(table.column("solution_id"), solution_id), pc.not_equal(table.column("output"), but)))
        return [Located(self.sources.labels[o], f, r) for o, f, r in zip(*(found.column(c).to_pylist() for c in ("output", "file", "row")))]

    def label_sources(self) -> list[str]:
        return sorted(set(self.table().column("label_source").to_pylist()))

    def verdicts(self) -> list[str]:
        return sorted(set(self.table().column("verdict").to_pylist()))


def _mask(table: pa.Table, q: Query):
    conditions = []
    add: Callable = conditions.append
    column = table.column
    if q.output:
        add(pc.equal(column("output"), int(q.output)))
    if q.source:
        add(pc.equal(column("label_source"), q.source))
    if q.method:
        add(pc.match_substring(column("methods"), f"|{q.method}|"))
    if q.verdict:
        add(pc.equal(column("verdict"), q.verdict))
    if q.first_error == "none":
        add(pc.and_(pc.equal(column("first_error"), -1), column("first_error_known")))
    elif q.first_error == "some":
        add(pc.and_(pc.greater_equal(column("first_error"), 0), column("first_error_known")))
    elif q.first_error == "unknown":
        add(pc.invert(column("first_error_known")))
    if q.truncated == YES:
        add(pc.fill_null(pc.or_(pc.greater(column("n_truncated"), 0), column("solution_truncated")), False))
    elif q.truncated == NO:
        add(pc.fill_null(pc.and_(pc.equal(column("n_truncated"), 0), pc.invert(column("solution_truncated"))), False))
    elif q.truncated == "not-recorded":
        add(pc.is_null(column("n_truncated")))
    if q.unlabelled == YES:
        add(pc.greater(column("n_unlabelled"), 0))
    elif q.unlabelled == NO:
        add(pc.equal(column("n_unlabelled"), 0))
    if q.judge:
        add(pc.equal(column("judge"), q.judge))
    if q.reviewed == YES:
        add(pc.greater(column("reviewed"), 0))
    elif q.reviewed == NO:
        add(pc.equal(column("reviewed"), 0))
    if q.queued == YES:
        add(pc.is_valid(column("queue_rank")))
    elif q.queued == NO:
        add(pc.is_null(column("queue_rank")))
    if q.prm_min:
        add(pc.fill_null(pc.greater_equal(column("prm_min"), float(q.prm_min)), False))
    if q.prm_max:
        add(pc.fill_null(pc.less_equal(column("prm_min"), float(q.prm_max)), False))
    if q.text:
        add(pc.match_substring(column("text"), q.text, ignore_case=True))
    if not conditions:
        return None
    mask = conditions[0]
    for condition in conditions[1:]:
        mask = pc.and_(mask, condition)
    return mask


def _corrected_summary(row: dict, reviews: dict) -> dict:
    """The summary values of a labels row (hard, soft labels, methods) once `reviews` (step -> StepReview) are applied."""
    hard, soft, methods = reviewed_labels(row["hard_labels"], row["soft_labels"], row["label_method"], reviews)
    kept_soft = [value for value in soft if value is not None]
    return {
        "first_error": first_predicted_error(hard, missing="as-correct"),
        "first_error_known": first_predicted_error(hard) is not None,
        "label_source": HUMAN,
        "n_unlabelled": sum(method == "unlabelled" for method in methods),
        "mean_soft": sum(kept_soft) / len(kept_soft) if kept_soft else None,
        "methods": "|" + "|".join(methods) + "|",
    }


SCORES_CHECKED, SCORES_UNCHECKED = "checked", "unchecked"  # prm_join (scores_join); not schemas.tables.UNCHECKED


def scores_join(source, solution_id: str, problem: str, steps: list[str]) -> str:
    """Whether the scores `source` holds under `solution_id` are of this solution (SCORES_CHECKED), of another one
    (OTHER_SOLUTION), or name none (SCORES_UNCHECKED: written before score records carried a fingerprint)."""
    same = same_solution(source.fingerprints.get(solution_id), problem, steps)
    return SCORES_UNCHECKED if same is None else SCORES_CHECKED if same else OTHER_SOLUTION


def _judge_status(table: pa.Table, other_solution: np.ndarray) -> pa.Array:
    judged = table.column("judge_first_error").to_numpy(zero_copy_only=False)
    first = table.column("first_error").to_numpy()
    known = table.column("first_error_known").to_numpy(zero_copy_only=False)
    status = np.where(first == np.nan_to_num(judged.astype(float), nan=-2), "agree", "disagree").astype(object)
    status[~known] = "unknown"
    status[pc.is_null(table.column("judge_first_error")).to_numpy(zero_copy_only=False)] = "not-judged"
    status[other_solution] = OTHER_SOLUTION
    return pa.array(status.tolist(), pa.string())


# -- one shard's summary rows ---------------------------------------------------
_SUMMARY = pa.schema(
    [
        ("output", pa.int32()),
        ("file", pa.string()),
        ("row", pa.int32()),
        ("problem_id", pa.string()),
        ("solution_id", pa.string()),
        ("problem", pa.string()),
        ("steps", pa.list_(pa.string())),  # for the hash its corrections name (schemas/corrections.py)
        ("n_steps", pa.int32()),
        ("thinking_steps", pa.int32()),  # for the queue lines of traces
        ("first_error", pa.int32()),
        ("first_error_known", pa.bool_()),
        ("label_source", pa.string()),
        ("verdict", pa.string()),
        ("n_truncated", pa.int64()),  # null: the shard does not record it (schema 1.1)
        ("solution_truncated", pa.bool_()),
        ("n_unlabelled", pa.int32()),
        ("mean_soft", pa.float64()),  # null: no step with a soft label
        ("methods", pa.string()),  # "|rollouts|unlabelled|": the label methods of its steps
        ("text", pa.string()),  # problem and steps, for the search
    ]
)


# the labels columns a summary is made of (the others, such as the counts, are read when a solution is opened)
_READ = (
    "problem_id", "solution_id", "problem", "steps", "label_method", "first_error", "soft_labels", "n_truncated",
    "solution_truncated", "label_source", "trajectory_verdict", "thinking_steps",
)  # fmt: skip
READERS = 4


def _read_columns(output: LabelsOutput, relative: str) -> pa.Table:
    return output.shards.read_present(relative, _READ)


def _empty_summary() -> pa.Table:
    return _SUMMARY.empty_table()


def summarize(shard: pa.Table, output: int, files: list[tuple[str, int]]) -> pa.Table:
    """The rows of shards written with one schema (whichever), laid end to end, as summary rows (_SUMMARY);
    `files`: each shard's name and rows, in that order."""
    n = shard.num_rows
    names = shard.column_names
    methods = shard.column("label_method").combine_chunks()
    n_steps = pc.list_value_length(methods).to_numpy(zero_copy_only=False).astype(np.int32)
    first_unlabelled = _first_position(methods, "unlabelled", n)
    written = shard.column("first_error")
    recorded = pc.is_valid(written).to_numpy(zero_copy_only=False)  # null: the job wrote it as undetermined
    first_error = pc.fill_null(written, -1).to_numpy(zero_copy_only=False).astype(np.int32)
    # the first error is known when no unlabelled step comes before it (before any step, for "none")
    known = recorded & np.where(first_error < 0, first_unlabelled >= n_steps, first_unlabelled > first_error)
    unlabelled = _per_row_sum(pc.equal(pc.list_flatten(methods), "unlabelled"), methods, n)
    soft = shard.column("soft_labels").combine_chunks()
    soft_values = pc.list_flatten(soft)
    soft_sum = _per_row_sum(pc.fill_null(soft_values, 0.0), soft, n, float)
    soft_count = _per_row_sum(pc.is_valid(soft_values), soft, n)
    mean_soft = pa.array(np.where(soft_count > 0, soft_sum / np.maximum(soft_count, 1), np.nan), pa.float64(), mask=soft_count == 0)
    if "n_truncated" in names:
        truncated_lists = shard.column("n_truncated").combine_chunks()
        truncated = pa.array(_per_row_sum(pc.list_flatten(truncated_lists), truncated_lists, n), pa.int64())
    else:
        truncated = pa.nulls(n, pa.int64())
    solution_truncated = shard.column("solution_truncated") if "solution_truncated" in names else pa.array([False] * n)
    label_source = pc.fill_null(shard.column("label_source"), MONTE_CARLO) if "label_source" in names else pa.array([MONTE_CARLO] * n)
    verdict = shard.column("trajectory_verdict") if "trajectory_verdict" in names else pa.array([UNCHECKED] * n)
    thinking = pc.fill_null(shard.column("thinking_steps"), 0) if "thinking_steps" in names else pa.array(np.zeros(n, np.int32))
    steps = shard.column("steps")
    joined_methods = pc.binary_join_element_wise("|", pc.binary_join(methods, "|"), "|", "")
    text = pc.binary_join_element_wise(shard.column("problem"), pc.binary_join(steps, "\n"), "\n")
    return pa.table(
        {
            "output": pa.array(np.full(n, output, np.int32)),
            "file": pa.array([name for name, rows in files for _ in range(rows)], pa.string()),
            "row": pa.array(np.concatenate([np.arange(rows, dtype=np.int32) for _, rows in files] or [np.zeros(0, np.int32)])),
            "problem_id": shard.column("problem_id"),
            "solution_id": shard.column("solution_id"),
            "problem": shard.column("problem"),
            "steps": steps,
            "n_steps": pa.array(n_steps),
            "thinking_steps": pc.cast(thinking, pa.int32()),
            "first_error": pa.array(first_error),
            "first_error_known": pa.array(known),
            "label_source": label_source,
            "verdict": verdict,
            "n_truncated": truncated,
            "solution_truncated": solution_truncated,
            "n_unlabelled": pa.array(unlabelled.astype(np.int32)),
            "mean_soft": mean_soft,
            "methods": joined_methods,
            "text": text,
        },
        schema=_SUMMARY,
    )


def _positions(lists: pa.ListArray) -> tuple[np.ndarray, np.ndarray]:
    """For each value of the flattened lists: the row it belongs to and its index in that row."""
    parents = pc.list_parent_indices(lists).to_numpy()
    offsets = lists.offsets.to_numpy()
    return parents, np.arange(len(parents)) - (offsets[parents] - offsets[0])


def _first_position(lists: pa.ListArray, value: str, n: int) -> np.ndarray:
    parents, positions = _positions(lists)
    hit = pc.fill_null(pc.equal(pc.list_flatten(lists), value), False).to_numpy(zero_copy_only=False)
    first = np.full(n, np.iinfo(np.int32).max, dtype=np.int64)
    np.minimum.at(first, parents[hit], positions[hit])
    return first


def _per_row_sum(values: pa.Array, lists: pa.ListArray, n: int, kind=int) -> np.ndarray:
    parents, _ = _positions(lists)
    weights = pc.fill_null(pc.cast(values, pa.float64()), 0.0).to_numpy(zero_copy_only=False)
    sums = np.bincount(parents, weights=weights, minlength=n)
    return sums if kind is float else sums.astype(np.int64)

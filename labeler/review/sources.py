"""What `labeler view` is given: each path told apart by what it holds, and its shards listed as they
are committed.

- labels: a labeling, import or consensus job's output directory (its committed units only, so a job
  still running shows what it has committed), a folder of labels shards, or one shard;
- judgments: a `labeler judge` output (committed units only);
- PRM scores: the lines of `labeler score` (.jsonl), or the scores a `labeler bon` output keeps
  (OUT/bon/scores/, one file per PRM) beside its labels;
- a queue: the .jsonl or .parquet `labeler select --queue` writes (records with `queue_rank`).
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from labeler.decoding.prm_scores import METADATA_KEY, SCORES_DIR
from labeler.prm.solution_scores import is_score, score_line_problem
from labeler.store.location import OutputLocation
from labeler.store.manifest import MANIFEST_NAME, job_kind, load_manifest
from labeler.store.shard_store import JUDGMENTS_DIR, LABELS_DIR, ROLLOUTS_DIR
from schemas.corrections import CORRECTIONS_DIR

log = logging.getLogger("labeler.view")
LABELS, JUDGMENTS = "labels", "judgments"
REFRESH_SECONDS = 1.0  # how often a job's manifest is read again for newly committed units


class SourceError(ValueError):
    """A path `labeler view` cannot read; the message is for the user."""


@dataclass
class ShardSet:
    """The shards of one kind in one place: a job's committed ones, or every shard of a folder."""

    location: OutputLocation
    directory: str  # labels or judgments
    is_job: bool
    single: str | None = None  # one shard given by name
    files: list[tuple[str, str]] = field(default_factory=list)  # (relative path, version: changes when rewritten)
    units: tuple[int, int] = (0, 0)  # a job's committed and planned units
    state: str = ""  # a job's: "finished", "incomplete" (running, or interrupted)
    _checked: float = -1e9

    def refresh(self, force: bool = False) -> bool:
        """Read the list again (at most once per REFRESH_SECONDS); True when it changed."""
        if not force and time.monotonic() - self._checked < REFRESH_SECONDS:
            return False
        self._checked = time.monotonic()
        before = self.files
        if self.single is not None:
            self.files = [(self.single, self.location.version(self.single))]
        elif self.is_job:
            manifest = load_manifest(self.location)
            if manifest is None:
                self.files, self.units, self.state = [], (0, 0), "gone"
            else:
                committed = [u for u in manifest["units"] if u["state"] == "committed"]
                self.files = [(u["files"][self.directory], u.get("committed_at", "")) for u in committed if self.directory in u.get("files", {})]
                self.units = (len(committed), len(manifest["units"]))
                self.state = "finished" if len(committed) == len(manifest["units"]) else "incomplete"
        else:
            folder = self.directory if self.location.exists(self.directory) else ""
            listed = [(n, v) for n, v in self.location.list_versions(folder) if n.endswith(".parquet") and not n.startswith(".")]
            self.files = [(f"{folder}/{n}" if folder else n, version) for n, version in listed]
        return self.files != before

    def read(self, relative: str, columns: list[str] | None = None, filters=None) -> pa.Table:
        return pq.read_table(self.location.path(relative), columns=columns, filters=filters, filesystem=self.location.filesystem)

    def read_present(self, relative: str, columns: tuple[str, ...]) -> pa.Table:
        """Those of `columns` the shard has (an older schema lacks some), in one open of the file."""
        with self.location.filesystem.open_input_file(self.location.path(relative)) as handle:
            shard = pq.ParquetFile(handle)
            present = set(shard.schema_arrow.names)
            return shard.read(columns=[c for c in columns if c in present])

    def schema_names(self, relative: str) -> list[str]:
        return pq.read_schema(self.location.path(relative), filesystem=self.location.filesystem).names

    def rollouts_of(self, relative: str) -> str | None:
        """The rollouts shard written with a labels shard (the same unit), when there is one."""
        name = relative.rsplit("/", 1)[-1]
        sibling = f"{ROLLOUTS_DIR}/{name}"
        if self.single is not None or not relative.startswith(f"{LABELS_DIR}/"):
            return None
        return sibling if self.location.exists(sibling) else None


@dataclass
class LabelsOutput:
    number: int  # its place among the labels outputs given (0-based)
    given: str  # the path as the user gave it
    shards: ShardSet
    kind: str  # the job that wrote it: label, import, consensus, bon; "shards" for a folder or file
    corrections: OutputLocation | None  # where its corrections are kept (a job's output only)
    writable: bool  # corrections may be saved here
    why_read_only: str = ""


@dataclass
class JudgmentsOutput:
    given: str
    shards: ShardSet


@dataclass
class ScoresSource:
    name: str  # the PRM: a bon file's spec, or the score file's name
    scores: dict[str, list[float | None]]  # solution_id -> step scores (None: not scored)
    # solution_id -> the fingerprint of the solution scored (labeler/review/joins.py); None or absent: not recorded
    fingerprints: dict[str, str | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # a score that is not a finite number is no score (a bon file kept by an older version may hold NaN)
        self.scores = {key: [s if is_score(s) else None for s in steps] for key, steps in self.scores.items()}


@dataclass
class Queue:
    given: str
    entries: dict[str, dict]  # solution_id -> its queue line (queue, queue_rank, queue_score, queue_reason)


@dataclass
class Sources:
    labels: list[LabelsOutput] = field(default_factory=list)
    judgments: list[JudgmentsOutput] = field(default_factory=list)
    scores: list[ScoresSource] = field(default_factory=list)
    queues: list[Queue] = field(default_factory=list)


def open_sources(paths: list[str], read_only: bool = False, allow_writes: bool = False) -> Sources:
    """Each path told apart (module docstring); SourceError for one that holds nothing `view` reads."""
    sources = Sources()
    for given in paths:
        if given.endswith(".jsonl") and "://" not in given:
            _open_jsonl(given, sources)
            continue
        location = OutputLocation(given)
        if location.exists(MANIFEST_NAME):
            kind = job_kind(load_manifest(location) or {}) or "label"
            if kind == "judge":
                shards = ShardSet(location, JUDGMENTS_DIR, is_job=True)
                shards.refresh(force=True)
                sources.judgments.append(JudgmentsOutput(given, shards))
                continue
            shards = ShardSet(location, LABELS_DIR, is_job=True)
            writable, why = _writable(location, read_only, allow_writes)
            if location.exists(SCORES_DIR):
                kind = "bon" if kind == "label" else kind
                sources.scores += _bon_scores(location)
            sources.labels.append(LabelsOutput(len(sources.labels), given, shards, kind, location, writable, why))
        elif ("://" not in given and Path(given).is_file()) or "://" in given or Path(given).is_dir():
            _open_shards(given, sources)
        else:
            raise SourceError(f"{given}: no such file or directory")
    if not sources.labels:
        raise SourceError("no labels to show: give at least one labeling, import, consensus or bon output (or a folder of labels shards)")
    for output in sources.labels:
        output.shards.refresh(force=True)
    return sources


def _open_shards(given: str, sources: Sources) -> None:
    """A folder of labels or judgments shards (their folder, or the one above it), or one shard: read-only."""
    if "://" not in given and Path(given).is_file():
        if not given.endswith(".parquet"):
            raise SourceError(f"{given}: expected a labeler output directory, a folder of shards, a .parquet shard or a .jsonl file")
        if "queue_rank" in _schema_names(given, lambda: pq.read_schema(given).names):
            _add_records(given, pq.read_table(given).to_pylist(), sources)
            return
        shards = ShardSet(OutputLocation(str(Path(given).parent)), LABELS_DIR, is_job=False, single=Path(given).name)
        why = "a single shard: no output to keep corrections in"
    else:
        location = OutputLocation(given)
        directory = JUDGMENTS_DIR if location.exists(JUDGMENTS_DIR) and not location.exists(LABELS_DIR) else LABELS_DIR
        shards = ShardSet(location, directory, is_job=False)
        why = "a folder of shards: corrections are kept in a job's output"
    shards.refresh(force=True)
    if not shards.files:
        raise SourceError(f"{given}: no manifest.json and no labels or judgments shards: not something `labeler view` reads")
    kinds = {}
    for relative, _ in shards.files:
        names = _schema_names(f"{given}: {relative}", lambda: shards.schema_names(relative))
        kinds[relative] = JUDGMENTS if "critique_indices" in names else LABELS if "label_method" in names else None
        if kinds[relative] is None:
            raise SourceError(f"{given}: {relative} is neither a labels nor a judgments shard (no label_method or critique_indices column)")
    if len(set(kinds.values())) > 1:
        raise SourceError(f"{given}: labels and judgments shards in one folder; give each folder of its own")
    if JUDGMENTS in kinds.values():
        shards.directory = JUDGMENTS_DIR
        sources.judgments.append(JudgmentsOutput(given, shards))
    else:
        sources.labels.append(LabelsOutput(len(sources.labels), given, shards, "shards", None, False, why))


def _schema_names(where: str, read) -> list[str]:
    try:
        return read()
    except (pa.ArrowInvalid, OSError) as error:
        raise SourceError(f"{where}: not a Parquet file: {str(error).splitlines()[0]}") from None


def _writable(location: OutputLocation, read_only: bool, allow_writes: bool) -> tuple[bool, str]:
    if read_only:
        return False, "--read-only"
    if not location.is_local:
        return (True, "") if allow_writes else (False, "an object store output: pass --allow-writes to save corrections there")
    base = location.path()
    if not os.access(base, os.W_OK):
        return False, "you cannot write to this output"
    corrections = os.path.join(base, CORRECTIONS_DIR)
    if os.path.isdir(corrections) and not os.access(corrections, os.W_OK):
        return False, "you cannot write to its corrections folder"
    if os.stat(base).st_uid != os.geteuid() and not allow_writes:
        return False, "you do not own this output: pass --allow-writes to save corrections in it"
    return True, ""


def _bon_scores(location: OutputLocation) -> list[ScoresSource]:
    found = []
    for name in location.list_names(SCORES_DIR):
        if not name.endswith(".parquet") or name.startswith("."):
            continue
        path = location.path(f"{SCORES_DIR}/{name}")
        table = pq.read_table(path, filesystem=location.filesystem)
        metadata = json.loads((table.schema.metadata or {}).get(METADATA_KEY, b"{}"))
        spec = metadata.get("spec") or name
        ids = table.column("solution_id").to_pylist()
        fingerprints = table.column("solution_fingerprint").to_pylist() if "solution_fingerprint" in table.column_names else []
        found.append(ScoresSource(spec, dict(zip(ids, table.column("step_scores").to_pylist())), dict(zip(ids, fingerprints))))
    return found


def _open_jsonl(given: str, sources: Sources) -> None:
    """A score file or a queue (module docstring)."""
    try:
        lines = Path(given).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise SourceError(f"{given}: cannot read: {error}") from None
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError as error:
            raise SourceError(f"{given}: line {number}: not JSON: {error}") from None
    _add_records(given, records, sources)


def _add_records(given: str, records: list, sources: Sources) -> None:
    """PRM scores or a queue, told apart by the first record; every record is checked (SourceError naming
    the first bad one): a score that is not one, or a queue line without its rank, would be shown as data.
    An empty file (a queue that found nothing to queue) joins nothing: a warning says so."""
    if not records:
        log.warning("%s is empty: no PRM scores or queue to show", given)
        return
    if isinstance(records[0], dict) and "queue_rank" in records[0]:
        kind, check = "a queue line", _queue_problem
    elif isinstance(records[0], dict) and "step_scores" in records[0]:
        kind, check = "a line of `labeler score`", score_line_problem
    else:
        raise SourceError(f"{given}: neither PRM scores (`labeler score` lines, with step_scores) nor a queue (with queue_rank)")
    seen = set()
    for number, record in enumerate(records, start=1):
        problem = "not a JSON object" if not isinstance(record, dict) else check(record)
        if problem is None and record["solution_id"] in seen:
            problem = f"solution_id {record['solution_id']!r} again"
        if problem is not None:
            raise SourceError(f"{given}: record {number}: not {kind}: {problem}")
        seen.add(record["solution_id"])
    if check is _queue_problem:
        sources.queues.append(Queue(given, {r["solution_id"]: r for r in records}))
    else:
        fingerprints = {r["solution_id"]: r.get("solution_fingerprint") for r in records}
        sources.scores.append(ScoresSource(Path(given).name, {r["solution_id"]: r["step_scores"] for r in records}, fingerprints))


def _queue_problem(record: dict) -> str | None:
    if not isinstance(record.get("solution_id"), str):
        return "solution_id: missing or not a string"
    rank = record.get("queue_rank")
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
        return f"queue_rank: {rank!r} is not a rank (an integer from 1)"
    steps, response = record.get("steps"), record.get("response")
    if not (isinstance(steps, list) and all(isinstance(step, str) for step in steps)) and not isinstance(response, str):
        return "no steps (a list of strings) or response: the solution it queues cannot be told from another under its id"
    return None



def solution_ids(table: pa.Table) -> pa.Array:
    return pc.cast(table.column("solution_id"), pa.string()).combine_chunks()

"""Each PRM's step scores of the candidates, kept in OUT/bon/scores/ so that nothing is scored twice.

One Parquet file per PRM spec (solution_id, step_scores), its metadata naming the spec, the PRM's
fingerprint and the candidates' fingerprint. A rerun reuses the file only when both fingerprints
still match: the same candidates (ids and text) and the same PRM (a local folder: its files' names,
sizes and modification times; anything else, a hub id say, is known by its spec alone). Otherwise,
or with --rescore, the PRM is loaded and scores them all again.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa

from labeler.decoding.candidates import Candidate
from labeler.evaluation.solutions import SolutionToScore
from labeler.ids import stable_id
from labeler.prm.scorers import StepScorer, checkpoint_folder
from labeler.store.location import OutputLocation

SCORES_DIR = "bon/scores"
METADATA_KEY = b"prm_labeler_scores"
SCORES_SCHEMA = pa.schema([pa.field("solution_id", pa.string()), pa.field("step_scores", pa.list_(pa.float64()))])

log = logging.getLogger("labeler.bon")


def candidates_fingerprint(candidates: Sequence[Candidate]) -> str:
    return stable_id(*(stable_id(c.solution_id, c.problem, *c.steps) for c in sorted(candidates, key=lambda c: c.solution_id)))


def prm_fingerprint(spec: str) -> str:
    folder = checkpoint_folder(spec)
    if not os.path.isdir(folder):
        return f"spec:{spec}"
    entries = []
    for path in sorted(Path(folder).rglob("*")):
        if path.is_file():
            stat = path.stat()
            entries += [str(path.relative_to(folder)), str(stat.st_size), str(stat.st_mtime_ns)]
    return stable_id(*entries)


def scores_file(spec: str) -> str:
    return f"{SCORES_DIR}/{stable_id(spec)}.parquet"


def candidate_step_scores(
    location: OutputLocation,
    spec: str,
    candidates: Sequence[Candidate],
    load: Callable[[], StepScorer],
    *,
    rescore: bool = False,
) -> tuple[str, list[list[float | None]]]:
    """(the scorer's name, each candidate's step scores, None for steps it could not score), from
    the kept file when it still holds these scores, else from the PRM `load` gives (then kept)."""
    expected = {"spec": spec, "prm": prm_fingerprint(spec), "candidates": candidates_fingerprint(candidates)}
    relative = scores_file(spec)
    if not rescore and location.exists(relative):
        table = location.read_table(relative)
        saved = json.loads((table.schema.metadata or {}).get(METADATA_KEY, b"{}"))
        if {key: saved.get(key) for key in expected} == expected:
            by_id = dict(zip(table.column("solution_id").to_pylist(), table.column("step_scores").to_pylist()))
            log.info("PRM %s: its scores of the %d candidates are in %s", spec, len(candidates), location.display(relative))
            return saved.get("name", spec), [by_id[c.solution_id] for c in candidates]
        log.info("PRM %s: %s holds scores of other candidates or another PRM; scoring again", spec, location.display(relative))
    scorer = load()
    log.info("PRM %s: scoring %d candidates", spec, len(candidates))
    solutions = [SolutionToScore(c.problem_id, c.solution_id, c.problem, c.steps) for c in candidates]
    scores = [list(s) + [None] * (len(c.steps) - len(s)) for c, s in zip(candidates, scorer.step_scores(solutions), strict=True)]
    table = pa.Table.from_pydict({"solution_id": [c.solution_id for c in candidates], "step_scores": scores}, schema=SCORES_SCHEMA)
    metadata = {**expected, "name": scorer.name}
    location.make_dirs(SCORES_DIR)
    location.write_table(relative, table.replace_schema_metadata({METADATA_KEY: json.dumps(metadata).encode()}))
    return scorer.name, scores

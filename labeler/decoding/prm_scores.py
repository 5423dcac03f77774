"""Each PRM's step scores of the candidates, kept in OUT/bon/scores/ so that nothing is scored twice.

One Parquet file per PRM spec (solution_id; step_scores, null for a step not scored, a NaN or inf
included; unscored_reason, why a step has no score, when one has none: labeler/prm/solution_scores.py
`checked_scores`; solution_fingerprint, of the candidate's problem and steps, for `labeler view` to
check its join: labeler/review/joins.py), its metadata naming the spec, the PRM's fingerprint, the
scoring settings, the version of the adapter that reads it (labeler/prm/adapters:
SCORING_VERSIONS) and the candidates' fingerprint. A rerun reuses the file only
when all still match: the same candidates (ids and text), the same settings (precision, max
length) and the same PRM. A PRM is known by its content: a local folder (of any kind, `DIR`,
`checkpoint:DIR`, `qwen-prm:DIR`, ...) by a SHA-256 of every file's name and bytes, so a retrained
or overwritten checkpoint misses even with the same sizes and times (reading the bytes costs about
a second per GB, once per run); a hub id by the commit of its snapshot in the local cache; a hub id
not cached yet by its spec until it is. Otherwise, or with --rescore, the PRM is loaded and scores
them all again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa

from labeler.decoding.candidates import Candidate
from labeler.evaluation.solutions import SolutionToScore
from labeler.ids import solution_fingerprint, stable_id
from labeler.prm.scorers import CHECKPOINT, StepScorer, backend_of, checkpoint_folder, parse_spec, release
from labeler.prm.solution_scores import checked_scores, is_score
from labeler.store.location import OutputLocation

SCORES_DIR = "bon/scores"
METADATA_KEY = b"prm_labeler_scores"
SCORES_SCHEMA = pa.schema(
    [
        pa.field("solution_id", pa.string()),
        pa.field("step_scores", pa.list_(pa.float64())),
        pa.field("unscored_reason", pa.string()),
        pa.field("solution_fingerprint", pa.string()),  # of the problem and steps scored: what `labeler view` checks (review/joins.py)
    ]
)
SCORES_FORMAT = 2  # 2: unscored_reason; a file of an older format is scored again

log = logging.getLogger("labeler.bon")


def candidates_fingerprint(candidates: Sequence[Candidate]) -> str:
    return stable_id(*(stable_id(c.solution_id, c.problem, *c.steps) for c in sorted(candidates, key=lambda c: c.solution_id)))


def prm_fingerprint(spec: str) -> str:
    """What the PRM a spec names is, by content (module docstring)."""
    kind, model = parse_spec(spec)
    folder = checkpoint_folder(model) if kind == CHECKPOINT else model
    if os.path.isdir(folder):
        return f"sha256:{folder_digest(folder)}"
    commit = cached_hub_commit(model)
    return f"{kind}:{model}@{commit}" if commit else f"spec:{spec}"


def adapter_scoring_version(spec: str) -> int:
    """The version of the code that reads the spec's PRM (labeler/prm/adapters: SCORING_VERSIONS)."""
    from labeler.prm.adapters import CHECKPOINT_SCORING_VERSION, SCORING_VERSIONS

    return SCORING_VERSIONS.get(parse_spec(spec)[0], CHECKPOINT_SCORING_VERSION)


def folder_digest(folder: str) -> str:
    digest = hashlib.sha256()
    for path in sorted(Path(folder).rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(folder)).encode() + b"\0")
            with path.open("rb") as handle:
                while chunk := handle.read(1 << 22):
                    digest.update(chunk)
            digest.update(b"\0")
    return digest.hexdigest()


def cached_hub_commit(model: str) -> str | None:
    """The commit of the hub model's snapshot in the local cache (the revision it loads offline); None when not cached."""
    try:
        from huggingface_hub import snapshot_download

        return os.path.basename(snapshot_download(model, local_files_only=True))
    except Exception:  # not cached, not a hub id, no huggingface_hub: known by its spec
        return None


def scoring_settings(precision: str, max_length: int | None = None, backend: str = "torch") -> dict:
    """The settings besides the PRM that change its scores: the precision it runs in, the tokens it reads
    (None: its own limit, part of its content), the backend asked for (vllm and torch agree within
    float error, but scores are kept per backend all the same)."""
    return {"precision": precision, "max_length": max_length, "backend": backend}


def scores_file(spec: str) -> str:
    return f"{SCORES_DIR}/{stable_id(spec)}.parquet"


def candidate_step_scores(
    location: OutputLocation,
    spec: str,
    candidates: Sequence[Candidate],
    load: Callable[[], StepScorer],
    *,
    scoring: dict,
    rescore: bool = False,
) -> tuple[str, list[list[float | None]], list[str | None]]:
    """(the scorer's name, each candidate's step scores, None for steps it could not score, and why, per
    candidate: None when every step has a score), from
    the kept file when it still holds these scores, else from the PRM `load` gives (then kept).
    `scoring`: `scoring_settings` of the PRM as `load` loads it. The scorer `load` gives is closed
    here once it has scored: `load` must give one for this call alone."""
    expected = {
        "format": SCORES_FORMAT,
        "spec": spec,
        "prm": prm_fingerprint(spec),
        "scoring": scoring,
        "adapter_version": adapter_scoring_version(spec),
        "candidates": candidates_fingerprint(candidates),
    }
    relative = scores_file(spec)
    if not rescore and location.exists(relative):
        table = location.read_table(relative)
        saved = json.loads((table.schema.metadata or {}).get(METADATA_KEY, b"{}"))
        if {key: saved.get(key) for key in expected} == expected:
            ids = table.column("solution_id").to_pylist()
            # a NaN kept by an older version is no score, as checked_scores writes it now
            by_id = {i: [x if is_score(x) else None for x in steps] for i, steps in zip(ids, table.column("step_scores").to_pylist())}
            why = dict(zip(ids, table.column("unscored_reason").to_pylist()))
            log.info(
                "PRM %s: its scores of the %d candidates are in %s (scored with %s)",
                spec, len(candidates), location.display(relative), saved.get("scored_with", "torch"),
            )  # fmt: skip
            return saved.get("name", spec), [by_id[c.solution_id] for c in candidates], [why[c.solution_id] for c in candidates]
        log.info("PRM %s: %s holds scores of other candidates or another PRM; scoring again", spec, location.display(relative))
    scorer = load()
    log.info("PRM %s: scoring %d candidates", spec, len(candidates))
    solutions = [SolutionToScore(c.problem_id, c.solution_id, c.problem, c.steps) for c in candidates]
    try:
        checked = [
            checked_scores(s, len(c.steps), scorer=scorer, solution=solution)
            for c, s, solution in zip(candidates, scorer.step_scores(solutions), solutions, strict=True)
        ]
        scores, reasons = [steps for steps, _, _ in checked], [why for _, _, why in checked]
    finally:
        release(scorer)  # the next PRM needs the memory
    table = pa.Table.from_pydict(
        {
            "solution_id": [c.solution_id for c in candidates],
            "step_scores": scores,
            "unscored_reason": reasons,
            "solution_fingerprint": [solution_fingerprint(c.problem, c.steps) for c in candidates],
        },
        schema=SCORES_SCHEMA,
    )
    # The fingerprint taken before loading: a folder overwritten meanwhile (training writing best/) misses next time.
    # Only a hub id not cached before is fingerprinted again: loading it has just cached its snapshot.
    prm = prm_fingerprint(spec) if expected["prm"].startswith("spec:") else expected["prm"]
    metadata = {**expected, "prm": prm, "name": scorer.name, "scored_with": backend_of(scorer)}  # after a fallback: torch
    location.make_dirs(SCORES_DIR)
    location.write_table(relative, table.replace_schema_metadata({METADATA_KEY: json.dumps(metadata).encode()}))
    return scorer.name, scores, reasons

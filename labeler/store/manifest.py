"""The job's record: manifest.json (config, planned units, totals) and one commit record per committed unit.

What labelled the units besides the config (engine, model revision, checker, library versions:
labeler/labeling/engine_record.py) is kept as engine records: `engine_records` maps an id to each
record units were labelled with, `engine_record` is the id of the job's own (its first units'),
and every committed unit names its record's id, so a job resumed on another engine can be told apart.

A unit is committed when its record `commits/<unit_id>.json` exists and parses; the record is written
after the unit's shards, so a crash in between leaves an uncommitted unit, never a half-committed one.
Records are folded into manifest.json from time to time ("compaction": rewrite the manifest, then
delete the records it now holds), so a commit costs one small file instead of a rewrite of a
document that grows with the job. Readers always read manifest and records together (load_manifest).

A manifest that cannot be parsed (cut short or edited by hand) is a CorruptManifestError that says
the ways out: --overwrite starts over; --rebuild-manifest rebuilds it from the plan of the rerun and
the records still in commits/ (rebuild_manifest), and the units whose records were already folded
into the lost manifest are redone. Each record carries the config hash of its job, so records of
another job are refused rather than folded in.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from labeler.ids import stable_id
from labeler.store.errors import StorageError, describe_cause
from labeler.store.location import OutputLocation
from schemas.manifest import MANIFEST_VERSION, UNIT_COMMITTED, UNIT_PENDING, validate_manifest
from schemas.tables import SCHEMA_VERSION

MANIFEST_NAME = "manifest.json"
COMMITS_DIR = "commits"
RECORD_KEYS = ("unit_id", "files", "stats", "committed_at")
OPTIONAL_RECORD_KEYS = ("engine_record",)  # absent in jobs started before engine records, and in units no engine labelled
RECORD_CONFIG_HASH = "config_hash"  # the job's, to check records against on a rebuild; not folded into the unit
RECORD_SCHEMA_VERSION = "schema_version"  # the labels schema its shards were written under; likewise (absent in older records)
NOT_RECORDED = "(not recorded)"
# What kind of job wrote the output: "judge" (labeler judge), "consensus" (labeler consensus); absent
# in the manifests of labeling jobs (labeler label), which had no such key before the other kinds.
JOB_KIND_KEY = "job"


class ConfigMismatchError(RuntimeError):
    """The output directory holds a job with other settings or other input."""


class EngineChangeError(ConfigMismatchError):
    """The output directory holds units labelled by another engine, checker or library versions."""


class CorruptManifestError(StorageError):
    """manifest.json is there but cannot be parsed; the message says the ways out."""


WAYS_OUT = (
    "rerun `labeler label` with --rebuild-manifest to rebuild it from the commit records in commits/ "
    "(units they no longer hold are redone), or with --overwrite to start over"
)


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def new_manifest(
    *, config: dict, config_hash: str, plan_hash: str, versions: dict, model: dict, input_info: dict, units: list[dict]
) -> dict:
    document = {
        "manifest_version": MANIFEST_VERSION,
        "schema_version": SCHEMA_VERSION,
        "created_at": now_iso(),
        "updated_at": now_iso(),
        "config": config,
        "config_hash": config_hash,
        "plan_hash": plan_hash,
        "versions": versions,
        "model": model,
        "input": input_info,
        "engine_record": None,  # set when the first engine starts (labeler/store/shard_store.py: use_engine)
        "engine_records": {},
        "units": [{**unit, "state": UNIT_PENDING} for unit in units],
        "totals": {},
    }
    refresh_totals(document)
    return document


def refresh_totals(document: dict) -> None:
    """Totals are derived from the units, so they can never disagree with them."""
    committed = [unit for unit in document["units"] if unit["state"] == UNIT_COMMITTED]
    stats = [unit.get("stats", {}) for unit in committed]

    def total(key: str) -> float:
        return sum(stat.get(key, 0) for stat in stats)

    document["totals"] = {
        "units": len(document["units"]),
        "units_committed": len(committed),
        "solutions": int(total("solutions")),
        "steps": int(total("steps")),
        "rollouts": int(total("rollouts")),
        "truncated_rollouts": int(total("truncated_rollouts")),
        # None when a committed unit with solutions predates the count (or is a judge's: critiques, no first errors)
        UNDETERMINED_KEY: int(total(UNDETERMINED_KEY)) if all(UNDETERMINED_KEY in stat for stat in stats if stat.get("solutions")) else None,
        "timed_out_rollouts": int(total("timed_out_rollouts")),
        # every token generated: the labels' generated_tokens plus rejected_tokens (spent on rejected solutions)
        "generated_tokens": int(total("generated_tokens")),
        "rejected_tokens": int(total("rejected_tokens")),
        "rejected_in_units": int(total("rejected")),
        "generation_seconds": round(total("seconds"), 3),
        # prefix probes the strategy asked for, and the requests sent once identical prefixes were merged
        "prefix_probes": int(total("prefix_probes")),
        "prefix_requests": int(total("prefix_requests")),
        # steps found positive by a correct rollout of a shorter prefix that wrote them word for word (posterior); None
        # when a committed unit that sampled rollouts predates the count
        "steps_written_through": int(total("steps_written_through"))
        if all("steps_written_through" in stat for stat in stats if stat.get("prefix_requests"))
        else None,
        # the share of the rollouts' prompt tokens vLLM found in its prefix cache, as vLLM counts it; None unless every
        # committed unit that sampled rollouts reported it (a unit from before the count, another engine)
        "prefix_cache_hit_rate": _prefix_cache_hit_rate(stats),
        # the steps of the labels by label_method, and the solutions whose labels look odd but follow the rules
        # (label_counts); None when a committed unit with solutions predates the count (or is a judge's)
        LABEL_COUNTS_KEY: _total_label_counts(stats),
    }


LABEL_COUNTS_KEY = "label_counts"  # a unit's stats (written as it commits: ShardStore.commit_unit) and the totals


def label_counts(table) -> dict | None:
    """What a labels table holds, counted for its readers: `methods`, its steps by label_method; `negative`, those
    labelled wrong by label_method (an inferred negative is no measured one); and two kinds of solutions whose labels
    look odd but follow the rules: `final_right_first_error_undetermined` (a final answer checked right, an unlabelled
    step before any negative one: a right answer does not rule out an earlier error) and
    `final_right_after_a_negative_step` (the last step positive after a step labelled wrong: a right answer reached
    after an error, the steps after the first error negative by --after-first-error, inferred where not sampled).
    None for a table without label methods (judgments)."""
    from collections import Counter

    if "label_method" not in table.column_names:
        return None
    methods, negative = Counter(), Counter()
    undetermined = after_negative = 0
    columns = [table.column(name).to_pylist() for name in ("label_method", "hard_labels", "first_error")]
    for row_methods, hard, first in zip(*columns):
        methods.update(row_methods)
        negative.update(method for method, label in zip(row_methods, hard) if label is False)
        right_answer = bool(hard) and hard[-1] is True
        undetermined += right_answer and first is None
        after_negative += right_answer and any(label is False for label in hard[:-1])
    return {
        "methods": dict(sorted(methods.items())),
        "negative": dict(sorted(negative.items())),
        "final_right_first_error_undetermined": int(undetermined),
        "final_right_after_a_negative_step": int(after_negative),
    }


def _total_label_counts(stats: list[dict]) -> dict | None:
    counted = [stat.get(LABEL_COUNTS_KEY) for stat in stats if stat.get("solutions")]
    if any(counts is None for counts in counted):
        return None
    total: dict = {"methods": {}, "negative": {}, "final_right_first_error_undetermined": 0, "final_right_after_a_negative_step": 0}
    for counts in counted:
        for key, value in counts.items():
            if isinstance(value, dict):
                for method, n in value.items():
                    total[key][method] = total[key].get(method, 0) + n
            else:
                total[key] = total.get(key, 0) + value
    return {key: dict(sorted(value.items())) if isinstance(value, dict) else value for key, value in total.items()}


def _prefix_cache_hit_rate(stats: list[dict]) -> float | None:
    sampled = [stat for stat in stats if stat.get("prefix_requests")]
    if not sampled or any(stat.get("prefix_cache_queries") is None for stat in sampled):
        return None
    queries = sum(stat["prefix_cache_queries"] for stat in sampled)
    return round(sum(stat["prefix_cache_hits"] for stat in sampled) / queries, 4) if queries else None


def _location(output: str | Path | OutputLocation) -> OutputLocation:
    return output if isinstance(output, OutputLocation) else OutputLocation(output)


# -- commit records -------------------------------------------------------------------------
def commit_record_name(unit_id: str) -> str:
    return f"{COMMITS_DIR}/{unit_id}.json"


def write_commit_record(output: str | Path | OutputLocation, record: dict) -> None:
    _location(output).write_bytes(commit_record_name(record["unit_id"]), json.dumps(record).encode())


def read_commit_records(output: str | Path | OutputLocation) -> list[dict]:
    """Every complete record; a missing or unreadable one (a crash mid-write) commits nothing."""
    location = _location(output)
    records = []
    for name in location.list_names(COMMITS_DIR):
        if not name.endswith(".json") or name.startswith("."):
            continue
        data = location.read_bytes(f"{COMMITS_DIR}/{name}")  # None: compacted away since the listing
        try:
            record = json.loads(data) if data is not None else None
        except ValueError:
            record = None
        if isinstance(record, dict) and all(key in record for key in RECORD_KEYS):
            records.append(record)
    return records


def fold_commit_records(document: dict, records: list[dict]) -> None:
    """Mark the recorded units committed in the document (idempotent) and refresh its totals."""
    units = {unit["unit_id"]: unit for unit in document["units"]}
    for record in records:
        unit = units.get(record["unit_id"])
        if unit is not None:
            keys = [key for key in (*RECORD_KEYS, *OPTIONAL_RECORD_KEYS) if key != "unit_id" and key in record]
            unit.update(state=UNIT_COMMITTED, **{key: record[key] for key in keys})
    refresh_totals(document)


# -- the manifest -----------------------------------------------------------------------------
def load_manifest(output: str | Path | OutputLocation) -> dict | None:
    """The manifest with every commit record folded in: the state that readers and resume trust."""
    location = _location(output)
    # Records first: compaction writes the manifest before deleting records, so a record that
    # vanishes between our listing and our read is already in the manifest read after it.
    records = read_commit_records(location)
    data = location.read_bytes(MANIFEST_NAME)
    if data is None:
        return None
    try:
        document = json.loads(data)
        if not isinstance(document, dict):
            raise ValueError(f"a JSON {type(document).__name__}, not an object")
        validate_manifest(document)
    except (ValueError, TypeError, AttributeError) as error:  # bad JSON, or JSON of another shape
        where = location.display(MANIFEST_NAME)
        raise CorruptManifestError(f"{where}: cannot read the manifest: {describe_cause(error)}; {WAYS_OUT}") from error
    fold_commit_records(document, records)
    return document


def record_schema_version(location: OutputLocation, record: dict) -> str | None:
    """The labels schema a commit record's shards were written under: as recorded, or for an older record
    that does not say, as its labels shard says (its schema_version column; NOT_RECORDED for a shard with rows
    and no such column). None where there is nothing to mix: no labels file, an empty one, or one that cannot be
    read (the resume's shard check redoes such a unit, or names the storage error)."""
    if RECORD_SCHEMA_VERSION in record:
        return str(record[RECORD_SCHEMA_VERSION])
    files = record.get("files")
    labels = files.get("labels") if isinstance(files, dict) else None
    if labels is None:
        return None
    try:
        table = location.read_table(labels)
    except Exception:  # deleted or cut short: not this check's to judge
        return None
    if table.num_rows == 0:
        return None
    if "schema_version" not in table.column_names:
        return NOT_RECORDED
    versions = set(table.column("schema_version").to_pylist())
    return versions.pop() if len(versions) == 1 else NOT_RECORDED


def rebuild_manifest(
    document: dict, records: list[dict], directory: str, kind: str | None = None, location: OutputLocation | None = None
) -> int:
    """Fold the commit records into a new manifest of the same job (after a manifest was lost):
    the number folded. Records of another config, of units this plan does not hold, or (but for a judge
    job, `kind`) of shards written under another labels schema (read in `location`) are refused (ConfigMismatchError), as a
    resume refuses them. The job's engine record is known by its id only, that of its first
    committed unit, until an engine with that id starts and fills it in (ShardStore.use_engine)."""
    config_hash = document["config_hash"]
    if kind != WRITES_JUDGMENTS:
        location = location or _location(directory)
        strategy = (document.get("config") or {}).get("strategy")
        written = {record_schema_version(location, record) for record in records} - {SCHEMA_VERSION, None}
        schemas = sorted(version for version in written if not resumable_schema(version, strategy))
        if schemas:
            raise ConfigMismatchError(
                f"{directory}: commits/ holds units written under labels schema {', '.join(schemas)}, and this version of "
                f"prm-labeler writes schema {SCHEMA_VERSION}; rebuilding would mix both in one table; use another "
                "--output, or --overwrite to start over"
            )
    other = sorted({record[RECORD_CONFIG_HASH] for record in records if record.get(RECORD_CONFIG_HASH, config_hash) != config_hash})
    if other:
        raise ConfigMismatchError(
            f"{directory}: commits/ holds units of a job with a different config (config hash {', '.join(other)}, now {config_hash}); "
            "rebuild with the settings of that job, or use --overwrite to start over"
        )
    planned = {unit["unit_id"] for unit in document["units"]}
    unplanned = sorted(record["unit_id"] for record in records if record["unit_id"] not in planned)
    if unplanned:
        raise ConfigMismatchError(
            f"{directory}: commits/ holds {len(unplanned)} units that this input does not plan (first {unplanned[0]}); "
            "rebuild with the input of that job, or use --overwrite to start over"
        )
    fold_commit_records(document, records)
    engines = sorted((record["committed_at"], record["engine_record"]) for record in records if record.get("engine_record"))
    if engines:
        document["engine_record"] = engines[0][1]
    return len(records)


def save_manifest(output: str | Path | OutputLocation, document: dict) -> None:
    """Replace manifest.json whole: a reader sees the old or the new manifest, never half."""
    validate_manifest(document)
    document["updated_at"] = now_iso()
    _location(output).write_bytes(MANIFEST_NAME, json.dumps(document, indent=1).encode())


def compact(output: str | Path | OutputLocation, document: dict) -> None:
    """Write the manifest with every commit it holds, then drop the records now redundant."""
    location = _location(output)
    refresh_totals(document)
    save_manifest(location, document)
    committed = {unit["unit_id"] for unit in document["units"] if unit["state"] == UNIT_COMMITTED}
    for name in location.list_names(COMMITS_DIR):
        if name.removesuffix(".json") in committed:
            location.delete(f"{COMMITS_DIR}/{name}")


def check_same_job(
    existing: dict, config: dict, config_hash: str, plan_hash: str, input_fingerprint: str, directory: str | Path
) -> None:
    """Refuse to mix two jobs in one directory: other settings, another version of the input file, other rows."""
    if existing["config_hash"] != config_hash:
        changed = differences(existing["config"], config, skip=("output",))
        raise ConfigMismatchError(
            f"{directory} holds a job with a different config (changed: {'; '.join(changed) or 'unknown'}); "
            "use the same settings to resume, another --output, or --overwrite to start over"
        )
    recorded = existing["input"].get("fingerprint")
    if recorded is not None and recorded != input_fingerprint:
        raise ConfigMismatchError(
            f"{directory} holds a job on different input: {existing['input'].get('spec')} has changed since the job started "
            f"(fingerprint {recorded}, now {input_fingerprint}); "
            "use the same input to resume, another --output, or --overwrite to start over"
        )
    if existing["plan_hash"] != plan_hash:
        raise ConfigMismatchError(
            f"{directory} holds a job planned from different input rows; "
            "use the same input to resume, another --output, or --overwrite to start over"
        )


# a unit's stats and the totals: solutions whose first error their labels leave undetermined (null first_error)
UNDETERMINED_KEY = "undetermined_first_errors"
IMPORT_KIND = "import"  # the job kind of `labeler import`
WRITES_JUDGMENTS = "judge"  # the job kind whose shards are judgments (schemas/judgments.py), not labels


# Labels schemas whose outputs a resume (or a rebuild) continues under SCHEMA_VERSION, with what changed since:
# their rows read as the current schema's (labeler/store/reader.py recomputes it) and each says its own schema_version.
RESUMABLE_SCHEMAS = {
    "1.5": "first_error's rule changed, its rows' first_error recomputed by 1.6's rule when read; and posterior's "
    "retrace rule (1.7), which this job's strategy does not use",
    "1.6": "only posterior's retrace rule changed (1.7), which this job's strategy does not use",
}
# ...but for these strategies: 1.7 changed which steps posterior passes on rollouts of a shorter prefix that retraced
# them ("retraced"; before, "inferred" on a single correct rollout), so its units committed before keep labels the
# new rule does not write, and a resume would mix both rules in one table.
NOT_RESUMABLE_FOR = {"posterior": ("1.5", "1.6")}


def resumable_schema(version: str | None, strategy: str | None) -> bool:
    """Whether labels of schema `version` written by `strategy` read as the current schema's."""
    return version in RESUMABLE_SCHEMAS and version not in NOT_RESUMABLE_FOR.get(strategy or "", ())


def check_same_schema(existing: dict, directory: str | Path, kind: str | None = None) -> list[str]:
    """Refuse to resume an output whose shards were written under another labels schema: resuming would
    mix shards of both versions in one table, with nothing to say so (whatever --allow-engine-change says).
    One of RESUMABLE_SCHEMAS is resumed: its manifest now says SCHEMA_VERSION (the new shards'); the notice to show.
    A judge output writes judgments, whose schema the labels version does not speak for: it is not refused here
    (a change to the judgments schema must record and check its own version)."""
    if kind == WRITES_JUDGMENTS:
        return []
    found = existing.get("schema_version", NOT_RECORDED)
    strategy = (existing.get("config") or {}).get("strategy")
    if resumable_schema(found, strategy):
        existing["schema_version"] = SCHEMA_VERSION
        return [f"{directory} holds shards of labels schema {found}: resumed under {SCHEMA_VERSION}, new shards written {SCHEMA_VERSION} ({RESUMABLE_SCHEMAS[found]})"]
    if found != SCHEMA_VERSION:
        why = (
            f" (a {strategy} job: 1.7 changed which steps it passes on rollouts that retraced them, so its committed "
            "units keep labels the new rule does not write)"
            if found in NOT_RESUMABLE_FOR.get(strategy or "", ())
            else ""
        )
        raise ConfigMismatchError(
            f"{directory} holds shards of labels schema {found}, and this version of prm-labeler writes schema "
            f"{SCHEMA_VERSION}{why}; resuming would mix both in one table; use another --output, or --overwrite to start over"
        )
    return []


def job_kind(manifest: dict) -> str | None:
    """The kind of job that wrote an output, its manifest's JOB_KIND_KEY (None: `labeler label`). An import
    written before imports recorded their kind is known by its model record, which names the labels' source."""
    kind = manifest.get(JOB_KIND_KEY)
    if kind is None and "label_source" in (manifest.get("model") or {}):
        return IMPORT_KIND
    return kind


def check_same_kind(existing: dict, kind: str | None, directory: str | Path) -> None:
    """Refuse to resume a job of another kind in the same directory (a judge job in a labeling job's output, say)."""
    found = job_kind(existing)
    if found != kind:
        raise ConfigMismatchError(
            f"{directory} holds the output of `labeler {found or 'label'}`, not of `labeler {kind or 'label'}`; "
            "use another --output, or --overwrite to start over"
        )


def check_same_engine(existing: dict, record: dict, directory: str | Path) -> None:
    """EngineChangeError, one line per difference, when `record` is not the job's engine record."""
    reference = existing.get("engine_records", {}).get(existing.get("engine_record"), {})
    changed = differences(reference, record)
    if changed:
        raise EngineChangeError(
            f"{directory} holds units labelled by another engine, model revision, checker or library versions, and resuming "
            "would mix labels of both; resume with the same ones, or with --allow-engine-change (each unit records what "
            "labelled it), or use another --output, or --overwrite to start over. Changed:\n  " + "\n  ".join(changed)
        )


def engine_record_id(record: dict) -> str:
    return stable_id(json.dumps(record, sort_keys=True))


def differences(old: dict, new: dict, skip: tuple[str, ...] = ()) -> list[str]:
    """`key: old -> new` for each key whose value differs, compared as JSON holds them (a tuple
    equals the list it is saved as); nested dicts by their keys (`versions.torch: ...`)."""
    old, new = json.loads(json.dumps(old)), json.loads(json.dumps(new))
    lines = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key, NOT_RECORDED), new.get(key, NOT_RECORDED)
        if key in skip or before == after:
            continue
        present = [value for value in (before, after) if value != NOT_RECORDED]
        if all(isinstance(value, dict) for value in present):
            lines += [f"{key}.{line}" for line in differences(old.get(key, {}), new.get(key, {}))]
        else:
            lines.append(f"{key}: {_show(before)} -> {_show(after)}")
    return lines


def _show(value) -> str:
    return value if value == NOT_RECORDED else json.dumps(value)


NOT_LOADED = "not loaded: the job generates nothing"  # the model_revision of NoGeneration's engine record


def generated_nothing(manifest: dict) -> bool | None:
    """Whether the job of `manifest` loaded no model: True when every engine record it holds is NoGeneration's,
    False when one loaded a model, None when it holds none (no engine started yet, or a job without engines)."""
    records = [record for record in (manifest.get("engine_records") or {}).values() if isinstance(record, dict)]
    if not records:
        return None
    return all(record.get("model_revision") == NOT_LOADED for record in records)

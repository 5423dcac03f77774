"""The output of a job: Parquet shards per work unit, committed by per-unit records (labeler/manifest.py).

Commit protocol for one unit, the same on a local disk and on an object store:
1. write each of its shards whole under its final, unit-derived name (labels/part-NNNNN.parquet, ...);
2. write its commit record commits/<unit_id>.json.
A crash before 2 leaves files of an uncommitted unit; the next run deletes them and redoes the
unit under the same names, so no row is ever duplicated or lost. Readers and resume trust only
committed units. The manifest is rewritten with the records folded in about 64 times per job
(every commit for jobs of up to 127 units), at least once a minute, and at the end of the job.

On resume, the shards of every committed unit are checked (listed, and their Parquet footers read):
a unit whose shard was deleted or cut short since it was committed is pending again and redone.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import pyarrow as pa

from labeler.store.errors import StorageError
from labeler.store.manifest import (
    COMMITS_DIR,
    JOB_KIND_KEY,
    LABEL_COUNTS_KEY,
    MANIFEST_NAME,
    RECORD_CONFIG_HASH,
    RECORD_SCHEMA_VERSION,
    WRITES_JUDGMENTS,
    check_same_engine,
    commit_record_name,
    compact,
    engine_record_id,
    label_counts,
    load_manifest,
    now_iso,
    refresh_totals,
    save_manifest,
    write_commit_record,
)
from labeler.store.location import OutputLocation
from schemas import validate_judgments, validate_labels, validate_rejected, validate_rollouts
from schemas.manifest import UNIT_COMMITTED, UNIT_PENDING
from schemas.tables import SCHEMA_VERSION

LABELS_DIR = "labels"
ROLLOUTS_DIR = "rollouts"
REJECTED_DIR = "rejected"
JUDGMENTS_DIR = "judgments"  # the output of a judge (labeler judge)
INPUT_REJECTED_NAME = "input.parquet"
SHARD_DIRS = (LABELS_DIR, ROLLOUTS_DIR, REJECTED_DIR)  # a labeling job's folders; a judge's are JUDGE_SHARD_DIRS
JUDGE_SHARD_DIRS = (JUDGMENTS_DIR, REJECTED_DIR)
MANIFEST_TEMP = f".{MANIFEST_NAME}.tmp"  # left by a kill during a manifest rewrite (labeler/store/location.py)
COMMITTED_KEYS = ("files", "stats", "committed_at", "engine_record")  # what a commit adds to a unit
FAILURE_KEY = "failure"  # in the stats of a unit committed as failed (rows of it in rejected/): why; --retry-rejected redoes it
# also true in the stats of a unit its machine failed (an unhealthy answer checker), not its rows: every rerun redoes it
TRANSIENT_KEY = "transient"
REOPENED_KEY = "reopened"  # in the stats of a TRANSIENT_KEY unit: how many reruns reopened it and failed it again
FOOTER_READERS = 16  # footers read at once on resume: an object store answers each in tens of milliseconds

_VALIDATORS = {LABELS_DIR: validate_labels, ROLLOUTS_DIR: validate_rollouts, REJECTED_DIR: validate_rejected, JUDGMENTS_DIR: validate_judgments}

# Manifest rewrites per job: about this many, so their total cost grows linearly with the job.
COMPACTIONS_PER_JOB = 64
COMPACT_AFTER_SECONDS = 60.0


def reopened_by_a_rerun(stats: dict, transient_only: bool) -> bool:
    """Whether a committed unit with these stats is labelled again by a rerun: one failed by its machine
    (TRANSIENT_KEY) by every rerun, one failed by its rows (rejected/) only with --retry-rejected
    (`transient_only` False). ShardStore.reopen_failed_units reopens them; `--dry-run` counts them to run."""
    return bool(stats.get(FAILURE_KEY)) and (bool(stats.get(TRANSIENT_KEY)) or not transient_only)


class ShardStore:
    def __init__(self, output: str | Path, shard_dirs: tuple[str, ...] = SHARD_DIRS):
        """shard_dirs: the folders of shards the job writes (a labeling job's by default)."""
        self.location = OutputLocation(output)
        self.shard_dirs = shard_dirs
        self.manifest: dict | None = None
        self._units: dict[str, dict] = {}
        self._compact_every = 1
        self._uncompacted = 0
        self._last_compaction = time.monotonic()
        # Called before each commit and manifest rewrite; raises if this driver no longer holds the
        # output (labeler/store/lock.py), so a driver that lost its lock stops before it writes.
        self.fence: Callable[[], None] | None = None

    # -- lifecycle -------------------------------------------------------
    def exists(self) -> bool:
        return self.location.exists(MANIFEST_NAME)

    def holds_a_job(self) -> bool:
        """Whether a job has written here: its manifest, or, where the manifest is lost (--rebuild-manifest
        folds one anew), a commit record or a shard; an input's refused rows alone (INPUT_REJECTED_NAME) are none."""
        if self.exists() or self.location.list_names(COMMITS_DIR):
            return True
        return any(
            name != INPUT_REJECTED_NAME and not name.startswith(".") for directory in (*SHARD_DIRS, JUDGMENTS_DIR)
            for name in self.location.list_names(directory)
        )  # fmt: skip

    def load(self) -> dict | None:
        self._adopt(load_manifest(self.location))
        return self.manifest

    def wipe(self) -> None:
        """--overwrite: remove what a previous job wrote, nothing else (not the lock this driver holds)."""
        for name in (*self.shard_dirs, COMMITS_DIR):
            self.location.delete_tree(name)
        self.location.delete(MANIFEST_NAME)
        self.location.delete(MANIFEST_TEMP)
        self._adopt(None)

    def start(self, manifest: dict) -> None:
        self.location.make_dirs(*self.shard_dirs, COMMITS_DIR)
        self._adopt(manifest)
        save_manifest(self.location, manifest)

    def _adopt(self, manifest: dict | None) -> None:
        self.manifest = manifest
        self._units = {unit["unit_id"]: unit for unit in manifest["units"]} if manifest else {}
        self._compact_every = max(1, len(self._units) // COMPACTIONS_PER_JOB)

    def remove_uncommitted(self) -> list[str]:
        """Delete shards, temp files and commit records of units that are not committed."""
        assert self.manifest is not None
        keep = {f"{REJECTED_DIR}/{INPUT_REJECTED_NAME}"}
        for unit in self.committed_units():
            keep.update(unit.get("files", {}).values())
            keep.add(commit_record_name(unit["unit_id"]))
        removed = []
        if self.location.is_local and self.location.exists(MANIFEST_TEMP):
            self.location.delete(MANIFEST_TEMP)
            removed.append(MANIFEST_TEMP)
        for directory in (*self.shard_dirs, COMMITS_DIR):
            for name in self.location.list_names(directory):
                relative = f"{directory}/{name}"
                if relative not in keep:
                    self.location.delete(relative)
                    removed.append(relative)
        return removed

    def redo_unreadable_units(self) -> list[str]:
        """Mark pending again each committed unit with a shard that is missing or unreadable, and
        save the manifest; one line per such unit, to warn with. Its other files and its commit
        record go with remove_uncommitted, and the run redoes it under the same names."""
        assert self.manifest is not None
        units = self.committed_units()
        listed = {directory: set(self.location.list_names(directory)) for directory in self.shard_dirs}
        problems: dict[str, str] = {}
        to_read = []
        for unit in units:
            for relative in unit.get("files", {}).values():
                directory, _, name = relative.rpartition("/")
                if name not in listed.get(directory, ()):
                    problems.setdefault(unit["unit_id"], f"{self.location.display(relative)}: missing")
                else:
                    to_read.append((unit["unit_id"], relative))
        with ThreadPoolExecutor(FOOTER_READERS) as pool:
            for (unit_id, _), problem in zip(to_read, pool.map(self._footer_problem, [relative for _, relative in to_read])):
                if problem is not None:
                    problems.setdefault(unit_id, problem)
        self._reopen(set(problems))
        return [f"{problem}; unit {unit_id} was committed with it and is redone" for unit_id, problem in sorted(problems.items())]

    def reopen_failed_units(self, transient_only: bool = False) -> int:
        """Mark pending again the units committed as failed (rows of them in rejected/ after too many
        failures: labeler/labeling/unit_failures.py), or with `transient_only` those that their machine
        failed (TRANSIENT_KEY); how many. The run redoes them."""
        assert self.manifest is not None
        failed = set()
        for unit in self.committed_units():
            if reopened_by_a_rerun(stats := unit.get("stats", {}), transient_only):
                failed.add(unit["unit_id"])
                if transient_only:  # counted, so that a unit the machine fails on every rerun is told apart (commit_unit)
                    unit[REOPENED_KEY] = stats.get(REOPENED_KEY, 0) + 1
        self._reopen(failed)
        return len(failed)

    def _reopen(self, unit_ids: set[str]) -> None:
        """Committed units back to pending, saved at once; their files and commit records go with remove_uncommitted."""
        if not unit_ids:
            return
        for unit in self.committed_units():
            if unit["unit_id"] in unit_ids:
                for key in COMMITTED_KEYS:
                    unit.pop(key, None)
                unit["state"] = UNIT_PENDING
        refresh_totals(self.manifest)
        save_manifest(self.location, self.manifest)  # pending before its record is deleted: never committed without its shards

    def _footer_problem(self, relative: str) -> str | None:
        try:
            self.location.check_parquet(relative)
        except StorageError as error:
            return str(error)
        return None

    # -- units -------------------------------------------------------------
    def committed_units(self) -> list[dict]:
        assert self.manifest is not None
        return [unit for unit in self.manifest["units"] if unit["state"] == UNIT_COMMITTED]

    def is_committed(self, unit_id: str) -> bool:
        return self._units[unit_id]["state"] == UNIT_COMMITTED

    def write_input_rejected(self, table: pa.Table) -> None:
        self._write(REJECTED_DIR, INPUT_REJECTED_NAME, table)

    def use_engine(self, record: dict, allow_change: bool = False) -> str:
        """The id under which units labelled with engine `record` are committed, the record saved
        in the manifest first. The job's record is that of its first committed units: before any
        unit commits, a new engine simply becomes the job's; after, another one is refused
        (EngineChangeError) unless `allow_change`."""
        assert self.manifest is not None
        manifest = self.manifest
        record_id = engine_record_id(record)
        known = manifest.setdefault("engine_records", {})
        if record_id in known and (record_id == manifest.get("engine_record") or allow_change):
            return record_id
        if record_id == manifest.get("engine_record"):  # a rebuilt manifest knows its record by the id only
            known[record_id] = record
        elif not self.committed_units():
            manifest["engine_record"], manifest["engine_records"] = record_id, {record_id: record}
        else:
            if not allow_change:
                check_same_engine(manifest, record, self.location.display())
            known[record_id] = record
        save_manifest(self.location, manifest)  # before any commit record names it
        return record_id

    def commit_unit(
        self, unit_id: str, shard_name: str, tables: dict[str, pa.Table], stats: dict, engine_record: str | None = None
    ) -> bool:
        """Write the unit's shards (labels, and optionally rollouts and rejected), then commit it,
        naming the engine record it was labelled with (`use_engine`; None when no engine labelled it).

        False, and nothing written, when the unit is already committed (a duplicate result).
        """
        assert self.manifest is not None
        unit = self._units[unit_id]
        if unit["state"] == UNIT_COMMITTED:
            return False
        self._check_fence()
        if (reopened := unit.pop(REOPENED_KEY, None)) and stats.get(TRANSIENT_KEY):  # failed again by the machine
            stats = {**stats, REOPENED_KEY: reopened}
        if LABELS_DIR in tables and (counts := label_counts(tables[LABELS_DIR])) is not None:  # its steps by label method
            stats = {**stats, LABEL_COUNTS_KEY: counts}
        files = {}
        for directory, table in tables.items():
            self._write(directory, shard_name, table)
            files[directory] = f"{directory}/{shard_name}"
        record = {"unit_id": unit_id, "files": files, "stats": stats, "committed_at": now_iso()}
        record[RECORD_CONFIG_HASH] = self.manifest["config_hash"]
        if self.manifest.get(JOB_KIND_KEY) != WRITES_JUDGMENTS:  # judgments have their own schema
            record[RECORD_SCHEMA_VERSION] = SCHEMA_VERSION
        if engine_record is not None:
            record["engine_record"] = engine_record
        write_commit_record(self.location, record)
        unit.update(state=UNIT_COMMITTED, **{key: value for key, value in record.items() if key in COMMITTED_KEYS})
        self._uncompacted += 1
        if self._uncompacted >= self._compact_every or time.monotonic() - self._last_compaction > COMPACT_AFTER_SECONDS:
            self.compact()
        return True

    def compact(self) -> None:
        """Fold the commit records into manifest.json (also called at the end of a job)."""
        assert self.manifest is not None
        self._check_fence()
        compact(self.location, self.manifest)
        self._uncompacted = 0
        self._last_compaction = time.monotonic()

    def _check_fence(self) -> None:
        if self.fence is not None:
            self.fence()

    # -- reading -------------------------------------------------------------
    def read_table(self, relative: str, columns: list[str] | None = None) -> pa.Table:
        return self.location.read_table(relative, columns)

    def committed_files(self, directory: str) -> list[str]:
        """The committed shards of one folder (labels, rollouts, rejected): what readers should read."""
        files = [unit["files"][directory] for unit in self.committed_units() if directory in unit.get("files", {})]
        if directory == REJECTED_DIR and self.location.exists(f"{REJECTED_DIR}/{INPUT_REJECTED_NAME}"):
            files.insert(0, f"{REJECTED_DIR}/{INPUT_REJECTED_NAME}")
        return files

    def _write(self, directory: str, name: str, table: pa.Table) -> None:
        _VALIDATORS[directory](table)
        self.location.write_table(f"{directory}/{name}", table)

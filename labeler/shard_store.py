"""The output directory: Parquet shards per work unit and the manifest that commits them.

Commit protocol for one unit: write each shard to a hidden temp name, fsync, rename to its final
unit-derived name, then record the unit as committed in the manifest (itself replaced atomically).
A crash before the manifest write leaves files of an uncommitted unit; the next run deletes them
and redoes the unit under the same names, so no row is ever duplicated or lost.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from labeler.manifest import load_manifest, now_iso, refresh_totals, save_manifest
from schemas import validate_labels, validate_rejected, validate_rollouts
from schemas.manifest import UNIT_COMMITTED

LABELS_DIR = "labels"
ROLLOUTS_DIR = "rollouts"
REJECTED_DIR = "rejected"
INPUT_REJECTED_NAME = "input.parquet"

_VALIDATORS = {LABELS_DIR: validate_labels, ROLLOUTS_DIR: validate_rollouts, REJECTED_DIR: validate_rejected}


class ShardStore:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.manifest: dict | None = None

    # -- lifecycle -------------------------------------------------------
    def exists(self) -> bool:
        return (self.root / "manifest.json").exists()

    def load(self) -> dict | None:
        self.manifest = load_manifest(self.root)
        return self.manifest

    def wipe(self) -> None:
        """--overwrite: remove what a previous job wrote, nothing else."""
        for name in (LABELS_DIR, ROLLOUTS_DIR, REJECTED_DIR):
            shutil.rmtree(self.root / name, ignore_errors=True)
        (self.root / "manifest.json").unlink(missing_ok=True)
        self.manifest = None

    def start(self, manifest: dict) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        for name in (LABELS_DIR, ROLLOUTS_DIR, REJECTED_DIR):
            (self.root / name).mkdir(exist_ok=True)
        self.manifest = manifest
        save_manifest(self.root, manifest)

    def remove_uncommitted(self) -> list[str]:
        """Delete temp files and shards of units the manifest does not record as committed."""
        assert self.manifest is not None
        keep = {f"{REJECTED_DIR}/{INPUT_REJECTED_NAME}"}
        for unit in self.committed_units():
            keep.update(unit.get("files", {}).values())
        removed = []
        for name in (LABELS_DIR, ROLLOUTS_DIR, REJECTED_DIR):
            for path in (self.root / name).iterdir():
                if f"{name}/{path.name}" not in keep:
                    path.unlink()
                    removed.append(f"{name}/{path.name}")
        return removed

    # -- units -------------------------------------------------------------
    def committed_units(self) -> list[dict]:
        assert self.manifest is not None
        return [unit for unit in self.manifest["units"] if unit["state"] == UNIT_COMMITTED]

    def is_committed(self, unit_id: str) -> bool:
        return any(unit["unit_id"] == unit_id for unit in self.committed_units())

    def write_input_rejected(self, table: pa.Table) -> None:
        self._write(REJECTED_DIR, INPUT_REJECTED_NAME, table)

    def commit_unit(self, unit_id: str, shard_name: str, tables: dict[str, pa.Table], stats: dict) -> None:
        """Write the unit's shards (labels, and optionally rollouts and rejected), then commit it."""
        assert self.manifest is not None
        files = {}
        for directory, table in tables.items():
            self._write(directory, shard_name, table)
            files[directory] = f"{directory}/{shard_name}"
        unit = next(unit for unit in self.manifest["units"] if unit["unit_id"] == unit_id)
        unit.update(state=UNIT_COMMITTED, files=files, stats=stats, committed_at=now_iso())
        refresh_totals(self.manifest)
        save_manifest(self.root, self.manifest)

    def _write(self, directory: str, name: str, table: pa.Table) -> None:
        _VALIDATORS[directory](table)
        final = self.root / directory / name
        temp = final.with_name(f".{name}.tmp")
        pq.write_table(table, temp)
        with open(temp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(temp, final)

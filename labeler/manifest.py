"""Reading and atomically rewriting manifest.json, the job's config and its record of committed units."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from schemas.manifest import MANIFEST_VERSION, UNIT_COMMITTED, UNIT_PENDING, validate_manifest
from schemas.tables import SCHEMA_VERSION

MANIFEST_NAME = "manifest.json"


class ConfigMismatchError(RuntimeError):
    """The output directory holds a job with other settings or other input."""


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
        "generated_tokens": int(total("generated_tokens")),
        "rejected_in_units": int(total("rejected")),
        "generation_seconds": round(total("seconds"), 3),
    }


def load_manifest(directory: Path) -> dict | None:
    path = directory / MANIFEST_NAME
    if not path.exists():
        return None
    document = json.loads(path.read_text())
    validate_manifest(document)
    return document


def save_manifest(directory: Path, document: dict) -> None:
    """Write to a temp file, fsync, rename: a reader sees the old or the new manifest, never half."""
    validate_manifest(document)
    document["updated_at"] = now_iso()
    path = directory / MANIFEST_NAME
    temp = path.with_name(f".{MANIFEST_NAME}.tmp")
    with open(temp, "w") as handle:
        json.dump(document, handle, indent=1, sort_keys=False)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)
    _fsync_dir(directory)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_same_job(existing: dict, config: dict, config_hash: str, plan_hash: str, directory: Path) -> None:
    """Refuse to mix two jobs in one directory."""
    if existing["config_hash"] != config_hash:
        old = existing["config"]
        changed = sorted(key for key in set(old) | set(config) if key != "output" and old.get(key) != config.get(key))
        raise ConfigMismatchError(
            f"{directory} holds a job with a different config (changed: {', '.join(changed) or 'unknown'}); "
            "use the same settings to resume, another --output, or --overwrite to start over"
        )
    if existing["plan_hash"] != plan_hash:
        raise ConfigMismatchError(
            f"{directory} holds a job planned from different input rows; "
            "use the same input to resume, another --output, or --overwrite to start over"
        )

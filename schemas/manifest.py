"""The manifest: one JSON document per output directory, the job's config and its commit record."""

from __future__ import annotations

MANIFEST_VERSION = 1

UNIT_PENDING = "pending"
UNIT_COMMITTED = "committed"

REQUIRED_KEYS = ("manifest_version", "schema_version", "config", "config_hash", "plan_hash", "versions", "units", "totals")
REQUIRED_UNIT_KEYS = ("unit_id", "index", "n_rows", "state")
# Optional, absent in jobs started before them: `engine_record` and `engine_records` (the engine
# records, labeler/store/manifest.py), a committed unit's `engine_record`, and a unit's
# `n_solutions` (the solutions it is to label: its given ones, M sampled per problem-only row).


class ManifestError(ValueError):
    """The manifest is missing fields or has a version this code does not read."""


def validate_manifest(document: dict) -> None:
    missing = [key for key in REQUIRED_KEYS if key not in document]
    if missing:
        raise ManifestError(f"manifest is missing {', '.join(missing)}")
    if document["manifest_version"] != MANIFEST_VERSION:
        raise ManifestError(f"manifest_version {document['manifest_version']} is not {MANIFEST_VERSION}")
    for unit in document["units"]:
        absent = [key for key in REQUIRED_UNIT_KEYS if key not in unit]
        if absent:
            raise ManifestError(f"unit {unit.get('unit_id', '?')} is missing {', '.join(absent)}")
        if unit["state"] not in (UNIT_PENDING, UNIT_COMMITTED):
            raise ManifestError(f"unit {unit['unit_id']} has unknown state {unit['state']!r}")

"""Data contracts of prm-labeler: Arrow schemas of the output tables and the manifest, versioned."""

from schemas.tables import (
    LABELS_SCHEMA,
    REJECTED_SCHEMA,
    ROLLOUTS_SCHEMA,
    SCHEMA_VERSION,
    SchemaError,
)
from schemas.validate import validate_labels, validate_rejected, validate_rollouts

__all__ = [
    "LABELS_SCHEMA",
    "REJECTED_SCHEMA",
    "ROLLOUTS_SCHEMA",
    "SCHEMA_VERSION",
    "SchemaError",
    "validate_labels",
    "validate_rejected",
    "validate_rollouts",
]

"""Data contracts of prm-labeler: Arrow schemas of the output tables and the manifest, versioned."""

from schemas.judgments import JUDGMENTS_SCHEMA, JUDGMENTS_SCHEMA_VERSION
from schemas.tables import (
    LABELS_SCHEMA,
    REJECTED_SCHEMA,
    ROLLOUTS_SCHEMA,
    SCHEMA_VERSION,
    SchemaError,
)
from schemas.validate import validate_judgments, validate_labels, validate_rejected, validate_rollouts

__all__ = [
    "JUDGMENTS_SCHEMA",
    "JUDGMENTS_SCHEMA_VERSION",
    "LABELS_SCHEMA",
    "REJECTED_SCHEMA",
    "ROLLOUTS_SCHEMA",
    "SCHEMA_VERSION",
    "SchemaError",
    "validate_judgments",
    "validate_labels",
    "validate_rejected",
    "validate_rollouts",
]

"""The settings of `labeler import`; those it shares with `labeler label` (how rows are read) are
declared there once and taken from it (`same_setting`)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from labeler.ids import stable_id
from labeler.inputs.human_labels import HUMAN_LABEL_PRESETS, NEUTRAL_MODES
from labeler.labeling.config import INPUT_OUTPUT, LabelConfig, check_choices, check_numbers, names_with, same_setting, setting

LABELS = "labels"


@dataclass(frozen=True)
class ImportConfig:
    input: str = setting(help="the labelled dataset: jsonl, json (array), parquet, a folder of such files (one kind), or hf:NAME[:CONFIG][@SPLIT]", metavar="SPEC", group=INPUT_OUTPUT)
    output: str = setting(
        help="output directory, written as `labeler label` writes one (labels/, rejected/, manifest.json)",
        metavar="DIR",
        group=INPUT_OUTPUT,
        may_change_on_resume=True,
    )
    preset: str = setting(choices=HUMAN_LABEL_PRESETS, help="the dataset's format, which says what its labels mean", group=INPUT_OUTPUT)
    neutral: str = setting(
        "exclude",
        choices=NEUTRAL_MODES,
        help="PRM800K: what a step rated 0 (neutral) is: a positive label, a negative one, or none (unlabelled, with the reason)",
        group=LABELS,
    )
    answers: str | None = same_setting(LabelConfig, "answers")
    limit: int | None = same_setting(LabelConfig, "limit")
    split_rule: str = same_setting(LabelConfig, "split_rule")
    max_row_chars: int = same_setting(LabelConfig, "max_row_chars")
    max_rejected_share: float = same_setting(LabelConfig, "max_rejected_share")
    columns: dict[str, str] = same_setting(LabelConfig, "columns")
    shard_size: int = setting(1024, at_least=1, help="solutions per shard (one work unit, one commit)", group=INPUT_OUTPUT)
    trust_remote_code: bool = same_setting(LabelConfig, "trust_remote_code")

    def __post_init__(self) -> None:
        check_choices(self)
        check_numbers(self)

    def to_dict(self) -> dict:
        return asdict(self)

    def output_settings(self) -> dict:
        """The settings that decide what the import writes; a rerun must match them to resume."""
        return {key: value for key, value in self.to_dict().items() if key not in self.ON_RESUME + self.GUARDS}

    def config_hash(self) -> str:
        return stable_id(json.dumps(self.output_settings(), sort_keys=True))


ImportConfig.ON_RESUME = names_with(ImportConfig, "may_change_on_resume")
ImportConfig.GUARDS = names_with(ImportConfig, "guard")

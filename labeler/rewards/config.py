"""Settings of a PRM used as a reward, each declared once (a server's flags can come from them)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from labeler.inputs.splitting import SPLIT_RULES
from labeler.labeling.config import _same_field, check_choices, check_numbers, setting
from labeler.prm.config import TrainConfig
from labeler.prm.scorers import PRM_SPEC_HELP
from labeler.prm.solution_scores import AGGREGATES

REWARD, PRM = "reward", "PRM"
_TRAIN = {f.name: f for f in dataclasses.fields(TrainConfig)}  # where the PRM runs: declared once, for `labeler train`


@dataclass(frozen=True)
class RewardConfig:
    prm: str = setting(help=f"the PRM that scores each step: {PRM_SPEC_HELP}", metavar="SPEC", group=PRM)
    aggregate: str = setting(
        "min",
        choices=AGGREGATES,
        help="how a completion's step scores become its process reward: min (the weakest step; PURE's min-form credit "
        "assignment), product, last or mean",
        group=REWARD,
    )
    split: str = setting("auto", choices=SPLIT_RULES, help="how a completion is cut into the steps the PRM scores", group=REWARD)
    answer_weight: float = setting(
        0.0,
        at_least=0.0,
        help="weight of the verifiable reward (1 when the completion's final answer matches the reference, else 0) added to "
        "the process reward; 0: the process reward alone, no reference needed",
        group=REWARD,
    )
    device: str = _same_field(_TRAIN["device"])
    precision: str = _same_field(_TRAIN["precision"])
    batch_size: int = setting(8, at_least=1, help="completions per PRM forward pass", group=PRM)
    max_length: int = setting(
        None, at_least=1, help="tokens a public PRM reads per completion; steps past it are unscored", group=PRM,
        default_text="its context",
    )
    trust_remote_code: bool = _same_field(_TRAIN["trust_remote_code"])

    def __post_init__(self):
        check_choices(self)
        check_numbers(self)

"""The PRM as a reward function for TRL's GRPOTrainer (its stable API: a callable that takes prompts,
completions and the dataset's other columns as keywords and returns one float or None per completion).

    from trl import GRPOTrainer
    from labeler.rewards import RewardConfig
    from labeler.rewards.trl_grpo import PRMRewardFunction

    reward = PRMRewardFunction(RewardConfig(prm="runs/prm/best", answer_weight=1.0))  # reference: column "solution"
    trainer = GRPOTrainer(model=..., reward_funcs=reward, args=..., train_dataset=dataset)

A completion whose reward could not be measured (ProcessReward says why) gets None, which GRPOTrainer
makes NaN: left out when this is the only reward function, but summed as 0 beside others under its default
multi_objective_aggregation "sum_then_normalize" (nansum); the share of such completions
is logged as the metric `prm/unmeasured`, and the reasons as the completions table's column `prm_reason`.
Prompts and completions may be plain text or conversational (lists of messages): the problem is the last
user message, the completion its messages' contents joined.
"""

from __future__ import annotations

from labeler.rewards.config import RewardConfig
from labeler.rewards.process_reward import ProcessReward


class PRMRewardFunction:
    __name__ = "prm_reward"  # how GRPOTrainer names its metrics (rewards/prm_reward/mean, ...)

    def __init__(self, config: RewardConfig, reference_column: str = "solution", scorer=None):
        """`reference_column`: the dataset column of reference answers (read when config.answer_weight > 0);
        `scorer`: a loaded step scorer to use instead of loading config.prm."""
        self.reward = ProcessReward(config, scorer=scorer)
        self.reference_column = reference_column

    def __call__(self, prompts, completions, completion_ids=None, **kwargs) -> list[float | None]:
        references = None
        if self.reward.config.answer_weight > 0:
            if self.reference_column not in kwargs:
                raise ValueError(
                    f"answer_weight > 0 needs the reference answers: the dataset has no column {self.reference_column!r} "
                    "(PRMRewardFunction(reference_column=...) names another)"
                )
            references = kwargs[self.reference_column]
        results = self.reward.rewards([problem_text(p) for p in prompts], [completion_text(c) for c in completions], references)
        unmeasured = [r.reason or "" for r in results]
        if callable(kwargs.get("log_metric")):
            kwargs["log_metric"]("prm/unmeasured", sum(bool(x) for x in unmeasured) / max(1, len(results)))
        if callable(kwargs.get("log_extra")):
            kwargs["log_extra"]("prm_reason", unmeasured)
        return [r.value for r in results]


def problem_text(prompt) -> str:
    """A prompt's problem: the text itself, or the content of a conversation's last user message."""
    if isinstance(prompt, str):
        return prompt
    users = [m.get("content", "") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
    if not users or not isinstance(users[-1], str):
        raise ValueError(f"a conversational prompt with no user message of text: {prompt!r:.200}")
    return users[-1]


def completion_text(completion) -> str:
    """A completion's text: itself, or its messages' contents joined (GRPOTrainer's conversational form)."""
    if isinstance(completion, str):
        return completion
    parts = [m.get("content", "") for m in completion if isinstance(m, dict)]
    if not all(isinstance(part, str) for part in parts):
        raise ValueError(f"a conversational completion whose content is not text: {completion!r:.200}")
    return "".join(parts)

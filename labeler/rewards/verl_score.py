"""The PRM as verl's custom reward function. In verl's config:

    custom_reward_function.path=<site-packages>/labeler/rewards/verl_score.py
    custom_reward_function.name=compute_score
    +custom_reward_function.reward_kwargs.prm=runs/prm/best
    +custom_reward_function.reward_kwargs.answer_weight=1.0
    +custom_reward_function.reward_kwargs.unmeasured_score=0.0   # only if you accept it (below)

`reward_kwargs` are RewardConfig's fields (labeler/rewards/config.py) plus `unmeasured_score`. The
problem comes from the sample's extra_info["question"] (verl's GSM8K preprocessing puts it there; add it
for other datasets), the reference from ground_truth. verl needs a number for every sample, and a reward that could
not be measured has none: by default such a sample stops the run with its reason; `unmeasured_score`
is the number you choose for them instead (each such sample logs a warning with its reason, and the
metric prm_unmeasured counts them); a missing ground truth (None, NaN) is one of them, never checked as
"nan". verl's call forms all work: one sample (the naive reward manager), lists (the batch reward
manager), and the reward loop's, which adds reward_router_address, reward_model_tokenizer and reward_model
and calls from a thread pool: the PRM loads once per config, whichever thread asks first.

verl's reward loop serves reward models with `vllm serve` behind a router and passes its address as
reward_router_address. Serve our PRM there (format 2: `vllm serve runs/prm/best --runner pooling
--pooler-config '{"task": "token_classify", "tok_pooling_type": "ALL"}'`, more replicas behind the
router to scale) and the steps are scored by that server (labeler/prm/pooling_client.py), rendered here
with reward_kwargs.prm's own tokenizer and settings, the folder the server must be serving (checked
once: another model is refused with both named); reward_model_tokenizer is not needed for that. Without
an address, or with `+custom_reward_function.reward_kwargs.score_locally=true`, the PRM runs in the
reward worker.
"""

from __future__ import annotations

import logging
import threading

from labeler.rewards.config import RewardConfig
from labeler.rewards.process_reward import ProcessReward, Reward

logger = logging.getLogger(__name__)
_loaded: dict[tuple[RewardConfig, str | None], ProcessReward] = {}  # one PRM per config (and server) in a reward worker
_loading = threading.Lock()  # verl's reward loop calls from an executor's threads: one load, not one per thread
# what verl's reward loop passes besides the sample: its own reward model, which this reward does not use
VERL_REWARD_MODEL_KWARGS = ("reward_model_tokenizer", "reward_model")


def compute_score(data_source=None, solution_str=None, ground_truth=None, extra_info=None, *, data_sources=None,
                  solution_strs=None, ground_truths=None, extra_infos=None, unmeasured_score: float | None = None,
                  reward_router_address: str | None = None, score_locally: bool = False, **reward_kwargs):  # fmt: skip
    batch = solution_strs is not None
    solutions = list(solution_strs) if batch else [solution_str]
    truths = list(ground_truths) if batch else [ground_truth]
    infos = list(extra_infos) if batch else [extra_info]
    for name in VERL_REWARD_MODEL_KWARGS:
        reward_kwargs.pop(name, None)
    address = None if score_locally else reward_router_address
    reward = _reward(RewardConfig(**reward_kwargs), address)
    problems = []
    for i, info in enumerate(infos):
        question = info.get("question") if isinstance(info, dict) else None
        if not isinstance(question, str):
            raise ValueError(f"sample {i}: extra_info has no 'question' (the problem text the PRM reads with the solution)")
        problems.append(question)
    answers_asked = reward.config.answer_weight > 0
    references = truths if answers_asked else None  # a missing one (None, NaN) is unmeasured (ProcessReward)
    scores = [_score(r, unmeasured_score, i, answers_asked) for i, r in enumerate(reward.rewards(problems, solutions, references))]
    return scores if batch else scores[0]


def _score(result: Reward, unmeasured_score: float | None, i: int, answers_asked: bool) -> dict:
    """verl's dict form: "score" is the reward, the other keys are logged as metrics (numbers only, NaN for
    what was not measured, the same keys for every sample)."""
    if result.value is None:
        if unmeasured_score is None:
            raise ValueError(
                f"sample {i}: no reward ({result.reason}); verl needs a number: set reward_kwargs.unmeasured_score to the "
                "one such samples should get"
            )
        logger.warning("sample %d: no reward (%s): scored unmeasured_score=%s", i, result.reason, unmeasured_score)
    score = {
        "score": result.value if result.value is not None else float(unmeasured_score),
        "prm_process": result.process if result.process is not None else float("nan"),
        "prm_unmeasured": float(result.value is None),
    }
    if answers_asked:
        score["prm_answer_correct"] = float("nan") if result.answer_correct is None else float(result.answer_correct)
    return score


def _reward(config: RewardConfig, address: str | None = None) -> ProcessReward:
    """The reward of `config`, its PRM in this process or (with an address) served by `vllm serve` there."""
    with _loading:
        if (config, address) not in _loaded:
            scorer = None
            if address is not None:
                from labeler.prm.pooling_client import PoolingServerScorer

                scorer = PoolingServerScorer(config.prm, address, trust_remote_code=config.trust_remote_code, max_length=config.max_length)
            _loaded[(config, address)] = ProcessReward(config, scorer=scorer)
        return _loaded[(config, address)]

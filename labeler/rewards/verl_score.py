"""The PRM as verl's custom reward function. In verl's config:

    custom_reward_function.path=<site-packages>/labeler/rewards/verl_score.py
    custom_reward_function.name=compute_score
    +custom_reward_function.reward_kwargs.prm=runs/prm/best
    +custom_reward_function.reward_kwargs.answer_weight=1.0
    +custom_reward_function.reward_kwargs.unmeasured_score=0.0   # the default: a sample with no reward scores 0

`reward_kwargs` are RewardConfig's fields (labeler/rewards/config.py) plus `unmeasured_score`. The
problem comes from the sample's extra_info["question"] (verl's GSM8K preprocessing puts it there; its MATH
preprocessing does not: add it for other datasets), the reference from ground_truth. verl needs a number for
every sample, and a reward that could not be measured has none: an empty completion, a step past the PRM's
length limit, a missing ground truth (None, NaN, "nan": never checked as "nan"), an answer check that timed
out, a sample whose extra_info has no 'question' (the PRM has no problem to read). Such a sample scores
`unmeasured_score`, 0.0 by default: a failing score, no higher than any measured reward (the process reward is
in [0, 1] and the answer part adds 0 or answer_weight), so that a policy gains nothing by writing what cannot
be measured. Each logs a warning with its reason and this worker's running count (unmeasured_counts() gives
them by the reason's kind, Reward.reason_kind: one key per cause, whatever the step counts), and the metric prm_unmeasured is 1 for it (verl's mean of it: the batch's share). One such
sample never stops the batch; `unmeasured_score=null` asks for that instead (a ValueError with the sample
and the reason). But when the first 32 samples a worker scores (SETUP_WINDOW: in one call or several) all have
no reward for the same kind of reason, a dataset without 'question' most often (or a PRM length limit below
every response, whatever their step counts), that is the setup's fault, not a gap: a
ValueError names the reason (labeler/rewards/setup_check.py) rather than train on a constant score. Once one of
them is measured, every later gap is per sample. verl's call forms all work: one sample (the naive reward manager), lists (the batch reward
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
from collections import Counter

from labeler.rewards.config import RewardConfig
from labeler.rewards.process_reward import NO_EXTRA_INFO, NO_QUESTION, QUESTION_NOT_TEXT, ProcessReward, Reward
from labeler.rewards.setup_check import FirstSamples, kind_of

logger = logging.getLogger(__name__)
_loaded: dict[tuple[RewardConfig, str | None], ProcessReward] = {}  # one PRM per config (and server) in a reward worker
_loading = threading.Lock()  # verl's reward loop calls from an executor's threads: one load, not one per thread
# what verl's reward loop passes besides the sample: its own reward model, which this reward does not use
VERL_REWARD_MODEL_KWARGS = ("reward_model_tokenizer", "reward_model")


UNMEASURED_SCORE = 0.0  # what a sample with no reward scores unless reward_kwargs.unmeasured_score says otherwise
_unmeasured = Counter()  # samples scored unmeasured_score in this worker, by kind of reason (Reward.reason_kind: no counts)
_samples = 0  # samples this worker was asked to score
_counting = threading.Lock()
_first_samples = FirstSamples()  # this worker's first SETUP_WINDOW samples: all unmeasured for one reason stops the run


def compute_score(data_source=None, solution_str=None, ground_truth=None, extra_info=None, *, data_sources=None,
                  solution_strs=None, ground_truths=None, extra_infos=None, unmeasured_score: float | None = UNMEASURED_SCORE,
                  reward_router_address: str | None = None, score_locally: bool = False, **reward_kwargs):  # fmt: skip
    batch = solution_strs is not None
    solutions = list(solution_strs) if batch else [solution_str]
    truths = list(ground_truths) if batch else [ground_truth]
    infos = list(extra_infos) if batch else [extra_info]
    for name in VERL_REWARD_MODEL_KWARGS:
        reward_kwargs.pop(name, None)
    address = None if score_locally else reward_router_address
    reward = _reward(RewardConfig(**reward_kwargs), address)
    if len(infos) != len(solutions):
        raise ValueError(f"{len(infos)} extra_infos but {len(solutions)} solutions: one per sample")
    answers_asked = reward.config.answer_weight > 0
    results: list[Reward | None] = [None] * len(solutions)
    problems = {}
    for i, info in enumerate(infos):
        question = info.get("question") if isinstance(info, dict) else None
        if isinstance(question, str):
            problems[i] = question
        else:  # verl's MATH preprocessing leaves it out: this sample has no reward, the others theirs
            kind = NO_EXTRA_INFO if not isinstance(info, dict) else NO_QUESTION if question is None else QUESTION_NOT_TEXT
            what = f"extra_info's 'question' is {type(question).__name__}, not text" if kind == QUESTION_NOT_TEXT else kind
            results[i] = Reward(
                None, reason=f"{what} (the problem text the PRM reads with the solution: add it when building the parquet)", reason_kind=kind
            )
    asked = sorted(problems)
    references = [truths[i] for i in asked] if answers_asked else None  # a missing one (None, NaN) is unmeasured (ProcessReward)
    for i, result in zip(asked, reward.rewards([problems[i] for i in asked], [solutions[i] for i in asked], references), strict=True):
        results[i] = result
    if (setup := _first_samples.add(results)) is not None:
        raise ValueError(
            f"the first {_first_samples.size} samples this worker scored all had no reward, for the same reason: {setup}; "
            "that is the dataset or the setup, not an occasional gap, and the run would train on a constant unmeasured_score: "
            "fix it (for a missing 'question': add extra_info['question'] when building the parquet, verl's MATH "
            "preprocessing leaves it out) and rerun"
        )
    scores = [_score(r, unmeasured_score, i, answers_asked) for i, r in enumerate(results)]
    return scores if batch else scores[0]


def unmeasured_counts() -> tuple[int, dict[str, int]]:
    """(samples scored in this worker, samples of them scored unmeasured_score by kind of reason: Reward.reason_kind,
    the reason without its counts, "steps unscored: past the PRM's length limit" for any step count)."""
    with _counting:
        return _samples, dict(_unmeasured)


def _score(result: Reward, unmeasured_score: float | None, i: int, answers_asked: bool) -> dict:
    """verl's dict form: "score" is the reward, the other keys are logged as metrics (numbers only, NaN for
    what was not measured, the same keys for every sample)."""
    global _samples
    with _counting:
        _samples += 1
        if result.value is not None:
            pass
        elif unmeasured_score is None:  # asked for: stop rather than score
            raise ValueError(f"sample {i}: no reward ({result.reason}); reward_kwargs.unmeasured_score=null stops the run on such a sample")
        else:
            _unmeasured[kind_of(result)] += 1
            count, total = sum(_unmeasured.values()), _samples
    if result.value is None:
        logger.warning(
            "sample %d: no reward (%s): scored unmeasured_score=%s (%d of %d samples so far in this worker)", i, result.reason,
            unmeasured_score, count, total,
        )  # fmt: skip
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

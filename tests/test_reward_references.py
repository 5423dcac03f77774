"""Rewards whose reference answer is missing (None, NaN: pandas' missing value, FastAPI's `NaN` literal) are
unmeasured, never checked as the text "nan": in ProcessReward, TRL's and verl's reward functions, and the
reward server over real HTTP. verl's reward-loop call form (its extra keywords, a thread pool) scores, and
the PRM loads once under concurrent calls."""

from __future__ import annotations

import concurrent.futures
import json
import math
import threading
import time

import httpx
import pytest

from labeler.rewards import ProcessReward, RewardConfig
from labeler.rewards.trl_grpo import PRMRewardFunction
from tests.public_prms import build_qwen_prm
from tests.test_rewards import TWO_STEPS, FixedScorer

RIGHT = "2 + 3 = 5.\n\nThe answer is $\\boxed{nan}$."  # a completion whose answer is the text "nan"
MISSING = [None, float("nan"), "  "]


def test_a_missing_reference_is_unmeasured_and_never_checked_as_nan():
    with ProcessReward(RewardConfig(prm="unused", answer_weight=1.0), scorer=FixedScorer([0.5])) as reward:
        results = reward.rewards(["What is 2 + 3?"] * 4, [RIGHT] * 3 + [TWO_STEPS], [*MISSING, "5"])
    for missing, result in zip(MISSING, results[:3]):
        assert result.value is None and result.answer_correct is None, missing
        assert result.process == 0.5 and "no reference answer" in result.reason, result.reason
    assert results[3].value == 1.5 and results[3].answer_correct is True  # the others in the batch are checked


def test_a_reference_written_as_the_text_of_a_missing_value_is_missing():
    """pandas' astype(str) and CSV exports write a missing value as "nan" (or "None", "<NA>", "null")."""
    texts = ["nan", "NaN", " None ", "null", "<NA>", "NULL"]
    with ProcessReward(RewardConfig(prm="unused", answer_weight=1.0), scorer=FixedScorer([0.5])) as reward:
        results = reward.rewards(["What is 2 + 3?"] * (len(texts) + 1), [RIGHT] * len(texts) + [TWO_STEPS], [*texts, "nanometre"])
    for text, result in zip(texts, results):
        assert result.value is None and result.answer_correct is None, text
        assert "no reference answer" in result.reason and "missing value" in result.reason, result.reason
    assert results[-1].answer_correct is False  # other text is a reference, checked


def test_the_trl_reward_function_gives_none_for_a_nan_reference():
    function = PRMRewardFunction(RewardConfig(prm="unused", answer_weight=1.0), scorer=FixedScorer([0.8]))
    logged = {}
    values = function(
        prompts=["q"] * 3, completions=[RIGHT, RIGHT, TWO_STEPS], solution=[float("nan"), None, 5],
        log_extra=lambda name, values: logged.setdefault(name, values),
    )  # fmt: skip
    assert values == [None, None, 1.8]
    assert all("no reference answer" in reason for reason in logged["prm_reason"][:2])


@pytest.fixture(scope="module")
def qwen_prm(tmp_path_factory):
    folder, _, _ = build_qwen_prm(tmp_path_factory.mktemp("reference-prm") / "qwen-prm")
    return f"qwen-prm:{folder}"


def test_verl_a_nan_ground_truth_is_unmeasured(qwen_prm):
    from labeler.rewards.verl_score import compute_score

    info = {"question": "What is 2 + 3?"}
    with pytest.raises(ValueError, match="sample 0: no reward \\(no reference answer"):
        compute_score("a", RIGHT, float("nan"), info, prm=qwen_prm, device="cpu", answer_weight=1.0, unmeasured_score=None)
    chosen = compute_score("a", RIGHT, float("nan"), info, prm=qwen_prm, device="cpu", answer_weight=1.0)  # the default, 0.0
    assert chosen["score"] == 0.0 and chosen["prm_unmeasured"] == 1.0 and math.isnan(chosen["prm_answer_correct"])


def test_verl_reward_loop_call_form_scores_from_a_thread_pool_and_loads_the_prm_once(qwen_prm, monkeypatch):
    """verl's reward loop runs compute_score(data_source=..., ..., reward_router_address=..., reward_model_tokenizer=...)
    in an executor's threads; every thread must get the same PRM, loaded once."""
    from labeler.prm import scorers
    from labeler.rewards import verl_score

    monkeypatch.setattr(verl_score, "_loaded", {})
    loads = []
    real_load = scorers.load_scorer

    def slow_load(*args, **kwargs):  # a slow load: every thread arrives while the first is still loading
        loads.append(threading.get_ident())
        time.sleep(0.5)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(scorers, "load_scorer", slow_load)
    start = threading.Barrier(6)

    def call(i):
        start.wait()
        return verl_score.compute_score(
            data_source="openai/gsm8k", solution_str=TWO_STEPS, ground_truth="5", extra_info={"question": "What is 2 + 3?"},
            reward_router_address=None, reward_model_tokenizer=object(), reward_model=None,
            prm=qwen_prm, device="cpu", answer_weight=1.0,
        )  # fmt: skip

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        scores = list(pool.map(call, range(6)))
    assert len(loads) == 1
    assert all(s == scores[0] for s in scores) and scores[0]["prm_answer_correct"] == 1.0
    assert scores[0]["score"] == pytest.approx(1.0 + scores[0]["prm_process"])


def test_the_reward_server_answers_a_nan_label_as_unmeasured_over_http(qwen_prm):
    from tests.test_reward_server import CHAT_PROMPT, PROBLEM, RESPONSE, ServedHere

    nan_body = lambda body: {"content": json.dumps(body, allow_nan=True), "headers": {"content-type": "application/json"}}  # noqa: E731
    with ServedHere("--prm", qwen_prm, "--answer-weight", "1.0", "--prm-backend", "torch") as served:
        query = {"query": [CHAT_PROMPT + RESPONSE] * 2, "prompts": [CHAT_PROMPT] * 2, "labels": [5, float("nan")]}
        answer = httpx.post(f"{served.url}/get_reward", timeout=60, **nan_body(query))
        assert answer.status_code == 200, answer.text  # that sample's outcome: --unmeasured-score, 0.0 by default
        assert answer.json()["extra_logs"]["prm_unmeasured"] == [0.0, 1.0] and answer.json()["rewards"][1] == 0.0
        per_step = {"problems": [PROBLEM] * 2, "completions": [RESPONSE] * 2, "references": ["5", float("nan")]}
        answer = httpx.post(f"{served.url}/rewards", timeout=60, **nan_body(per_step))
        assert answer.status_code == 200, answer.text
        known, missing = answer.json()["rewards"]
        assert known["answer_correct"] is True and known["value"] is not None
        assert missing["value"] is None and missing["answer_correct"] is None and "no reference answer" in missing["reason"]

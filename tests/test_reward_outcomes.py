"""A sample whose reward cannot be measured has a per-sample outcome in the RL reward paths, never a failed
batch: verl's compute_score (an unmeasured sample, a sample whose extra_info has no 'question' as verl's MATH
preprocessing leaves it) and OpenRLHF's /get_reward over real HTTP (a missing label, an empty response) score
such a sample `unmeasured_score` (0.0 by default), log its reason and count it, while the others in the batch get
their rewards. Stopping on such a sample is what the user asks for explicitly (verl: unmeasured_score=null)."""

from __future__ import annotations

import logging
import math

import httpx
import pytest

from labeler.rewards import verl_score
from tests.public_prms import build_qwen_prm
from tests.test_rewards import TWO_STEPS
from tests.test_reward_server import CHAT_PROMPT, RESPONSE, ServedHere

QUESTION = "What is 2 + 3?"
VERL_MATH_INFO = {"split": "train", "index": 7}  # verl's MATH preprocessing: no 'question'


@pytest.fixture(scope="module")
def qwen_prm(tmp_path_factory):
    folder, _, _ = build_qwen_prm(tmp_path_factory.mktemp("outcome-prm") / "qwen-prm")
    return f"qwen-prm:{folder}"


def test_verl_one_unmeasured_sample_scores_the_default_and_the_batch_goes_on(qwen_prm, caplog):
    info = {"question": QUESTION}
    before, _ = verl_score.unmeasured_counts()
    with caplog.at_level(logging.WARNING, logger="labeler.rewards.verl_score"):
        scores = verl_score.compute_score(
            data_sources=["a"] * 4, solution_strs=[TWO_STEPS, "", TWO_STEPS, TWO_STEPS], ground_truths=["5", "5", float("nan"), "5"],
            extra_infos=[info, info, info, VERL_MATH_INFO], prm=qwen_prm, device="cpu", answer_weight=1.0,
        )  # fmt: skip
    assert scores[0]["prm_unmeasured"] == 0.0 and scores[0]["score"] == pytest.approx(1.0 + scores[0]["prm_process"])
    for unmeasured in scores[1:]:
        assert unmeasured["score"] == verl_score.UNMEASURED_SCORE == 0.0 and unmeasured["prm_unmeasured"] == 1.0
        assert math.isnan(unmeasured["prm_answer_correct"])
    assert set(scores[3]) == set(scores[0])  # the same metric keys for every sample
    logged = [record.getMessage() for record in caplog.records]
    for sample, reason in ((1, "empty completion"), (2, "no reference answer"), (3, "extra_info has no 'question'")):
        assert any(message.startswith(f"sample {sample}: no reward ({reason}") and "scored unmeasured_score=0.0" in message for message in logged), logged
    after, by_reason = verl_score.unmeasured_counts()
    assert after - before == 4
    assert {"empty completion", "no reference answer", "extra_info has no 'question'"} <= set(by_reason)


def test_verl_a_single_sample_without_a_question_gets_the_chosen_score(qwen_prm):
    one = verl_score.compute_score("a", TWO_STEPS, "5", VERL_MATH_INFO, prm=qwen_prm, device="cpu", unmeasured_score=-1.0)
    assert one["score"] == -1.0 and one["prm_unmeasured"] == 1.0 and math.isnan(one["prm_process"])
    none = verl_score.compute_score("a", TWO_STEPS, "5", None, prm=qwen_prm, device="cpu")
    assert none["score"] == 0.0 and none["prm_unmeasured"] == 1.0


def test_verl_stops_on_an_unmeasured_sample_only_when_asked_to(qwen_prm):
    with pytest.raises(ValueError, match="sample 0: no reward \\(extra_info has no 'question'.*unmeasured_score=null"):
        verl_score.compute_score("a", TWO_STEPS, "5", VERL_MATH_INFO, prm=qwen_prm, device="cpu", unmeasured_score=None)
    with pytest.raises(ValueError, match="sample 0: no reward \\(empty completion"):
        verl_score.compute_score("a", "", "5", {"question": QUESTION}, prm=qwen_prm, device="cpu", unmeasured_score=None)


def test_openrlhf_a_missing_label_scores_the_default_and_the_others_get_their_rewards_over_http(qwen_prm, capfd):
    body = {
        "query": [CHAT_PROMPT + RESPONSE, CHAT_PROMPT + RESPONSE, CHAT_PROMPT, CHAT_PROMPT + RESPONSE],
        "prompts": [CHAT_PROMPT] * 4,
        "labels": ["5", None, "5", "nan"],
    }
    with ServedHere("--prm", qwen_prm, "--answer-weight", "1.0", "--prm-backend", "torch") as served:
        answer = httpx.post(f"{served.url}/get_reward", json=body, timeout=60)
        health = httpx.get(f"{served.url}/health", timeout=60).json()
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert data["extra_logs"]["prm_unmeasured"] == [0.0, 1.0, 1.0, 1.0]
    assert data["rewards"][0] == pytest.approx(1.0 + data["extra_logs"]["prm_process"][0]) and data["rewards"][1:] == [0.0, 0.0, 0.0]
    assert data["scores"] == [value / 2 for value in data["rewards"]]
    assert health["unmeasured"] == 3 and health["unmeasured_by_reason"] == {"no reference answer": 2, "empty completion": 1}
    logged = capfd.readouterr().err.splitlines()  # the server's log: stderr
    for sample, reason in ((1, "no reference answer (null"), (2, "empty completion"), (3, "no reference answer (the text 'nan'")):
        assert any(f"sample {sample} of 4: no reward ({reason}" in line and "scored 0.0" in line for line in logged), logged


def test_openrlhf_the_unmeasured_score_is_the_one_chosen(qwen_prm):
    body = {"query": [CHAT_PROMPT + RESPONSE], "prompts": [CHAT_PROMPT], "labels": [None]}
    with ServedHere("--prm", qwen_prm, "--answer-weight", "1.0", "--unmeasured-score", "-0.5", "--prm-backend", "torch") as served:
        data = httpx.post(f"{served.url}/get_reward", json=body, timeout=60).json()
    assert data["rewards"] == [-0.5] and data["extra_logs"]["prm_unmeasured"] == [1.0]


def test_verl_a_dataset_without_questions_is_a_setup_error_not_a_constant_reward(qwen_prm, monkeypatch):
    """The first SETUP_WINDOW samples a worker scores all unmeasured for one reason: the dataset or the setup,
    not an occasional gap; training on a constant unmeasured_score would say nothing (the outside read's finding)."""
    from labeler.rewards.setup_check import SETUP_WINDOW, FirstSamples

    monkeypatch.setattr(verl_score, "_first_samples", FirstSamples())  # a fresh worker
    n = SETUP_WINDOW // 2
    kwargs = dict(data_sources=["a"] * n, solution_strs=[TWO_STEPS] * n, ground_truths=["5"] * n, prm=qwen_prm, device="cpu")
    first = verl_score.compute_score(extra_infos=[VERL_MATH_INFO] * n, **kwargs)  # half the window: still per-sample outcomes
    assert [score["prm_unmeasured"] for score in first] == [1.0] * n
    with pytest.raises(ValueError, match=f"the first {SETUP_WINDOW} samples this worker scored all had no reward.*extra_info has no 'question'"):
        verl_score.compute_score(extra_infos=[VERL_MATH_INFO] * n, **kwargs)
    # a worker that measured one sample among its first ones keeps per-sample outcomes for any gap after
    monkeypatch.setattr(verl_score, "_first_samples", FirstSamples())
    infos = [{"question": QUESTION}] + [VERL_MATH_INFO] * (SETUP_WINDOW * 2 - 1)
    scores = verl_score.compute_score(**(kwargs | dict(data_sources=["a"] * len(infos), solution_strs=[TWO_STEPS] * len(infos),
                                                       ground_truths=["5"] * len(infos))), extra_infos=infos)  # fmt: skip
    assert scores[0]["prm_unmeasured"] == 0.0 and all(score["prm_unmeasured"] == 1.0 for score in scores[1:])


def test_openrlhf_requests_whose_first_samples_all_lack_labels_are_refused_with_the_cause(qwen_prm):
    from labeler.rewards.setup_check import SETUP_WINDOW

    body = {"query": [CHAT_PROMPT + RESPONSE] * SETUP_WINDOW, "prompts": [CHAT_PROMPT] * SETUP_WINDOW, "labels": [None] * SETUP_WINDOW}
    with ServedHere("--prm", qwen_prm, "--answer-weight", "1.0", "--prm-backend", "torch") as served:
        answer = httpx.post(f"{served.url}/get_reward", json=body, timeout=60)
    assert answer.status_code == 400, answer.text
    assert f"the first {SETUP_WINDOW} samples this server scored all had no reward" in answer.text and "no reference answer" in answer.text


# --- one reason, one kind, whatever its counts (final outside read, finding 2) ---
# "{count} of {n} steps unscored: past the PRM's length limit" was counted by its words before the first ':', so
# each count was a kind of its own: the setup check never caught a PRM length limit below every response, and the
# counts by reason (verl's unmeasured_counts(), /health) were scattered over many keys.

LENGTH_KIND = "steps unscored: past the PRM's length limit"


def long_completions(n: int) -> list[str]:
    """`n` completions past a 128-token length limit with different step counts: 1, 2, ... short steps (the first
    ones scored), then one step too long for the limit (unscored, with every step after the limit)."""
    long_step = "Finally, " + "we add the numbers and check them again " * 12 + "to get 5."
    return ["\n\n".join([f"Step {j}: {j} + {j} = {2 * j}." for j in range(k + 1)] + [long_step]) for k in range(n)]


def test_a_length_limit_below_every_response_is_one_kind_and_a_setup_error_in_verl(qwen_prm, monkeypatch):
    from labeler.rewards.setup_check import SETUP_WINDOW, FirstSamples

    monkeypatch.setattr(verl_score, "_first_samples", FirstSamples())  # a fresh worker
    kwargs = dict(prm=qwen_prm, device="cpu", max_length=128)
    few = long_completions(4)
    _, before = verl_score.unmeasured_counts()
    scores = verl_score.compute_score(data_sources=["a"] * 4, solution_strs=few, ground_truths=["5"] * 4, extra_infos=[{"question": QUESTION}] * 4, **kwargs)
    assert [score["prm_unmeasured"] for score in scores] == [1.0] * 4
    _, after = verl_score.unmeasured_counts()
    grown = {kind: n - before.get(kind, 0) for kind, n in after.items() if n != before.get(kind, 0)}
    assert grown == {LENGTH_KIND: 4}, grown  # one key, not one per step count
    many = long_completions(SETUP_WINDOW)
    with pytest.raises(ValueError, match=f"the first {SETUP_WINDOW} samples this worker scored all had no reward.*past the PRM's length limit"):
        verl_score.compute_score(data_sources=["a"] * len(many), solution_strs=many, ground_truths=["5"] * len(many),
                                 extra_infos=[{"question": QUESTION}] * len(many), **kwargs)  # fmt: skip


def test_the_reward_names_the_kind_of_its_reason_without_its_counts(qwen_prm):
    from labeler.rewards.config import RewardConfig
    from labeler.rewards.process_reward import ProcessReward

    completions = long_completions(3) + ["", TWO_STEPS, TWO_STEPS]
    with ProcessReward(RewardConfig(prm=qwen_prm, device="cpu", answer_weight=1.0, max_length=128)) as reward:
        results = reward.rewards([QUESTION] * 6, completions, ["5", "5", "5", "5", None, "nan"])
    kinds = [r.reason_kind for r in results]
    assert kinds == [LENGTH_KIND] * 3 + ["empty completion", "no reference answer", "no reference answer"], kinds
    assert len({r.reason for r in results[:3]}) > 1  # the reasons keep their counts: "1 of 2 steps unscored: ..."
    assert all(r.reason.endswith("past the PRM's length limit") for r in results[:3])


def test_openrlhf_length_limit_gaps_are_one_key_in_health_and_a_refused_setup(qwen_prm):
    from labeler.rewards.setup_check import SETUP_WINDOW

    few = long_completions(3)
    body = {"query": [CHAT_PROMPT + c for c in few + [RESPONSE]], "prompts": [CHAT_PROMPT] * 4, "labels": ["5"] * 4}
    with ServedHere("--prm", qwen_prm, "--max-length", "128", "--prm-backend", "torch") as served:
        per_step = httpx.post(f"{served.url}/rewards", json={"problems": [QUESTION], "completions": few[:1]}, timeout=60).json()
        assert per_step["rewards"][0]["reason_kind"] == LENGTH_KIND
        many = long_completions(SETUP_WINDOW)
        broken = {"query": [CHAT_PROMPT + c for c in many], "prompts": [CHAT_PROMPT] * len(many), "labels": ["5"] * len(many)}
        refused = httpx.post(f"{served.url}/get_reward", json=broken, timeout=120)
        assert refused.status_code == 400 and "past the PRM's length limit" in refused.text, refused.text
        # a request with a measured sample ends the refusals: the setup is taken as working from then on
        answer = httpx.post(f"{served.url}/get_reward", json=body, timeout=60)
        assert answer.status_code == 200, answer.text
        assert answer.json()["extra_logs"]["prm_unmeasured"] == [1.0, 1.0, 1.0, 0.0]
        again = httpx.post(f"{served.url}/get_reward", json=broken, timeout=120)
        assert again.status_code == 200 and again.json()["extra_logs"]["prm_unmeasured"] == [1.0] * SETUP_WINDOW
        health = httpx.get(f"{served.url}/health", timeout=60).json()
    assert health["unmeasured_by_reason"] == {LENGTH_KIND: 3 + SETUP_WINDOW}, health

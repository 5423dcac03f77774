"""The PRM as an RL reward (labeler/rewards/): the reward math on a stand-in scorer (logic only), then a
tiny random Qwen PRM scored for real, TRL's GRPOTrainer training two steps with it, and verl's compute_score."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labeler.rewards import ProcessReward, RewardConfig
from labeler.rewards.trl_grpo import PRMRewardFunction, completion_text, problem_text
from tests.public_prms import build_qwen_prm


class FixedScorer:
    """A stand-in scorer for the reward math: step i of every completion scores scores[i]; None past `fits` steps."""

    name = "fixed"

    def __init__(self, scores, fits=None):
        self.scores, self.fits = scores, fits
        self.seen = []

    def step_scores(self, solutions):
        self.seen.extend(solutions)
        out = []
        for s in solutions:
            kept = len(s.steps) if self.fits is None else min(self.fits, len(s.steps))
            out.append([self.scores[i % len(self.scores)] for i in range(kept)])
        return out


def reward_with(scores, fits=None, **settings):
    return ProcessReward(RewardConfig(prm="unused", **settings), scorer=FixedScorer(scores, fits))


TWO_STEPS = "2 + 3 = 5.\n\nThe answer is $\\boxed{5}$."


def test_the_process_reward_aggregates_the_step_scores_min_by_default():
    results = reward_with([0.9, 0.4]).rewards(["What is 2 + 3?"], [TWO_STEPS])
    assert results[0].value == 0.4 and results[0].step_scores == [0.9, 0.4] and results[0].reason is None
    assert reward_with([0.9, 0.4], aggregate="last").rewards(["q"], [TWO_STEPS])[0].value == 0.4
    assert reward_with([0.5, 0.4], aggregate="product").rewards(["q"], [TWO_STEPS])[0].value == pytest.approx(0.2)


@given(st.lists(st.floats(0, 1), min_size=1, max_size=6), st.sampled_from(["min", "product", "last", "mean"]))
def test_a_reward_is_the_aggregate_of_every_step_and_none_when_a_step_is_cut(scores, how):
    text = "\n\n".join(f"Step {i}: x = {i}." for i in range(len(scores)))
    whole = reward_with(scores, aggregate=how).rewards(["q"], [text])[0]
    expected = {"min": min, "last": lambda s: s[-1], "product": math.prod, "mean": lambda s: sum(s) / len(s)}[how](scores)
    assert whole.value == pytest.approx(expected)
    cut = reward_with(scores, fits=len(scores) - 1, aggregate=how).rewards(["q"], [text])[0]
    assert cut.value is None and cut.process is None and "past the PRM's length limit" in cut.reason
    assert cut.step_scores[-1] is None


def test_an_empty_completion_has_no_reward_and_is_not_sent_to_the_prm():
    reward = reward_with([0.7])
    results = reward.rewards(["q", "q"], ["  \n ", TWO_STEPS])
    assert results[0].value is None and results[0].reason == "empty completion: no step to score"
    assert results[1].value == 0.7
    assert len(reward.scorer.seen) == 1


def test_the_verifiable_reward_adds_the_answer_check_and_unknown_answers_are_not_zero():
    with reward_with([0.5], answer_weight=1.0) as reward:
        right, wrong, none, unreadable = reward.rewards(
            ["What is 2 + 3?"] * 4,
            [TWO_STEPS, "2 + 3 = 6.\n\nThe answer is $\\boxed{6}$.", "I give up.", "The answer is $\\boxed{\\frac{1}{}}$."],
            ["5", "5", "5", "\\frac{1}{2}"],
        )
    assert (right.value, right.answer_correct) == (1.5, True)
    assert (wrong.value, wrong.answer_correct) == (0.5, False)
    assert (none.value, none.answer_correct) == (0.5, False)  # no final answer: a wrong one
    # the checker could not compare (`labeler check` says unparseable): not a wrong answer, no reward
    assert (unreadable.value, unreadable.answer_correct, unreadable.process) == (None, None, 0.5)
    assert unreadable.reason == "answer check unparseable: the final answer could not be compared with the reference"


def test_bad_batches_are_refused_naming_the_item():
    reward = reward_with([0.5])
    with pytest.raises(ValueError, match="2 problems but 1 completions"):
        reward.rewards(["q", "q"], [TWO_STEPS])
    with pytest.raises(ValueError, match="completion 1: a string, not NoneType"):
        reward.rewards(["q", "q"], [TWO_STEPS, None])
    with pytest.raises(ValueError, match="reference 0: a reference answer is text or a number, not list"):
        reward_with([0.5], answer_weight=1.0).rewards(["q"], [TWO_STEPS], [["5"]])
    with pytest.raises(ValueError, match="answer_weight > 0 needs a reference answer per completion"):
        reward_with([0.5], answer_weight=1.0).rewards(["q"], [TWO_STEPS])
    with pytest.raises(ValueError, match="--aggregate must be one of"):
        RewardConfig(prm="x", aggregate="max")


def test_conversational_prompts_and_completions_are_read_as_trl_sends_them():
    assert problem_text([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 3?"}]) == "What is 2 + 3?"
    assert completion_text([{"role": "assistant", "content": TWO_STEPS}]) == TWO_STEPS
    with pytest.raises(ValueError, match="no user message"):
        problem_text([{"role": "system", "content": "x"}])


def test_the_trl_reward_function_returns_none_for_unmeasured_and_logs_why():
    logged = {}
    function = PRMRewardFunction(RewardConfig(prm="unused"), scorer=FixedScorer([0.8], fits=1))
    values = function(
        prompts=["q", "q"], completions=["one step only", TWO_STEPS], completion_ids=[[1], [2]], trainer_state=None,
        log_metric=lambda name, value: logged.setdefault(name, value), log_extra=lambda name, values: logged.setdefault(name, values),
    )  # fmt: skip
    assert values == [0.8, None]
    assert logged["prm/unmeasured"] == 0.5 and logged["prm_reason"][0] == "" and "unscored" in logged["prm_reason"][1]
    answer_weighted = PRMRewardFunction(RewardConfig(prm="unused", answer_weight=1.0), scorer=FixedScorer([0.8]))
    # a dataset's answer column often holds numbers: read as text
    assert answer_weighted(prompts=["What is 2 + 3?"] * 2, completions=[TWO_STEPS] * 2, solution=[5, 6.0]) == [1.8, 0.8]
    with pytest.raises(ValueError, match="no column 'solution'"):
        answer_weighted(prompts=["q"], completions=[TWO_STEPS])


# -- a real PRM: a tiny random Qwen2.5-Math-PRM --------------------------------------------------------


@pytest.fixture(scope="module")
def qwen_prm(tmp_path_factory):
    folder, _, _ = build_qwen_prm(tmp_path_factory.mktemp("reward-prm") / "qwen-prm")
    return f"qwen-prm:{folder}"


def test_the_reward_of_a_real_prm_is_the_aggregate_of_its_own_step_scores(qwen_prm):
    from labeler.evaluation.solutions import SolutionToScore
    from labeler.prm.devices import place
    from labeler.prm.scorers import load_scorer

    reward = ProcessReward(RewardConfig(prm=qwen_prm, device="cpu"))
    texts = [TWO_STEPS, "Step 1: 4 + 3 = 8.\nStep 2: So the answer is 8."]
    results = reward.rewards(["What is 2 + 3?", "Tom has 4 apples and gets 3 more. How many?"], texts)
    direct = load_scorer(qwen_prm, placement=place("cpu", "fp32")).step_scores(
        [SolutionToScore("a", "a", "What is 2 + 3?", ("2 + 3 = 5.", "The answer is $\\boxed{5}$.")),
         SolutionToScore("b", "b", "Tom has 4 apples and gets 3 more. How many?", ("Step 1: 4 + 3 = 8.", "Step 2: So the answer is 8."))]
    )  # fmt: skip
    for result, scores in zip(results, direct):
        assert result.step_scores == pytest.approx(scores, abs=1e-6)
        assert result.value == pytest.approx(min(scores), abs=1e-6)


def test_trl_grpo_trainer_trains_two_steps_with_the_prm_reward(qwen_prm, tiny_model_dir, tmp_path):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    reward = PRMRewardFunction(RewardConfig(prm=qwen_prm, device="cpu", answer_weight=1.0))
    calls = []

    def recording(*args, **kwargs):
        values = reward(*args, **kwargs)
        calls.append(values)
        return values

    recording.__name__ = "prm_reward"
    dataset = Dataset.from_dict({"prompt": ["What is 2 + 3?", "What is 4 + 4?"], "solution": ["5", "8"]})
    args = GRPOConfig(
        output_dir=str(tmp_path / "grpo"), max_steps=2, per_device_train_batch_size=2, num_generations=2, max_completion_length=8,
        use_cpu=True, bf16=False, gradient_checkpointing=False, report_to="none", logging_steps=1, save_strategy="no",
    )  # fmt: skip
    trainer = GRPOTrainer(model=str(tiny_model_dir), reward_funcs=recording, args=args, train_dataset=dataset)
    trainer.train()
    assert trainer.state.global_step == 2
    assert len(calls) >= 2 and all(len(values) == 2 for values in calls)
    logged = [entry for entry in trainer.state.log_history if "rewards/prm_reward/mean" in entry]
    assert len(logged) == 2
    measured = [v for values in calls for v in values if v is not None]
    assert all(0.0 <= v <= 2.0 for v in measured)  # a probability, plus 1 for a right answer


def test_verl_compute_score_in_both_call_forms_and_unmeasured_samples_take_the_chosen_score_or_stop_when_asked(qwen_prm):
    from labeler.rewards.verl_score import compute_score

    info = {"question": "What is 2 + 3?"}
    one = compute_score("openai/gsm8k", TWO_STEPS, "5", info, prm=qwen_prm, device="cpu", answer_weight=1.0)
    assert one["prm_answer_correct"] == 1.0 and one["score"] == pytest.approx(1.0 + one["prm_process"])
    batch = compute_score(
        data_sources=["a", "b"], solution_strs=[TWO_STEPS, "The answer is 6."], ground_truths=["5", "5"], extra_infos=[info, info],
        prm=qwen_prm, device="cpu", answer_weight=1.0,
    )  # fmt: skip
    assert batch[0] == one and batch[1]["prm_answer_correct"] == 0.0
    with pytest.raises(ValueError, match="sample 0: no reward \\(empty completion"):  # stopping, asked for
        compute_score("a", "", "5", info, prm=qwen_prm, device="cpu", unmeasured_score=None)
    chosen = compute_score("a", "", "5", info, prm=qwen_prm, device="cpu", unmeasured_score=0.5)
    assert chosen["score"] == 0.5 and chosen["prm_unmeasured"] == 1.0 and math.isnan(chosen["prm_process"])
    default = compute_score("a", TWO_STEPS, "5", {}, prm=qwen_prm, device="cpu")  # no 'question': that sample's outcome
    assert default["score"] == 0.0 and default["prm_unmeasured"] == 1.0

"""A reasoning trace end to end on the real engine (vLLM CPU build, the tiny random model): the
trace preset reads `<think>...</think>response`, the completer continues inside the thinking, the
labels say which steps are thinking, carry the trajectory label, and the prefixes deep in a trace
that outgrow the context get a shrunk budget (recorded) and then no label, with the reason."""

import json

import pyarrow.parquet as pq
import pytest

from labeler.checking.checker import AnswerChecker
from labeler.labeling.config import LabelConfig
from labeler.labeling.generation import GenerationRequest
from labeler.labeling.job import run_job
from labeler.labeling.prompts import assistant_prefix
from schemas import validate_labels
from tests.conftest import write_jsonl
from workers.local_executor import LocalExecutor

pytestmark = pytest.mark.engine

PARAGRAPHS = 100  # about 1,800 tokens of thinking for the tiny tokenizer: beyond its 1,024-token context


def thinking(count: int) -> str:
    return "\n\n".join(f"Thought {i}: add two and two again." for i in range(count))


@pytest.fixture(scope="module")
def labelled(tiny_engine, tmp_path_factory):
    root = tmp_path_factory.mktemp("trace-job")
    rows = [
        {"id": "short", "problem": "What is 2 + 2?", "answer": "4", "response": f"<think>\n{thinking(6)}\n</think>\n\nSo it is \\boxed{{4}}."},
        {"id": "wrong", "problem": "What is 2 + 3?", "answer": "5", "response": f"<think>\n{thinking(4)}\n</think>\n\nSo it is \\boxed{{4}}."},
        {"id": "deep", "problem": "What is 2 + 2?", "answer": "4", "response": f"<think>\n{thinking(PARAGRAPHS)}\n</think>\n\nSo it is \\boxed{{4}}."},
        {"id": "cut", "question": "What is 2 + 2?", "answer": "4", "reasoning_content": thinking(5), "content": ""},
    ]
    dataset = write_jsonl(root / "traces.jsonl", rows)
    outputs = {}
    with AnswerChecker(timeout_s=5) as checker:
        for strategy in ("exhaustive", "first-error", "posterior"):
            config = LabelConfig(
                input=str(dataset), output=str(root / strategy), model="tiny-llama", rollouts=2, max_new_tokens=48,
                min_rollout_tokens=8, max_steps=PARAGRAPHS, max_row_chars=10**6, shard_size=4, strategy=strategy,
            )  # fmt: skip
            summary = run_job(config, executor=LocalExecutor(lambda: tiny_engine, checker), model_info={"name": "tiny"}, progress_enabled=False)
            assert summary.solutions == 4 and summary.rejected_rows == 0
            labels = pq.read_table(root / strategy / "labels")
            validate_labels(labels)
            outputs[strategy] = (
                {row["problem_id"]: row for row in labels.to_pylist()},
                pq.read_table(root / strategy / "rollouts").to_pylist(),
            )
            outputs[f"{strategy} totals"] = json.loads((root / strategy / "manifest.json").read_text())["totals"]
    return outputs


def test_the_trace_preset_reads_thinking_and_response_and_labels_say_which_is_which(labelled):
    labels, _ = labelled["exhaustive"]
    assert {row["source"] for row in labels.values()} == {"trace"}
    short = labels["short"]
    assert short["thinking_steps"] == 6 and len(short["steps"]) == 7 and short["steps"][-1] == "So it is \\boxed{4}."
    assert short["label_method"][-1] == "final_answer" and short["trajectory_verdict"] == "correct" and short["trajectory_label"] is True
    assert (labels["wrong"]["trajectory_verdict"], labels["wrong"]["trajectory_label"]) == ("incorrect", False)
    cut = labels["cut"]  # thinking with no response: unfinished, its last step rolled out
    assert (cut["thinking_steps"], len(cut["steps"]), cut["trajectory_verdict"]) == (5, 5, "unfinished")
    assert cut["label_method"][-1] != "final_answer"


def test_deep_prefixes_shrink_their_budget_then_go_unlabelled_with_the_reason(labelled, tiny_engine):
    labels, rollouts = labelled["exhaustive"]
    deep = labels["deep"]
    assert deep["thinking_steps"] == PARAGRAPHS
    budgets = [r["token_budget"] for r in rollouts if r["solution_id"] == deep["solution_id"] and r["token_budget"] is not None]
    assert max(budgets) == 48 and any(8 <= budget < 48 for budget in budgets)  # near the context limit the budget shrinks
    # from some depth on, every thinking prefix leaves too little of the context to sample (the prefixes just
    # before may be sampled with a shrunk budget that cuts every rollout: unlabelled too, with that reason)
    beyond = [i for i, method in enumerate(deep["label_method"]) if method == "unlabelled" and "the model's context is 1024" in deep["unlabelled_reason"][i]]
    assert beyond and beyond == list(range(beyond[0], PARAGRAPHS))
    cut = [i for i in range(beyond[0]) if deep["label_method"][i] == "unlabelled"]
    reasons = [deep["unlabelled_reason"][i] for i in cut]
    assert all("rollouts were cut by" in reason or "inside the thinking" in reason for reason in reasons)
    first_fit = beyond[0] - 1  # the deepest prefix that was sampled left at least --min-rollout-tokens of room
    prompt = tiny_engine.render(GenerationRequest("x", assistant_prefix(deep["steps"][: first_fit + 1], PARAGRAPHS), 1, 0))
    assert "<think>\n" in prompt and prompt.endswith("again.\n\n")
    assert deep["label_method"][-1] == "final_answer"  # the response is still checked


def test_rollouts_that_end_inside_the_thinking_are_truncated_never_checked(labelled):
    """The random tiny model never closes a thinking: every rollout from inside one ended before any response."""
    labels, rollouts = labelled["exhaustive"]
    for row in labels.values():
        thinking = [r for r in rollouts if r["solution_id"] == row["solution_id"] and r["step_index"] < row["thinking_steps"]]
        assert thinking and all("</think>" not in r["text"] for r in thinking)
        assert all(r["verdict"] == "truncated" and r["extracted_answer"] is None for r in thinking)
        assert all(row["hard_labels"][i] is None for i in range(row["thinking_steps"]) if row["label_method"][i] != "inferred")
        assert all(row["n_rollouts"][i] == 0 for i in range(row["thinking_steps"]))


def test_first_error_on_the_same_traces_measures_what_exhaustive_measures_for_no_more_tokens(labelled):
    exhaustive, _ = labelled["exhaustive"]
    search, _ = labelled["first-error"]
    for problem_id, row in search.items():
        assert row["thinking_steps"] == exhaustive[problem_id]["thinking_steps"]
        assert row["trajectory_verdict"] == exhaustive[problem_id]["trajectory_verdict"]
        for i, method in enumerate(row["label_method"]):  # a probe draws exhaustive's very rollouts of that prefix
            if method in ("rollouts", "final_answer"):
                assert (row["n_correct"][i], row["hard_labels"][i]) == (exhaustive[problem_id]["n_correct"][i], exhaustive[problem_id]["hard_labels"][i])
    # the tiny model never closes a thinking, so no rollout from inside one gives a verdict: the search steps over
    # every prefix and draws what exhaustive draws, never more (tests/test_long_traces.py: the saving where rollouts answer)
    assert search["deep"]["generated_tokens"] <= exhaustive["deep"]["generated_tokens"]


def test_posterior_draws_exhaustives_completions_on_the_real_engine_and_labels_honestly(labelled):
    """The posterior search's probes ask vLLM for rollouts in rounds, from the seeds exhaustive uses: each of its
    rollouts is exhaustive's rollout of that prefix and number, word for word; prefixes stopped before N say so."""
    _, exhaustive = labelled["exhaustive"]
    labels, posterior = labelled["posterior"]
    drawn = {(r["solution_id"], r["step_index"], r["rollout_index"]): r["text"] for r in exhaustive}
    assert posterior and all(drawn[(r["solution_id"], r["step_index"], r["rollout_index"])] == r["text"] for r in posterior)
    for row in labels.values():
        for method, soft in zip(row["label_method"], row["soft_labels"]):
            assert method in ("rollouts", "early_stop", "inferred", "unlabelled", "final_answer")
            assert soft is None or method in ("rollouts", "final_answer")


def test_the_job_reports_how_much_of_its_prompts_vllms_prefix_cache_held(labelled):
    """vLLM's own counters of prompt tokens looked up in its prefix cache and found there, summed over the rollout
    rounds: each prompt is the problem and a prefix of steps, the next prefix repeats the last one's tokens, and the n
    samples of one request share their prompt, so most are found."""
    for strategy in ("exhaustive", "first-error", "posterior"):
        totals = labelled[f"{strategy} totals"]
        assert 0.3 < totals["prefix_cache_hit_rate"] < 1, (strategy, totals)

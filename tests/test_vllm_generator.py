"""Integration: the real vLLM engine (CPU build) on a tiny random Llama, one engine per session."""

import pyarrow.parquet as pq
import pytest

from labeler.checking.checker import AnswerChecker
from labeler.labeling.config import LabelConfig
from labeler.labeling.generation import GenerationRequest, SamplingSettings
from labeler.labeling.job import run_job
from workers.local_executor import LocalExecutor
from tests.conftest import write_jsonl

pytestmark = pytest.mark.engine

SAMPLING = SamplingSettings(temperature=1.0, top_p=1.0, max_new_tokens=24)


def request(prefix: str, seed: int, n: int = 3) -> GenerationRequest:
    return GenerationRequest(user_message="What is 3 + 4?", assistant_prefix=prefix, n=n, seed=seed)


def texts(results) -> list[tuple[str, ...]]:
    return [tuple(c.text for c in r.completions) for r in results]


def test_generates_n_completions_with_token_counts(tiny_engine):
    results = tiny_engine.generate([request("Step 1: 3 plus 4.\n\n", seed=1, n=4)], SAMPLING)
    assert len(results) == 1 and results[0].error is None
    completions = results[0].completions
    assert len(completions) == 4
    assert all(1 <= c.tokens <= 24 for c in completions)
    assert {c.finish_reason for c in completions} <= {"stop", "length"}


def test_prompt_continues_the_assistant_turn(tiny_engine):
    prompt = tiny_engine.render(request("Step 1: 3 plus 4.\n\n", seed=1))
    assert prompt.endswith("<|im_start|>assistant\nStep 1: 3 plus 4.\n\n")
    assert "What is 3 + 4?" in prompt


def test_seeded_requests_give_the_same_tokens_whatever_the_batch(tiny_engine):
    a, b, c = request("Step 1: a.\n\n", seed=11), request("Step 1: b.\n\n", seed=22), request("Step 1: c.\n\n", seed=33)
    alone = texts(tiny_engine.generate([b], SAMPLING))
    batched = texts(tiny_engine.generate([c, a, b], SAMPLING))
    reordered = texts(tiny_engine.generate([b, c, a], SAMPLING))
    assert batched[2] == alone[0] == reordered[0]
    assert batched[0] == reordered[1] and batched[1] == reordered[2]
    assert texts(tiny_engine.generate([request("Step 1: b.\n\n", seed=23)], SAMPLING)) != alone


def test_prompt_longer_than_the_context_is_an_error_result_not_a_crash(tiny_engine):
    too_long = request("word " * 5000, seed=1)
    results = tiny_engine.generate([too_long, request("Step 1: ok.\n\n", seed=2)], SAMPLING)
    assert results[0].error and "context" in results[0].error
    assert results[1].error is None and len(results[1].completions) == 3


def test_label_job_on_the_real_engine(tiny_engine, tmp_path):
    rows = [
        {"id": f"r{i}", "problem": f"What is {i} + {i}?", "answer": str(2 * i), "steps": [f"{i} + {i} = {2 * i}.", f"The answer is: {2 * i}"]}
        for i in range(1, 6)
    ]
    rows.append({"id": "huge", "problem": "Say a lot.", "answer": "1", "steps": ["blah " * 3000, "The answer is: 1"]})
    dataset = write_jsonl(tmp_path / "in.jsonl", rows)
    config = LabelConfig(input=str(dataset), output=str(tmp_path / "out"), model="tiny-llama", rollouts=3, max_new_tokens=16, shard_size=4)
    with AnswerChecker(timeout_s=5) as checker:
        summary = run_job(config, executor=LocalExecutor(lambda: tiny_engine, checker), model_info={"name": "tiny"}, progress_enabled=False)
    assert summary.solutions == 6 and summary.steps == 12 and summary.rejected_rows == 0
    labels = {r["problem_id"]: r for r in pq.read_table(tmp_path / "out" / "labels").to_pylist()}
    huge = labels.pop("huge")  # its first prefix does not fit the context: that step alone is unlabelled
    assert huge["label_method"] == ["unlabelled", "final_answer"] and "context" in huge["unlabelled_reason"][0]
    assert sorted(labels) == [f"r{i}" for i in range(1, 6)]
    rollouts = pq.read_table(tmp_path / "out" / "rollouts").to_pylist()
    for row in labels.values():
        assert row["n_rollouts"][0] + row["n_truncated"][0] == 3 and row["n_rollouts"][1] == 1
        assert row["n_correct"][1] == 1  # the stated final answer is right
        assert row["label_method"][1] == "final_answer"
        assert row["label_method"][0] == ("rollouts" if row["n_rollouts"][0] else "unlabelled")
    sampled = [r for r in rollouts if r["finish_reason"] != "final_answer_check"]
    assert len(sampled) == 15 and all(r["tokens"] >= 1 and r["token_budget"] == 16 for r in sampled)
    # a completion cut by its budget is "truncated", never a wrong answer
    assert all((r["verdict"] == "truncated") == (r["finish_reason"] == "length") for r in sampled)
    assert any(r["verdict"] == "truncated" for r in sampled)
    assert sum(r["generated_tokens"] for r in labels.values()) + huge["generated_tokens"] == sum(r["tokens"] for r in rollouts)


def test_rollout_r_of_a_request_is_the_request_with_seed_plus_r(tiny_engine):
    """The fact strategies rely on to draw exactly exhaustive's rollouts in smaller rounds."""
    whole = texts(tiny_engine.generate([request("Step 1: 3 plus 4.\n\n", seed=100, n=4)], SAMPLING))[0]
    tail = texts(tiny_engine.generate([request("Step 1: 3 plus 4.\n\n", seed=102, n=2)], SAMPLING))[0]
    single = texts(tiny_engine.generate([request("Step 1: 3 plus 4.\n\n", seed=101, n=1)], SAMPLING))[0]
    assert tail == whole[2:]
    assert single == whole[1:2]


@pytest.mark.parametrize("strategy", ["first-error", "adaptive"])
def test_round_based_strategies_on_the_real_engine(tiny_engine, tmp_path, strategy):
    rows = [{"id": f"r{i}", "problem": f"What is {i} + 1?", "answer": str(i + 1), "steps": [f"Take {i}.", "Add one.", "Still adding.", f"The answer is: {i}"]} for i in range(4)]
    dataset = write_jsonl(tmp_path / "in.jsonl", rows)
    config = LabelConfig(input=str(dataset), output=str(tmp_path / "out"), model="tiny", rollouts=4, max_new_tokens=12, shard_size=2, strategy=strategy)
    with AnswerChecker(timeout_s=5) as checker:
        summary = run_job(config, executor=LocalExecutor(lambda: tiny_engine, checker), model_info={"name": "tiny"}, progress_enabled=False)
    assert summary.solutions == 4
    labels = pq.read_table(tmp_path / "out" / "labels").to_pylist()
    assert all(row["strategy"] == strategy for row in labels)
    assert all(row["label_method"][-1] == "final_answer" and row["hard_labels"][-1] is False for row in labels)  # stated answers are wrong


def test_completions_end_with_the_line_that_states_the_answer(tiny_engine):
    """With an answer marker, a completion that writes it continues to the end of that line only.

    The random tiny model never writes "The answer is", so a frequent letter plays the marker."""
    plain = SamplingSettings(temperature=1.0, max_new_tokens=40)
    marked = SamplingSettings(temperature=1.0, max_new_tokens=40, answer_marker="e", answer_max_tokens=5)
    batch = [request(f"Step 1: {i} plus 4.\n\n", seed=7 * i, n=3) for i in range(4)]
    full = tiny_engine.generate(batch, plain)
    short = tiny_engine.generate(batch, marked)
    continued = 0
    for long_result, short_result in zip(full, short):
        for long, cut in zip(long_result.completions, short_result.completions):
            if "e" not in long.text:
                assert cut.text == long.text  # no marker: the same completion
                continue
            continued += 1
            k = long.text.index("e") + 1
            assert cut.text[:k] == long.text[:k]  # same rollout up to the marker
            assert "\n" not in cut.text[k:].rstrip("\n")  # then only the rest of that line
            assert cut.tokens <= len(tiny_engine.tokenizer(long.text[:k], add_special_tokens=False)["input_ids"]) + 5 + 1
    assert continued > 0



def thinking_batch() -> list[GenerationRequest]:
    return [
        GenerationRequest("What is 3 + 4?", f"<think>\nStep 1: {i} plus 4.\n\n", n=3, seed=7 * i, thinking=True) for i in range(4)
    ]


def test_the_answer_marker_does_not_end_a_rollout_that_is_still_thinking(tiny_engine):
    """From inside a trace's thinking, "The answer is 12? Wait, ..." is no answer yet: the marker ends a rollout
    only after its </think>. The random tiny model never closes a thinking; a frequent letter plays the marker."""
    plain = SamplingSettings(temperature=1.0, max_new_tokens=40)
    marked = SamplingSettings(temperature=1.0, max_new_tokens=40, answer_marker="e", answer_max_tokens=5)
    batch = thinking_batch()
    assert texts(tiny_engine.generate(batch, marked)) == texts(tiny_engine.generate(batch, plain))
    as_plain = [GenerationRequest(r.user_message, r.assistant_prefix, r.n, r.seed) for r in batch]  # the same prompts, no thinking
    assert texts(tiny_engine.generate(as_plain, marked)) != texts(tiny_engine.generate(as_plain, plain))  # there the marker ends them


def test_a_rollout_that_closes_its_thinking_ends_with_the_answer_line_of_its_response(tiny_engine, monkeypatch):
    """The random tiny model never writes </think> or the marker: frequent letters play them ("a" closes the
    thinking, "e" is the marker). A rollout is the plain one up to its close, then ends at the end of the line where
    its response first writes the marker."""
    import workers.vllm_generator as vllm_generator

    monkeypatch.setattr(vllm_generator, "THINK_CLOSE", "a")
    plain = SamplingSettings(temperature=1.0, max_new_tokens=40)
    marked = SamplingSettings(temperature=1.0, max_new_tokens=40, answer_marker="e", answer_max_tokens=5)
    batch = thinking_batch()
    closed = 0
    for long_result, short_result in zip(tiny_engine.generate(batch, plain), tiny_engine.generate(batch, marked)):
        for long, cut in zip(long_result.completions, short_result.completions):
            if "a" not in long.text:
                assert cut.text == long.text  # it never closed its thinking: the marker never ended it
                continue
            closed += 1
            k = long.text.index("a") + 1
            assert cut.text[:k] == long.text[:k]  # the same rollout up to where it closes its thinking
            response = cut.text[k:]
            if "e" in response:
                assert "\n" not in response[response.index("e") + 1 :].rstrip("\n")  # then only the rest of that line
            assert cut.tokens <= 40
    assert closed > 0

"""What makes `labeler train`'s defaults learn (issue 42): the step-surprise term, the chat rendering,
the heads' own learning rate and prior bias, --min-steps, and the first-error threshold chosen on
validation and used by `labeler eval`."""

from __future__ import annotations

import json
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from labeler.prm.config import TrainConfig
from labeler.prm.data import PRMExample
from labeler.prm.model import ProcessRewardModel, read_settings
from labeler.prm.rendering import render_solution
from labeler.prm.trainer import choose_threshold, epochs_to_train, train
from tests.synthetic_labels import arithmetic_rows, write_labels

PROBLEM, STEPS = "Tom has 3 apples and buys 4 more. How many now?", ["He buys 4 more: 3 + 4 = 7.", "The answer is: 7"]


def test_the_chat_rendering_shows_the_solution_as_the_completer_saw_it_and_spans_hold_each_step(tiny_model_dir):
    from transformers import AutoTokenizer

    from labeler.labeling.prompts import user_message

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    rendered = render_solution(tokenizer, PROBLEM, STEPS, 512, rendering="chat")
    head = tokenizer.apply_chat_template([{"role": "user", "content": user_message(PROBLEM)}], add_generation_prompt=True, tokenize=False)
    assert tokenizer.decode(rendered.input_ids).startswith(head)
    assert [tokenizer.decode(rendered.input_ids[a:b]) for a, b in rendered.step_spans] == STEPS
    assert all(b <= p for (a, b), p in zip(rendered.step_spans, rendered.score_positions))  # the separator follows the span
    plain = render_solution(tokenizer, PROBLEM, STEPS, 512)
    assert [tokenizer.decode(plain.input_ids[a:b]) for a, b in plain.step_spans] == STEPS


def test_a_step_surprise_logit_is_the_lowest_log_probability_of_the_steps_tokens(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    from labeler.prm.devices import place
    from labeler.prm.scoring import checkpoint_sequences, step_and_trajectory_logits

    prm = ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=512, target="soft", step_surprise=True)
    with torch.no_grad():
        prm.head.weight.zero_()
        prm.head.bias.fill_(0.25)
    prm.save(tmp_path / "prm")
    loaded = ProcessRewardModel.load(tmp_path / "prm")
    assert read_settings(tmp_path / "prm").format_version == 3 and loaded.settings.rendering == "chat"
    assert loaded.surprise_weight.item() == 1.0  # the head starts from the model's own surprise

    from labeler.evaluation.solutions import SolutionToScore

    solution = SolutionToScore("p", "s", PROBLEM, STEPS)
    sequences = checkpoint_sequences(loaded.tokenizer, 512, [solution], "chat", spans=True)
    logits, _ = step_and_trajectory_logits(loaded, sequences, 4, place("cpu", "fp32"))
    ids, _, _, spans = sequences[0]
    lm = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    with torch.no_grad():
        log_probs = torch.log_softmax(lm(torch.tensor([ids])).logits[0].float(), -1)
    by_hand = [0.25 + min(log_probs[t - 1, ids[t]].item() for t in range(a, b)) for a, b in spans]
    assert logits[0] == pytest.approx(by_hand, abs=1e-4)


def test_vllm_refuses_a_step_surprise_prm_in_one_line_the_user_can_act_on(tiny_model_dir, tmp_path):
    from labeler.prm.pooling import VLLMCannotServe, _checkpoint

    ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=64, target="soft", step_surprise=True).save(tmp_path / "prm")
    with pytest.raises(VLLMCannotServe, match="--no-step-surprise"):
        _checkpoint(str(tmp_path / "prm"), False)


def test_min_steps_raises_the_epochs_of_a_small_label_set():
    config = TrainConfig(labels="l", output="o", model="m", epochs=3, min_steps=300)
    assert epochs_to_train(config, steps_per_epoch=8) == 38  # 38 x 8 = 304 >= 300
    assert epochs_to_train(config, steps_per_epoch=200) == 3
    assert epochs_to_train(TrainConfig(labels="l", output="o", model="m", epochs=3, min_steps=0), 8) == 3


def test_the_heads_start_at_the_prior_log_odds(tiny_model_dir):
    prm = ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=64, target="soft")
    prm.start_at_prior(0.9, None)
    assert prm.head.bias.item() == pytest.approx(math.log(9), rel=1e-5)


def example(hard: list[bool], last: bool = True) -> PRMExample:
    n = len(hard)
    return PRMExample("p", "s", list(range(n)), list(range(n)), [float(h) for h in hard], list(hard), ends_at_last_step=last)


def test_the_threshold_is_the_one_that_maximises_first_error_f1_on_validation():
    # right steps score 0.3-0.4 (a PRM that is shy), the wrong ones 0.1: 0.5 would call every solution wrong
    examples = [example([True, True, False]), example([True, True, True]), example([True, False]), example([True, True])]
    scores = [[0.35, 0.3, 0.1], [0.4, 0.3, 0.35], [0.3, 0.1], [0.35, 0.4]]
    chosen = choose_threshold(scores, examples)
    assert 0.1 < chosen.threshold <= 0.3 and chosen.f1 == 1.0 and (chosen.erroneous, chosen.correct) == (2, 2)
    # nothing to choose on without both kinds of solution
    assert choose_threshold(scores[:1], examples[:1]).threshold is None


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.lists(st.booleans(), min_size=1, max_size=5), st.lists(st.floats(0, 1), min_size=5, max_size=5)), min_size=1, max_size=8))
def test_no_threshold_does_better_than_the_chosen_one(rows):
    from labeler.evaluation.metrics import first_error_metrics

    examples = [example(hard) for hard, _ in rows]
    scores = [probabilities[: len(hard)] for hard, probabilities in rows]
    chosen = choose_threshold(scores, examples)
    if chosen.threshold is None:
        return
    for t in [i / 20 for i in range(21)]:
        pairs = []
        for e, row in zip(examples, scores):
            wrong = next((k for k, h in enumerate(e.hard_labels) if not h), -1)
            pairs.append((wrong, next((k for k, p in enumerate(row) if p < t), -1)))
        assert first_error_metrics(pairs).f1 <= chosen.f1 + 1e-12


def test_a_trained_prm_stores_its_threshold_and_eval_uses_it(tiny_model_dir, tmp_path, capsys):
    from labeler.cli import main

    labels = write_labels(tmp_path / "labels", arithmetic_rows(problems=20, solutions_per_problem=3, seed=3))
    result = train(TrainConfig(labels=str(labels), output=str(tmp_path / "run"), model=str(tiny_model_dir), epochs=1, min_steps=4,
                               batch_size=8, validation_fraction=0.3, device="cpu"))  # fmt: skip
    assert result.global_step >= 4  # --min-steps: more epochs than --epochs
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    best = next(m for m in reversed(metrics) if m["best"])
    stored = read_settings(tmp_path / "run" / "best").threshold
    assert stored == best["val_threshold"] and stored is not None and 0 <= stored <= 1
    reference = tmp_path / "reference.jsonl"
    reference.write_text(json.dumps({"id": "r0", "problem": PROBLEM, "steps": STEPS, "label": -1}) + "\n")
    assert main(["eval", "--prm", str(tmp_path / "run"), "--reference", str(reference), "--device", "cpu", "--prm-backend", "torch", "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["threshold"] == stored
    assert main(["eval", "--prm", str(tmp_path / "run"), "--reference", str(reference), "--device", "cpu", "--prm-backend", "torch",
                 "--threshold", "0.5", "--json", "--quiet"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["threshold"] == 0.5


def test_the_logprob_baseline_scores_each_step_by_the_models_lowest_token_log_probability(tiny_model_dir, tmp_path, capsys):
    from labeler.cli import main
    from labeler.evaluation.solutions import SolutionToScore
    from labeler.prm.devices import place
    from labeler.prm.scorers import load_scorer

    scorer = load_scorer(f"logprob:{tiny_model_dir}", placement=place("cpu", "fp32"))
    (scores,) = scorer.step_scores([SolutionToScore("p", "s", PROBLEM, STEPS)])
    prm = scorer.prm
    sequences = __import__("labeler.prm.scoring", fromlist=["x"]).checkpoint_sequences(prm.tokenizer, 4096, [SolutionToScore("p", "s", PROBLEM, STEPS)], "chat", spans=True)
    ids, _, _, spans = sequences[0]
    from transformers import AutoModelForCausalLM

    lm = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    with torch.no_grad():
        log_probs = torch.log_softmax(lm(torch.tensor([ids])).logits[0].float(), -1)
    lowest = [min(log_probs[t - 1, ids[t]].item() for t in range(a, b)) for a, b in spans]
    assert scores == pytest.approx([math.exp(x) for x in lowest], abs=1e-5)  # the probability of the least likely token
    # on the default (vLLM) backend: one line says why it is scored with torch, and it is
    reference = tmp_path / "reference.jsonl"
    reference.write_text(json.dumps({"id": "r0", "problem": PROBLEM, "steps": STEPS, "label": -1}) + "\n")
    assert main(["eval", "--prm", f"logprob:{tiny_model_dir}", "--reference", str(reference), "--device", "cpu", "--json"]) == 0
    assert "token log-probabilities" in capsys.readouterr().err


# From the outside read of the change (each failed before its fix).


def test_best_follows_the_validation_loss_when_the_validation_has_no_wrong_step(tiny_model_dir, tmp_path, caplog):
    from tests.synthetic_labels import labels_row

    rows = [labels_row(f"p{i}", f"s{i}", f"What is {i} + 1?", [f"{i} + 1 = {i + 1}.", f"The answer is: {i + 1}"], [1.0, 1.0], [True, True])
            for i in range(12)]  # fmt: skip
    labels = write_labels(tmp_path / "labels", rows)
    result = train(TrainConfig(labels=str(labels), output=str(tmp_path / "run"), model=str(tiny_model_dir), epochs=3, min_steps=0,
                               batch_size=4, validation_fraction=0.25, device="cpu"))  # fmt: skip
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all(m["val_auc"] is None for m in metrics)
    losses = [m["val_loss"] for m in metrics]
    assert result.best_epoch == 1 + losses.index(min(losses))  # not stuck at epoch 1 with best_epoch None
    assert result.best_metric_name == "val_loss" and result.best_metric == min(losses)  # named as what it is
    assert "best/ follows the validation loss" in caplog.text


def test_the_starting_bias_offsets_the_surprise_so_the_prm_starts_at_the_prior(tiny_model_dir):
    from labeler.prm.data import build_examples
    from labeler.prm.devices import place
    from labeler.prm.scoring import step_and_trajectory_logits
    from labeler.prm.trainer import _priors, mean_surprise
    from labeler.store.reader import read_labelled_rows
    from tests.synthetic_labels import arithmetic_rows

    prm = ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=512, target="soft", step_surprise=True)
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        rows = read_labelled_rows(write_labels(__import__("pathlib").Path(folder) / "l", arithmetic_rows(problems=10, solutions_per_problem=2, seed=5)))
    examples, _ = build_examples(rows, prm.tokenizer, "soft", 512, rendering=prm.settings.rendering)
    prior, _ = _priors(examples)
    placement = place("cpu", "fp32")
    prm.start_at_prior(prior, None, step_offset=mean_surprise(prm, examples, 8, placement))
    logits, _ = step_and_trajectory_logits(prm, [(e.input_ids, e.score_positions, None, e.step_spans) for e in examples], 8, placement)
    flat = [x for row in logits for x in row]
    assert sum(flat) / len(flat) == pytest.approx(math.log(prior / (1 - prior)), abs=0.3)  # the head's own start (std 0.02) aside


def test_a_step_surprise_prm_refuses_a_backbone_whose_output_layer_is_not_in_the_checkpoint(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    from labeler.prm.model import PRMLoadError
    from tests.tiny_model import build_tiny_llama

    base = build_tiny_llama(tmp_path / "tied")
    untied = tmp_path / "untied"
    model = LlamaForCausalLM(LlamaConfig.from_pretrained(base, tie_word_embeddings=False))
    model.save_pretrained(untied)
    __import__("shutil").copytree(base, untied, dirs_exist_ok=True, ignore=lambda d, names: [n for n in names if not n.startswith("tok") and n != "special_tokens_map.json"])
    ProcessRewardModel.from_backbone(str(untied), max_length=64, target="soft").save(tmp_path / "classifier")  # format 2: no lm_head
    with pytest.raises(PRMLoadError, match="output layer is not in the checkpoint"):
        ProcessRewardModel.from_backbone(str(tmp_path / "classifier"), max_length=64, target="soft", step_surprise=True)


def test_eval_reports_a_step_auc_on_processbench_references(tiny_model_dir, tmp_path, capsys):
    from labeler.cli import main

    reference = tmp_path / "reference.jsonl"
    rows = [{"id": "r0", "problem": PROBLEM, "steps": STEPS, "label": -1},
            {"id": "r1", "problem": PROBLEM, "steps": ["He buys 4 more: 3 + 4 = 9.", "The answer is: 9"], "label": 0}]  # fmt: skip
    reference.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["eval", "--prm", f"logprob:{tiny_model_dir}", "--reference", str(reference), "--device", "cpu", "--prm-backend", "torch",
                 "--json", "--quiet"]) == 0  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert report["subsets"][0]["step_auc"] is not None  # 2 right steps and 1 wrong one scored (the step after it is unknown)


def test_a_chat_template_that_opens_the_thinking_gets_no_second_think_tag(tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}\nAssistant: <think>\n{% endif %}"
    text = tokenizer.decode(render_solution(tokenizer, PROBLEM, ["Think a.", "Answer: 7."], 512, thinking_steps=1, rendering="chat").input_ids)
    assert text.count("<think>") == 1 and text.count("</think>") == 1


def test_a_max_length_past_the_backbones_context_is_capped_to_it(tiny_model_dir, caplog):
    from transformers import AutoConfig

    context = AutoConfig.from_pretrained(tiny_model_dir).max_position_embeddings
    prm = ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=context * 2, target="soft")
    assert prm.settings.max_length == context
    assert "past" in caplog.text and str(context) in caplog.text


def test_a_prm_saved_with_a_max_length_past_the_context_reads_no_further_on_either_backend(tiny_model_dir, tmp_path):
    import dataclasses

    from transformers import AutoConfig

    from labeler.prm.pooling import _checkpoint

    context = AutoConfig.from_pretrained(tiny_model_dir).max_position_embeddings
    prm = ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=64, target="soft")
    prm.settings = dataclasses.replace(prm.settings, max_length=context * 2)  # as saved before the cap
    prm.save(tmp_path / "prm")
    assert ProcessRewardModel.load(tmp_path / "prm").settings.max_length == context
    folder, sequences, _, max_model_len = _checkpoint(str(tmp_path / "prm"), False)
    assert max_model_len == context  # the length vLLM is asked for, and no sequence sent to it is longer
    from labeler.evaluation.solutions import SolutionToScore

    long = SolutionToScore("p", "s", PROBLEM, ["Count: " + " ".join(["one"] * context), "The answer is: 7"])
    assert all(len(ids) <= context for ids, *_ in sequences([long]))


def test_training_reads_no_further_than_the_backbones_context(tiny_model_dir, tmp_path, caplog):
    import logging

    from transformers import AutoConfig

    from tests.synthetic_labels import labels_row

    context = AutoConfig.from_pretrained(tiny_model_dir).max_position_embeddings
    long_step = "Count: " + " ".join(["one"] * context)
    rows = [labels_row(f"p{i}", f"s{i}", f"What is {i} + 1?", [f"{i} + 1 = {i + 1}.", long_step, f"The answer is: {i + 1}"],
                       [1.0, 1.0, 1.0], [True, True, True]) for i in range(2)]  # fmt: skip
    labels = write_labels(tmp_path / "labels", rows)
    caplog.set_level(logging.INFO, logger="labeler.train")
    train(TrainConfig(labels=str(labels), output=str(tmp_path / "run"), model=str(tiny_model_dir), epochs=1, min_steps=0, batch_size=2,
                      max_length=context * 2, validation_fraction=0, device="cpu"))  # fmt: skip
    assert f"4 cut by --max-length {context}" in caplog.text  # the long step and the one after it, in both solutions

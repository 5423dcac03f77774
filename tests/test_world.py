"""The world's problems, injected errors and tokenizer (labeler/world/)."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labeler.checking.extraction import extract_answer
from labeler.world.problems import MAX_EVENTS, MAX_VALUE, MIN_EVENTS, inject_error, make_problem, make_problems, processbench_rows, solution_steps

ARITHMETIC = re.compile(r": (\d+) ([-+*/]) (\d+) = (\d+)\.")
APPLY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a // b}


def arithmetic(step: str) -> tuple[int, str, int, int]:
    match = ARITHMETIC.search(step)
    assert match, step
    a, op, b, c = match.groups()
    return int(a), op, int(b), int(c)


problems = st.builds(lambda seed, n: make_problem(random.Random(seed), "p", n), st.integers(0, 10**9), st.integers(MIN_EVENTS, MAX_EVENTS))


@settings(max_examples=200, deadline=None)
@given(problems)
def test_a_solution_is_right_at_every_step_and_states_the_answer(problem):
    steps = solution_steps(problem)
    assert len(steps) == len(problem.events)
    before = problem.start
    for step, value in zip(steps, problem.values):
        a, op, b, c = arithmetic(step)
        assert a == before and c == value and APPLY[op](a, b) == c and 0 <= c <= MAX_VALUE
        if op == "/":
            assert a % 2 == 0
        before = c
    assert steps[-1].endswith(f"\nThe answer is: {problem.answer}")
    assert extract_answer(steps[-1]) == str(problem.answer)
    assert all(sentence.sentence in problem.text for sentence in problem.events)


@settings(max_examples=200, deadline=None)
@given(problems, st.integers(0, 10**9), st.data())
def test_an_injected_error_is_the_first_and_is_carried_to_a_wrong_answer(problem, seed, data):
    position = data.draw(st.integers(0, len(problem.events) - 1))
    try:
        wrong = inject_error(problem, position, random.Random(seed))
    except ValueError as error:
        assert "no error" in str(error)
        return
    right = solution_steps(problem)
    assert wrong[:position] == right[:position]
    assert wrong[position] != right[position]
    a, op, b, c = arithmetic(wrong[position])
    before = problem.start if position == 0 else problem.values[position - 1]
    assert a == before  # the step starts from the right value: the error is in this step
    event = problem.events[position]
    slipped = APPLY[op](a, b) != c
    misread = op != {"*2": "*", "*3": "*", "/2": "/"}.get(event.kind, event.kind)
    assert slipped or misread
    carried = c
    for step in wrong[position + 1 :]:  # every later step is right on the wrong value
        a, op, b, c = arithmetic(step)
        assert a == carried and APPLY[op](a, b) == c and 0 <= c <= MAX_VALUE
        carried = c
    assert extract_answer(wrong[-1]) == str(carried) != str(problem.answer)


def test_rows_say_their_first_error_and_splits_do_not_overlap():
    rows = list(processbench_rows(make_problems(300, "label"), 0.5, seed=3))
    erroneous = [row for row in rows if row["label"] >= 0]
    assert 100 < len(erroneous) < 200
    for row in rows:
        stated = extract_answer(row["steps"][-1])
        assert (stated == row["answer"]) == (row["label"] == -1)
    assert {r["label"] for r in erroneous} >= set(range(MIN_EVENTS))  # errors at every early position
    texts = {split: {p.text for p in make_problems(300, split)} for split in ("train", "label", "test", "bon")}
    assert all(len(t) == 300 for t in texts.values())
    for a in texts:
        for b in texts:
            assert a == b or not texts[a] & texts[b], (a, b)


def test_a_position_outside_the_solution_is_refused():
    problem = make_problems(1, "test")[0]
    with pytest.raises(ValueError, match="outside"):
        inject_error(problem, len(problem.events), random.Random(0))


def test_the_tokenizer_cuts_a_prompt_where_a_training_sequence_does(tmp_path):
    """A prompt ending with the step separator (or the template's newline) tokenizes as the same text
    inside a training sequence, so the model continues a prefix as it learned to."""
    from labeler.inputs.traces import render_trace
    from labeler.world.tokenizer import train_tokenizer
    from labeler.world.training import prompt_text

    problems = make_problems(200, "train")
    tokenizer = train_tokenizer([render_trace(solution_steps(p), 0) for p in problems], tmp_path)
    for problem in problems[:50]:
        steps = solution_steps(problem)
        head = prompt_text(tokenizer, problem.text)
        whole = tokenizer(head + render_trace(steps, 0), add_special_tokens=False)["input_ids"]
        for k in range(len(steps)):
            prompt = head + render_trace(steps[:k], 0, open_end=True)
            ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
            assert whole[: len(ids)] == ids
        assert tokenizer.decode(whole) == head + render_trace(steps, 0)
    digits = tokenizer(" 47 + 19 = 66", add_special_tokens=False)["input_ids"]
    assert [tokenizer.decode([i]) for i in digits] == [" 4", "7", " +", " 1", "9", " =", " 6", "6"]


def test_a_cpu_engine_takes_the_context_a_model_folder_declares(tmp_path):
    """The world model declares 1024 positions: the CPU default of 2048 would make vLLM refuse it."""
    import json

    from workers.vllm_generator import _declared_context

    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 1024}))
    assert _declared_context(str(tmp_path)) == 1024
    (tmp_path / "config.json").write_text("{not json")
    assert _declared_context(str(tmp_path)) is None
    assert _declared_context(str(tmp_path / "missing")) is None
    assert _declared_context("Qwen/Qwen2.5-Math-7B-Instruct") is None  # a hub id: vLLM's own default applies


def test_a_batch_is_made_from_fewer_examples_than_the_batch_size():
    from labeler.world.training import _batches

    ids, labels, mask = next(_batches([([1, 2, 3], 1)] * 10, 32, random.Random(0), 0))
    assert ids.shape == (10, 3) and int(mask.sum()) == 30 and (labels[:, 0] == -100).all()


def test_the_world_version_pins_what_the_model_learned():
    """The cached world model is keyed by WORLD_VERSION and its settings: a change to the problems,
    the solutions or the prompt the model learned from must bump the version (and this digest)."""
    import hashlib

    from labeler.inputs.traces import render_trace
    from labeler.labeling.prompts import user_message
    from labeler.world.cache import WORLD_VERSION

    problems = make_problems(50, "train")
    text = "".join(user_message(p.text) + render_trace(solution_steps(p), 0) for p in problems)
    text += "".join(json_rows(processbench_rows(make_problems(50, "label"), 0.5, seed=0)))
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    assert (WORLD_VERSION, digest) == (2, DIGEST_OF_VERSION_2), f"bump WORLD_VERSION in labeler/world/cache.py and set the digest to {digest}"


def json_rows(rows):
    import json

    return [json.dumps(row, sort_keys=True) for row in rows]


# the problems and prompt the cached world model of version 2 learned (unchanged from version 1; version 2 added the policy)
DIGEST_OF_VERSION_2 = "78cdb63e1ae0b5c6"


TINY_WORLD = dict(hidden_size=64, layers=1, heads=1, train_problems=60, steps=4, policy_step=2, batch_size=4)


def test_one_training_run_gives_the_policy_and_the_completer_the_same_on_a_second_build(tmp_path):
    """The policy is the run after policy_step steps, saved whole (weights, tokenizer) in the completer's policy/;
    the build fixes torch's thread count and kernels, so a second build on this machine is bit-identical, and
    the caller's torch settings are given back."""
    import torch
    from safetensors.torch import load_file

    from labeler.world.training import POLICY_FOLDER, WorldModelSettings, train_world_model

    settings = WorldModelSettings(**TINY_WORLD)
    threads = torch.get_num_threads()
    first, second = (train_world_model(tmp_path / name, settings, log=lambda message: None) for name in ("a", "b"))
    assert torch.get_num_threads() == threads and not torch.are_deterministic_algorithms_enabled()
    for folder in ("", POLICY_FOLDER):
        a, b = load_file(first / folder / "model.safetensors"), load_file(second / folder / "model.safetensors")
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), folder
        assert (first / folder / "tokenizer.json").read_text() == (second / folder / "tokenizer.json").read_text()
    policy, completer = load_file(first / POLICY_FOLDER / "model.safetensors"), load_file(first / "model.safetensors")
    assert any(not torch.equal(policy[k], completer[k]) for k in policy)  # two more steps apart


def test_a_policy_step_outside_the_run_or_a_snapshot_over_it_is_refused(tmp_path):
    from labeler.world.training import WorldModelSettings, train_world_model

    for step in (0, 4, 9):
        with pytest.raises(ValueError, match="policy_step"):
            train_world_model(tmp_path, WorldModelSettings(**{**TINY_WORLD, "policy_step": step}))
    for snapshots, says in (({2: tmp_path / "snap"}, "replace the policy"), ({3: tmp_path}, "replace the policy"),
                            ({3: tmp_path / "policy"}, "replace the policy"), ({7: tmp_path / "late"}, "never be saved")):  # fmt: skip
        with pytest.raises(ValueError, match=says):
            train_world_model(tmp_path, WorldModelSettings(**TINY_WORLD), snapshots=snapshots)


def test_the_cached_build_is_readable_by_all_and_the_callers_torch_settings_come_back(tmp_path):
    """The policy's folder and files inside the completer's are readable by every user (a cache shared on a
    machine); a caller's deterministic-kernels setting, warn_only included, is as it was after the build."""
    import json
    import stat

    import torch

    from labeler.world.cache import MARKER, ensure_world_model
    from labeler.world.training import POLICY_FOLDER, WorldModelSettings

    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        folder = ensure_world_model(WorldModelSettings(**TINY_WORLD), cache_dir=tmp_path, log=lambda message: None, accuracy_problems=2)
        assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
    finally:
        torch.use_deterministic_algorithms(False)
    for path in [folder, *folder.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o755 if path.is_dir() else 0o644), (path, oct(mode))
    record = json.loads((folder / MARKER).read_text())
    assert record["policy_held_out_greedy_accuracy"]["problems"] == 2 and record["built_on"]["torch"]
    # what the build depends on besides its settings: the libraries, the code, the threads it trained on
    assert record["built_on"]["libraries"]["transformers"] and record["built_on"]["threads"] == TINY_WORLD.get("threads", 2)
    assert "commit" in record["built_on"]
    assert json.loads((folder / POLICY_FOLDER / "world_settings.json").read_text())["trained_steps"] == TINY_WORLD["policy_step"]
    assert json.loads((folder / "world_settings.json").read_text())["trained_steps"] == TINY_WORLD["steps"]


# bench/world.py's logic, with a runner that records the commands instead of running them.


def bench_args(tmp_path, *flags):
    from bench.world import parser

    return parser().parse_args(["--model", str(tmp_path / "model"), *flags])


class Stop(Exception):
    pass


def test_the_bench_passes_absolute_paths_to_its_commands(tmp_path, monkeypatch):
    """The commands run in the repository's root: a relative --work or --model would name other folders."""
    from bench.world import Commands, run_world

    seen = []

    def runner(args):
        seen.append(args)
        raise Stop

    monkeypatch.chdir(tmp_path)
    (tmp_path / "model" / "policy").mkdir(parents=True)
    args = bench_args(tmp_path, "--work", "w", "--label-problems", "3")
    args.model = "model"
    with pytest.raises(Stop):
        run_world(args, Commands(runner))
    paths = [seen[0][i + 1] for i, a in enumerate(seen[0]) if a in ("--input", "--output", "--model")]
    assert len(paths) == 3 and all(p.startswith(str(tmp_path)) for p in paths), paths
    assert (tmp_path / "w" / "label.jsonl").exists()


def test_the_bench_refuses_a_folder_that_holds_a_run_and_bad_flags_before_any_model(tmp_path, monkeypatch):
    import labeler.world.cache
    from bench.world import Commands, run_world

    def no_model(*args, **kwargs):
        raise AssertionError("the model was looked up before the flags were checked")

    def runner(args):
        raise AssertionError("no command may run")

    monkeypatch.setattr(labeler.world.cache, "ensure_world_model", no_model)
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "label.jsonl").write_text("{}\n")
    for flags, message in [
        (["--work", str(tmp_path / "used")], "holds an earlier run"),
        (["--rollouts", ""], "--rollouts"),
        (["--rollouts", "4,4"], "--rollouts"),
        (["--rollouts", "0,2"], "--rollouts"),
        (["--label-problems", "0"], "--label-problems"),
        (["--bon-problems", "0"], "--bon-problems"),
        (["--test-problems", "0"], "--test-problems"),
        (["--label-problems", "2001"], "kept from only the first 2000"),
        (["--work", str(tmp_path / "used" / "label.jsonl")], "not a folder"),
        (["--policy-problems", "0"], "--policy-problems"),
        (["--solutions-per-problem", "0"], "--solutions-per-problem"),
        (["--policy-test-problems", "2001"], "kept from only the first 2000"),
        (["--policy", str(tmp_path / "no-such-policy")], "--policy"),
    ]:
        args = bench_args(tmp_path, *flags)
        args.model = None
        with pytest.raises(SystemExit, match=message):
            run_world(args, Commands(runner))


def test_the_bench_needs_a_policy_beside_the_completer(tmp_path):
    """A world model of version 1 has no policy/: the bench stops naming --policy rather than sample with the completer."""
    from bench.world import Commands, run_world

    def runner(args):
        raise AssertionError("no command may run")

    (tmp_path / "model").mkdir()
    with pytest.raises(SystemExit, match="--policy"):
        run_world(bench_args(tmp_path, "--work", str(tmp_path / "w")), Commands(runner))
    args = bench_args(tmp_path, "--work", str(tmp_path / "w2"), "--policy", str(tmp_path / "model"))
    seen = []
    args.label_problems = 2

    def first(args):
        seen.append(args)
        raise Stop

    with pytest.raises(Stop):
        run_world(args, Commands(first))
    assert seen and seen[0][seen[0].index("--model") + 1] == str(tmp_path / "model")


def test_the_bench_keeps_a_problems_twin_samples_once(monkeypatch):
    """`labeler eval` tells a problem's solutions apart by their steps: twins would be left out as ambiguous."""
    import pyarrow as pa

    import bench.world as world

    problem = make_problems(1, "label")[0]
    right = solution_steps(problem)
    rows = [{"problem_id": problem.id, "solution_id": f"s{i}", "problem": problem.text, "steps": steps}
            for i, steps in enumerate([right, right, right[:-1] + ["oops: 1 + 1 = 3.\nThe answer is: 3"]])]  # fmt: skip
    monkeypatch.setattr(world, "read_labels_table", lambda path, columns: pa.Table.from_pylist(rows))
    samples, truth = world.exact_samples("labels", [problem])
    assert [s["key"] for s in samples] == [f"{problem.id}/s0", f"{problem.id}/s2"]
    assert truth[f"{problem.id}/s0"] == -1 and truth[f"{problem.id}/s2"] == len(right) - 1
    assert samples[0]["answer_right"] and not samples[1]["answer_right"] and samples[0]["answer"] == str(problem.answer)


def test_the_report_compares_with_the_largest_exhaustive_run_whatever_the_order():
    from bench.world import strategies

    runs = strategies([16, 8])
    assert [name for name, _ in runs] == ["exhaustive-8", "exhaustive-16", "first-error-16", "adaptive-16", "posterior-16"]


def test_the_exact_first_error_of_a_solution_is_the_injected_one_and_a_right_solution_has_none():
    import random

    from labeler.world.truth import exact_first_error

    rng = random.Random(0)
    for problem in make_problems(300, "truth-test"):
        assert exact_first_error(problem, solution_steps(problem)) == -1
        position = rng.randrange(len(problem.events))
        try:
            steps = inject_error(problem, position, rng)
        except ValueError:
            continue
        assert exact_first_error(problem, steps) == position


def test_a_sample_off_the_worlds_path_is_wrong_where_it_leaves_it():
    from labeler.world.truth import exact_first_error

    problem = make_problems(1, "truth-test-2")[0]
    steps = solution_steps(problem)
    n = len(steps)
    assert exact_first_error(problem, steps[:-1]) == n - 2  # stops early, no answer: wrong at the last step it wrote
    assert exact_first_error(problem, [*steps[:-1], steps[-1].split("\n")[0]]) == n - 1  # no answer line
    assert exact_first_error(problem, [*steps, "One more step: 1 + 1 = 2."]) == n  # a step past the last event
    assert exact_first_error(problem, ["I think so.", *steps[1:]]) == 0  # no equation
    wrong_answer = steps[-1].rsplit(" ", 1)[0] + f" {problem.answer + 1}"
    assert exact_first_error(problem, [*steps[:-1], wrong_answer]) == n - 1  # the answer line differs from the value


def test_an_answer_stated_early_on_the_steps_line_is_wrong_and_no_steps_is_refused():
    from labeler.world.truth import exact_first_error

    problem = next(p for p in make_problems(50, "truth-test-3") if len(p.events) >= 3)
    steps = solution_steps(problem)
    early = steps[0].rstrip(".") + f". The answer is: {problem.answer + 7}"
    assert exact_first_error(problem, [early, *steps[1:]]) == 0
    assert exact_first_error(problem, [steps[0] + f"\nThe answer is: {problem.answer}", *steps[1:]]) == 0
    twice = steps[-1] + f" The answer is: {problem.answer + 1}"
    assert exact_first_error(problem, [*steps[:-1], twice]) == len(steps) - 1
    with pytest.raises(ValueError):
        exact_first_error(problem, [])


def test_a_last_step_whose_answer_line_is_not_the_value_alone_is_wrong():
    from labeler.world.truth import exact_first_error

    problem = make_problems(1, "truth-test-4")[0]
    steps = solution_steps(problem)
    body = steps[-1].split("\n")[0]
    for ending in (f"{problem.answer}.5", f"{problem.answer} apples", f"{problem.answer}. Wait, it is {problem.answer + 1}."):
        assert exact_first_error(problem, [*steps[:-1], f"{body}\nThe answer is: {ending}"]) == len(steps) - 1, ending
    assert exact_first_error(problem, [*steps[:-1], f"{body}\nThe answer is: {problem.answer}."]) == -1


def test_a_step_that_restates_another_event_is_wrong_even_with_the_right_arithmetic():
    """Issue 53, item 8: step k must restate the k-th event (its ordinal and its phrase), not only do its arithmetic."""
    from labeler.world.problems import ORDINALS, _step_text
    from labeler.world.truth import exact_first_error

    problems = make_problems(300, "truth-test-5")
    # another event's sentence with this event's arithmetic: the next event's, or this one's under another ordinal
    problem = next(p for p in problems if len(p.events) >= 3)
    steps = solution_steps(problem)
    values = [problem.start, *problem.values]
    swapped = _step_text(problem.events[2], values[1], values[2], problem.events[1].kind)
    swapped = swapped.replace(f"{problem.events[2].number} =", f"{problem.events[1].number} =")  # event 1's operand: the arithmetic of event 1
    assert swapped.split(":")[1] == steps[1].split(":")[1]  # the same arithmetic as the right step
    assert exact_first_error(problem, [steps[0], swapped, *steps[2:]]) == 1
    wrong_ordinal = steps[1].replace(ORDINALS[1], ORDINALS[3], 1)
    assert exact_first_error(problem, [steps[0], wrong_ordinal, *steps[2:]]) == 1
    # the same kind and number, another phrase ("buys 5 more" where the event "finds 5 more"): another event
    twin = next((p, k) for p in problems for k, e in enumerate(p.events) if e.kind == "+" and "buys" in e.sentence)
    problem, k = twin
    steps = solution_steps(problem)
    other = steps[k].replace("buys", "finds", 1)
    assert exact_first_error(problem, [*steps[:k], other, *steps[k + 1 :]]) == k
    # a step that adds text after its equation restates more than its event
    tail = steps[k].split("\n")[0] + " Then she loses 3."
    rest = steps[k].partition("\n")[2]
    assert exact_first_error(problem, [*steps[:k], tail + (f"\n{rest}" if rest else ""), *steps[k + 1 :]]) == k
    # the right solution is still right, whitespace around a step included
    assert exact_first_error(problem, [f" {s} " if i < len(steps) - 1 else s for i, s in enumerate(steps)]) == -1


def test_the_bench_refuses_policy_problems_that_reach_the_rl_prompts(tmp_path, monkeypatch):
    """Issue 53, item 7: bench/world_rl.py's RL prompts are the label split's problems from RL_PROBLEMS_FROM on; the
    PRM it rewards with is trained on --policy-problems of the same split: they may not overlap."""
    import labeler.world.cache
    from bench.world import Commands, run_world
    from bench.world_rl import RL_PROBLEMS_FROM

    def runner(args):
        raise AssertionError("no command may run")

    monkeypatch.setattr(labeler.world.cache, "ensure_world_model", lambda *a, **k: (_ for _ in ()).throw(AssertionError("no model")))
    for n in (RL_PROBLEMS_FROM + 1, 2000):
        args = bench_args(tmp_path, "--work", str(tmp_path / f"w{n}"), "--policy-problems", str(n))
        args.model = None
        with pytest.raises(SystemExit, match=f"--policy-problems {n}.*RL prompts.*{RL_PROBLEMS_FROM}"):
            run_world(args, Commands(runner))
        assert not (tmp_path / f"w{n}").exists()  # refused before any work


def test_every_flag_of_the_bench_that_changes_a_product_default_is_shown_as_a_departure():
    """Issue 53, item 7: a flag the bench passes with another value than the command's own default is a departure,
    named with its default and the commands that take it; inputs, outputs and the model are not."""
    from bench.world import Commands

    commands = Commands(lambda args: "{}")
    commands("search", ["search", "--input", "x.jsonl", "--output", "o", "--prm", "p", "--beams", "4", "--max-steps", "12",
                        "--step-max-new-tokens", "48", "--model", "m", "--temperature", "0.7", "--seed", "0", "--quiet", "--json"])  # fmt: skip
    commands("adaptive-16", ["label", "--input", "x.jsonl", "--output", "o", "--strategy", "adaptive", "--rollouts", "16", "--round-size", "4"])
    commands("train", ["train", "--labels", "l", "--output", "o", "--device", "cpu", "--min-steps", "10"])
    departures = {(d["command"], d["flag"]): d for d in commands.departures()}
    assert departures[("search", "--step-max-new-tokens")]["value"] == "48" and departures[("search", "--step-max-new-tokens")]["default"] == "256"
    assert departures[("label", "--round-size")]["value"] == "4" and departures[("label", "--round-size")]["default"] == "2"
    assert departures[("label", "--rollouts")]["value"] == "16" and departures[("label", "--strategy")]["value"] == "adaptive"
    assert departures[("train", "--min-steps")]["value"] == "10" and departures[("train", "--device")]["default"] == "auto"
    assert departures[("label", "--round-size")]["steps"] == ["adaptive-16"]
    for same_as_default in ("--beams", "--max-steps", "--temperature", "--seed"):  # the bench passes the product's default
        assert ("search", same_as_default) not in departures
    for io in ("--input", "--output", "--prm", "--model", "--labels", "--json", "--quiet"):
        assert not any(flag == io for _, flag in departures)

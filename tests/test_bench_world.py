"""bench/world.py's whole path in seconds: a world model trained for a few steps (incompetent: the
figures are not the point), every command of the bench in this process on one real vLLM engine."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from tests.conftest import KeptOpen

# In make test (about 35 s: a world model trained for 20 steps, every command of the bench in turn on one engine),
# so that the whole path of `make world-bench` is exercised by every run of the suite.
pytestmark = [pytest.mark.engine]

QUICK = dict(train_problems=300, steps=20, policy_step=10, batch_size=16)


@pytest.fixture(scope="module")
def world_model(tmp_path_factory):
    from labeler.world.cache import ensure_world_model
    from labeler.world.training import WorldModelSettings

    return ensure_world_model(WorldModelSettings(**QUICK), cache_dir=tmp_path_factory.mktemp("cache"), accuracy_problems=10)


@pytest.fixture
def in_process(world_model, monkeypatch):
    """A runner for bench Commands: each labeler command in this process, every engine it starts being one real vLLM
    engine on the world model (closed after the test); its stdout."""
    import workers.vllm_generator as vllm_generator
    from labeler.cli import main

    engine = vllm_generator.VLLMGenerator(str(world_model), model_name=str(world_model), dtype="float32", max_model_len=1024, cpu_kv_cache_gib=0.25)
    monkeypatch.setattr(vllm_generator, "start_engine", lambda model, config: KeptOpen(engine))

    def run(args: list[str]) -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(args) == 0, args
        return out.getvalue()

    try:
        yield run
    finally:
        engine.close()


def test_the_world_model_is_built_once_with_its_accuracy_recorded(world_model, tmp_path):
    from labeler.world.cache import MARKER, ensure_world_model, world_model_dir
    from labeler.world.training import WorldModelSettings

    record = json.loads((world_model / MARKER).read_text())
    assert record["settings"]["steps"] == QUICK["steps"]
    assert record["held_out_greedy_accuracy"]["problems"] == 10
    assert 0 <= record["held_out_greedy_accuracy"]["correct"] <= 10
    assert record["policy_held_out_greedy_accuracy"]["problems"] == 10 and record["built_on"]["torch"]
    assert (world_model / "policy" / "config.json").exists() and (world_model / "policy" / "tokenizer.json").exists()
    assert ensure_world_model(WorldModelSettings(**QUICK), cache_dir=world_model.parents[1]) == world_model  # cached: not trained again
    assert world_model_dir(WorldModelSettings(**{**QUICK, "steps": 21}), world_model.parents[1]) != world_model


def test_every_command_of_the_world_bench_runs_and_reports(world_model, in_process, tmp_path):
    from bench.world import Commands, parser, report, run_world

    args = parser().parse_args(["--model", str(world_model), "--work", str(tmp_path / "work"), "--label-problems", "4", "--test-problems", "4",
                                "--bon-problems", "2", "--rollouts", "2", "--candidates", "2", "--beams", "1",
                                "--proposals", "2", "--policy-problems", "3", "--solutions-per-problem", "2", "--policy-test-problems", "2",
                                "--min-steps", "2"])  # fmt: skip
    results = run_world(args, Commands(in_process))
    assert [t["step"] for t in results["timings"]] == [
        "exhaustive-2", "first-error-2", "adaptive-2", "posterior-2", "eval labels", "sample the policy's solutions", "sample held-out solutions",
        "label the policy's samples, exhaustive-8", "label the policy's samples, first-error-8", "label the policy's samples, posterior-8",
        "eval the policy's labels", "train PRM on exhaustive-8 labels", "train PRM on first-error-8 labels", "train PRM on posterior-8 labels",
        "train PRM on exact labels", "train ORM", "train PRM on MC labels, no surprise", "eval PRMs on the policy's samples", "eval PRMs on injected errors",
        "bon", "search",
    ]  # fmt: skip
    train_commands = [t["command"] for t in results["timings"] if t["step"].startswith("train")]
    for flag in ("--learning-rate", "--epochs", "--validation-fraction", "--batch-size"):  # the product's defaults, as a user gets them
        assert not any(flag in command for command in train_commands), flag
    assert sum("--no-step-surprise" in command for command in train_commands) == 1  # the ablation alone
    summary = json.loads((tmp_path / "work" / "world.json").read_text())["summary"]
    from bench.world import SUMMARY_KEYS

    assert tuple(summary) == SUMMARY_KEYS and "exhaustive-2" in summary["label_split"]
    assert list(summary["labels"]) == ["exhaustive-8", "first-error-8", "posterior-8"]  # each labelling of the policy's samples
    for entry in summary["labels"].values():  # its tokens, its F1 against the exact first errors, the PRM trained on it
        assert entry["tokens"] > 0 and set(entry["prm"]) == {"f1", "auc"} and "f1" in entry
    assert summary["bon_problems"] == 2 and summary["n"] == 2 and set(summary["prm_mc"]) == {"f1", "auc"}
    assert all(t["command"].startswith("labeler ") for t in results["timings"])
    assert results["tokens"]["exhaustive-2"] > 0
    from bench.world import TRAIN_THREADS

    # what the figures depend on besides the world's settings (issue 54, item 5); no reference is known for a tiny build
    assert results["environment"]["threads"] == TRAIN_THREADS and results["environment"]["libraries"]["torch"]
    assert results["differs_from_reference"] is None
    assert set(results["first_error_agreement"]) == {"first-error-2", "adaptive-2", "posterior-2"}
    for side in ("right", "wrong"):
        counts = results["prefix_accuracy"][side]
        assert 0 <= counts["correct"] <= counts["counted"]
    assert results["bon"]["candidates"] == 4
    text = report(results)
    for heading in ("The world's models", "Monte-Carlo labels against the known first errors", "The completer's Monte-Carlo labels",
                    "PRMs trained with", "F1 at best t*", "best-of-N", "beam search", "Summary"):  # fmt: skip
        assert heading in text
    sampled = [t["command"] for t in results["timings"] if t["step"] in ("sample the policy's solutions", "sample held-out solutions", "bon", "search")]
    assert all(f"--model {world_model / 'policy'} " in command for command in sampled)  # the policy samples, the completer labels
    labelled = [t["command"] for t in results["timings"] if t["step"].startswith("label the policy's samples")]
    assert len(labelled) == 3 and all(f"--model {world_model} " in command for command in labelled)
    assert json.loads((tmp_path / "work" / "world.json").read_text())["tokens"] == results["tokens"]
    # every flag passed with another value than the command's default is a departure, in world.json and in the report
    departures = {(d["command"], d["flag"], d["value"]): d for d in json.loads((tmp_path / "work" / "world.json").read_text())["departures"]}
    assert departures[("search", "--step-max-new-tokens", "48")]["default"] == "256" and departures[("train", "--min-steps", "2")]["default"] == "300"
    assert "Departures from the product's defaults" in text and "labeler search --step-max-new-tokens 48 (default 256): search" in text


def test_the_rl_bench_trains_every_arm_and_writes_its_summary(world_model, tmp_path, monkeypatch):
    """bench/world_rl.py in seconds: GRPO for one step per arm on the tiny world's policy, the untrained
    logprob baseline as the PRM, a few held-out problems; the figures are not the point, the path is."""
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "bench"))
    import world_rl

    work = tmp_path / "rl"
    argv = ["--prm", f"logprob:{world_model}", "--policy", str(world_model / "policy"), "--work", str(work), "--steps", "1",
            "--prompts", "2", "--generations", "2", "--eval-problems", "3", "--max-new-tokens", "24"]  # fmt: skip
    assert world_rl.main(argv) == 0
    results = json.loads((work / "rl.json").read_text())
    summary = results["summary"]
    assert set(summary) == {"problems", "start", "outcome", "prm_plus_outcome", "prm_only", "hacked_share"}
    assert summary["problems"] == 3 and set(summary["hacked_share"]) == set(world_rl.ARMS)
    for arm in ("start", *world_rl.ARMS):
        assert 0 <= summary[arm]["accuracy"] <= 1 and len(summary[arm]["ci95"]) == 2 and 0 <= summary[arm]["maj8"] <= 1
    for arm in world_rl.ARMS:
        training = results["arms"][arm]
        assert len(training["mean_reward_per_step"]) == 1 and (work / arm / "final" / "config.json").exists()
        assert training["judged_right_at"] == 0.5  # the logprob baseline stores no threshold
        assert 0 <= training["cut"] <= 4  # completions cut by the 24 tokens are counted
        assert training["hacked_share"] is None or 0 <= training["hacked_share"] <= 1
    assert set(results["paired_vs_outcome"]) == {"prm_plus_outcome", "prm_only"}
    with pytest.raises(SystemExit):  # the same --work again: refused, not mixed
        world_rl.main(argv)


@pytest.mark.slow
def test_the_active_labeling_bench_runs_on_a_world_run(world_model, in_process, tmp_path):
    """bench/world_active.py at its smallest on a real (tiny) world run: every arm's commands, on one engine, and its
    table (tests/test_world_active.py checks its logic with a runner that answers instead)."""
    from bench.world import Commands, parser, run_world
    from bench.world_active import run_active, table, world_run

    args = parser().parse_args(["--model", str(world_model), "--work", str(tmp_path / "world"), "--label-problems", "2", "--test-problems", "2",
                                "--bon-problems", "1", "--rollouts", "2", "--candidates", "2", "--beams", "1", "--proposals", "2",
                                "--policy-problems", "4", "--solutions-per-problem", "2", "--policy-test-problems", "2", "--min-steps", "2"])  # fmt: skip
    run_world(args, Commands(in_process))
    record, all_labels = world_run(tmp_path / "world")
    (tmp_path / "active").mkdir()
    results = run_active(tmp_path / "world", record, all_labels, tmp_path / "active", 0.2, 0, Commands(in_process))
    summary = results["summary"]
    assert summary["all"]["solutions"] == all_labels["solutions"] and summary["seed"]["solutions"] >= 1
    for arm in ("active", "random"):
        assert summary[arm]["tokens"] > 0 and summary[arm]["solutions"] == 2 * summary["seed"]["solutions"]
    text = table(summary)
    for caption in ("the seed share", "seed + the seed PRM's queue", "seed + a random share", "every sample"):
        assert caption in text, text

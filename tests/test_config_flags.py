"""Each setting is declared once: the flags of `labeler label` and `labeler train` are made from the
fields of their config dataclasses, one flag per field and one field per flag, with today's
spellings; a job or a training run started before that change resumes after it."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from labeler.cli import build_parser
from labeler.cli.common import RunOptions
from labeler.cli.flags import cli_fields, flag_names, flag_values
from labeler.cli.label import config_from_args
from labeler.labeling.config import ClusterSettings, LabelConfig
from labeler.prm.config import TrainConfig


def subcommand(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


def parser_flags(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings if option not in ("-h", "--help")}


def test_every_label_setting_has_a_flag_and_every_flag_a_setting():
    assert {f.name for f in cli_fields(LabelConfig)} == {f.name for f in dataclasses.fields(LabelConfig)}
    assert {f.name for f in cli_fields(ClusterSettings)} == {f.name for f in dataclasses.fields(ClusterSettings)} - {"engine_log_level"}
    declared = flag_names(LabelConfig) + flag_names(ClusterSettings) + flag_names(RunOptions)
    assert len(declared) == len(set(declared))
    assert parser_flags(subcommand("label")) == set(declared)


def test_every_train_setting_has_a_flag_and_every_flag_a_setting():
    # model_name is what --model resolves to (the embedded model's name), not a flag of its own;
    # batching (packed, or the padded layout of before) is for tests and bench/trainer.py only
    assert {f.name for f in cli_fields(TrainConfig)} == {f.name for f in dataclasses.fields(TrainConfig)} - {"model_name", "batching"}
    declared = flag_names(TrainConfig) + flag_names(RunOptions, only=("json", "quiet", "verbose"))
    assert parser_flags(subcommand("train")) == set(declared)


def test_label_flags_keep_their_spellings():
    flags = parser_flags(subcommand("label"))
    spellings = {
        "--split", "--no-stop-after-answer", "--no-rollouts", "--stop", "--problem-column", "--answer-column", "--solution-column",
        "--steps-column", "--id-column", "--max-row-chars", "--trust-remote-code", "--ray-address", "--workers", "--gpus-per-worker",
        "--max-unit-retries", "--overwrite", "--json", "--quiet", "--verbose", "--checker-timeout", "--input", "--output", "--model",
        "--temperature", "--top-p", "--dtype", "--max-model-len", "--tensor-parallel-size", "--gpu-memory-utilization",
        "--checker-processes", "--rebuild-manifest", "--retry-rejected",
    }  # fmt: skip
    assert spellings <= flags


def parse_label(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["label", *argv])


def test_label_flag_defaults_are_the_config_defaults():
    from labeler.labeling.job import SAMPLE_INPUT

    config = config_from_args(parse_label("--output", "out"), "m")
    assert config == LabelConfig(input=SAMPLE_INPUT, output="out", model="m")


def test_label_flags_map_onto_their_fields():
    args = parse_label(
        "--input", "in.jsonl", "--output", "out", "--split", "newline", "--problem-column", "q", "--steps-column", "s",
        "--stop", "A", "--stop", "B", "--no-stop-after-answer", "--no-rollouts", "--trust-remote-code", "--limit", "3",
        "--strategy", "adaptive", "--ci-width", "0.25", "--max-model-len", "512",
    )  # fmt: skip
    config = config_from_args(args, "m")
    assert config.split_rule == "newline"
    assert config.columns == {"problem": "q", "steps": "s"}
    assert config.stop == ("A", "B")
    assert (config.stop_after_answer, config.write_rollouts, config.trust_remote_code) == (False, False, True)
    assert (config.limit, config.strategy, config.ci_width, config.max_model_len) == (3, "adaptive", 0.25, 512)
    assert flag_values(args, RunOptions) == {
        "overwrite": False, "rebuild_manifest": False, "output_lock": True, "max_unit_retries": 2, "retry_rejected": False,
        "checker_timeout": 5.0, "allow_engine_change": False, "json": False, "quiet": False, "verbose": False, "dry_run": False,
    }  # fmt: skip


def test_cluster_flags_build_the_cluster_settings():
    args = parse_label(
        "--output", "o", "--workers", "2", "--ray-address", "auto", "--gpus-per-worker", "1", "--max-unit-retries", "0",
        "--checker-processes", "4",
    )  # fmt: skip
    expected = ClusterSettings(workers=2, address="auto", gpus_per_worker=1, checker_processes=4)
    assert ClusterSettings(**flag_values(args, ClusterSettings)) == expected
    assert flag_values(args, RunOptions)["max_unit_retries"] == 0  # both executors retry units
    assert flag_values(parse_label("--output", "o"), ClusterSettings)["workers"] is None  # no --workers: this process


def test_train_flag_defaults_are_the_config_defaults():
    args = build_parser().parse_args(["train", "--labels", "L", "--output", "O", "--save-steps", "5"])
    values = flag_values(args, TrainConfig)
    assert values.pop("model") is None  # the embedded backbone, resolved by the command
    assert TrainConfig(**values, model="m") == TrainConfig(labels="L", output="O", model="m", save_steps=5)


def test_label_validation_messages_name_the_flags():
    with pytest.raises(ValueError, match="--rollouts must be >= 1"):
        LabelConfig(input="i", output="o", model="m", rollouts=0)
    with pytest.raises(ValueError, match="--strategy must be one of exhaustive, first-error, adaptive"):
        LabelConfig(input="i", output="o", model="m", strategy="greedy")
    with pytest.raises(ValueError, match="--min-counted-rollouts 5 is more than --rollouts 4"):
        LabelConfig(input="i", output="o", model="m", rollouts=4, min_counted_rollouts=5)


# The hash changes only with a setting that changes labels (last: --max-steps and --min-rollout-tokens, schema 1.3); moving
# or re-declaring settings must not change it, or every started job would refuse to resume.
def test_config_hash_is_pinned():
    assert LabelConfig(input="problems.jsonl", output="out", model="m").config_hash() == "2cdad35ab1415642"
    changed = LabelConfig(
        input="hf:openai/gsm8k:main@train", output="o", model="Qwen/Qwen2.5-Math-7B-Instruct", preset="gsm8k", columns={"answer": "ans"},
        stop=("x",), strategy="adaptive", stop_after_answer=False, write_rollouts=False, limit=5, temperature=0.5,
    )  # fmt: skip
    assert changed.config_hash() == "31c0205df9d2ac63"


def test_output_settings_and_engine_settings_are_pinned():
    config = LabelConfig(input="problems.jsonl", output="out", model="m")
    assert LabelConfig.ENGINE_ONLY == ("output", "dtype", "max_model_len", "tensor_parallel_size", "gpu_memory_utilization")
    assert list(config.output_settings()) == [
        "input", "model", "preset", "limit", "split_rule", "max_steps", "max_row_chars", "columns", "rollouts", "temperature", "top_p",
        "max_new_tokens", "min_rollout_tokens", "seed", "shard_size", "solutions_per_problem", "solution_max_new_tokens", "final_step",
        "truncated", "max_timeout_share", "stop_after_answer", "stop", "strategy", "after_first_error", "round_size", "ci_width", "write_rollouts", "trust_remote_code",
    ]  # fmt: skip


def test_train_config_json_keys_are_pinned():
    assert sorted(TrainConfig(labels="l", output="o", model="m").to_dict()) == [
        "attention", "batch_size", "batching", "device", "epochs", "gradient_accumulation_steps", "gradient_checkpointing", "head_learning_rate",
        "labels", "learning_rate", "load_in_4bit", "lora_alpha", "lora_dropout", "lora_rank", "lora_target_modules", "lr_scheduler", "max_grad_norm",
        "max_length", "max_steps", "min_steps", "model", "model_name", "output", "pack_length", "precision", "rendering", "save_steps", "seed",
        "select_best", "sharding", "step_surprise", "target", "train_on_last_step_only", "trajectory_loss_weight",
        "trust_remote_code", "unmeasured_steps", "validation_fraction", "warmup_ratio", "weight_decay",
    ]  # fmt: skip
    # added later: a run saved before them trained as their defaults do, so their absence reads as the default
    from labeler.prm.config import ADDED_LATER

    assert set(ADDED_LATER) == {"lr_scheduler", "train_on_last_step_only", "min_steps", "step_surprise", "rendering", "sharding", "lora_rank",
                                "lora_alpha", "lora_dropout", "lora_target_modules", "load_in_4bit"}  # fmt: skip
    # unmeasured_steps is not checked as a setting on resume: the data fingerprint (its targets) decides (config.py)
    # how batches are laid out and computed changes no result: a resume may change them
    assert TrainConfig.RESUMABLE == {"output", "epochs", "device", "save_steps", "max_steps", "labels", "attention", "batching", "pack_length"}


def test_strategy_settings_are_a_view_of_the_config():
    from labeler.labeling.strategies import StrategySettings

    config = LabelConfig(input="i", output="o", model="m", rollouts=3, seed=9, strategy="first-error", after_first_error="unlabelled")
    settings = config.strategy_settings
    assert isinstance(settings, StrategySettings) and settings.sampling == config.sampling
    viewed = [f for f in dataclasses.fields(StrategySettings) if f.name != "sampling"]
    label_fields = {f.name: f for f in dataclasses.fields(LabelConfig)}
    for f in viewed:
        assert f.default == label_fields[f.name].default  # declared in LabelConfig, not again
        assert getattr(settings, f.name) == getattr(config, f.name)

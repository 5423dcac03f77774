"""Settings and inputs refused before a model loads: numbers finite and in their declared range, an
input with no rows, or with too many of its rows rejected, is one line on stderr and exit 2."""

import math
import os
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from labeler.checking.checker import AnswerChecker
from labeler.cli import main
from labeler.inputs.readers import InputError, read_rows, rows_from_records
from labeler.inputs.rejection_share import JUDGED_ROWS
from labeler.labeling.bounds import Bounds
from labeler.labeling.config import ClusterSettings, LabelConfig
from labeler.labeling.job import plan_job, plan_rows, run_job
from labeler.prm.config import TrainConfig
from tests.conftest import write_jsonl
from tests.fakes import ScriptedGenerator
from workers.local_executor import LocalExecutor

PROBLEMS = {f"What is {i} times 5?": str(5 * i) for i in range(1, 11)}


def good_rows() -> list[dict]:
    return [
        {"id": f"q{k}", "problem": problem, "answer": answer, "steps": [f"{answer} it is.", f"The answer is: {answer}"]}
        for k, (problem, answer) in enumerate(PROBLEMS.items())
    ]


def bad_row(k: int) -> dict:
    return {"id": f"bad{k}", "problem": "What is 1 times 5?", "steps": ["5."]}  # no answer: rejected


def config(path, output, **overrides) -> LabelConfig:
    return LabelConfig(**{"input": str(path), "output": str(output), "model": "scripted", "rollouts": 2, "shard_size": 4, **overrides})


@pytest.fixture(scope="module")
def checker():
    with AnswerChecker(timeout_s=5) as checker:
        yield checker


def run(cfg: LabelConfig, checker):
    executor = LocalExecutor(lambda: ScriptedGenerator(PROBLEMS), checker)
    return run_job(cfg, executor=executor, model_info={"name": "scripted"}, progress_enabled=False)


@pytest.fixture
def no_engine(monkeypatch):
    """The CLI must refuse before it builds a generator: building one fails the test."""

    def start_engine(*args, **kwargs):
        raise AssertionError("an engine was started")

    monkeypatch.setattr("workers.vllm_generator.start_engine", start_engine)


# --- numbers: finite and in the range their setting declares -----------------------------------


def test_bounds_read_as_intervals_and_hold_their_open_ends():
    top_p = Bounds.of(above=0, at_most=1)
    assert str(top_p) == "in (0, 1]" and 1 in top_p and 0.5 in top_p and 0 not in top_p and 1.01 not in top_p
    assert str(Bounds.of(at_least=1)) == ">= 1" and str(Bounds.of(above=0)) == "> 0" and str(Bounds.of(at_least=0, below=1)) == "in [0, 1)"
    assert Bounds.of() is None
    with pytest.raises(TypeError):
        Bounds.of(at_least=0, above=0)


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("temperature", math.nan, "--temperature must be a finite number, got nan"),
        ("temperature", math.inf, "--temperature must be a finite number, got inf"),
        ("temperature", -0.1, r"--temperature must be in \[0, 2\], got -0.1"),
        ("temperature", 2.5, r"--temperature must be in \[0, 2\], got 2.5"),  # vLLM refuses it, once the model is loaded
        ("seed", -3, r"--seed must be in \[0, 4294967295\], got -3"),  # the engine seeds numpy's generator with it
        ("seed", 2**32, r"--seed must be in \[0, 4294967295\], got 4294967296"),
        ("stop", ("",), "--stop must not be empty"),
        ("top_p", 0.0, r"--top-p must be in \(0, 1\], got 0.0"),
        ("top_p", math.nan, "--top-p must be a finite number"),
        ("ci_width", 1.5, r"--ci-width must be in \(0, 1\], got 1.5"),
        ("max_timeout_share", -math.inf, "--max-timeout-share must be a finite number"),
        ("gpu_memory_utilization", 1.2, r"--gpu-memory-utilization must be in \(0, 1\], got 1.2"),
        ("max_rejected_share", 1.5, r"--max-rejected-share must be in \[0, 1\], got 1.5"),
        ("max_new_tokens", 0, "--max-new-tokens must be >= 1, got 0"),
        ("max_row_chars", 0, "--max-row-chars must be >= 1, got 0"),
        ("limit", 0, "--limit must be >= 1, got 0"),
    ],
)
def test_label_config_refuses_non_finite_and_out_of_range_numbers(setting, value, message):
    with pytest.raises(ValueError, match=f"^{message}"):
        LabelConfig(input="i", output="o", model="m", **{setting: value})


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("learning_rate", math.nan, "--learning-rate must be a finite number, got nan"),
        ("learning_rate", math.inf, "--learning-rate must be a finite number, got inf"),
        ("learning_rate", 0.0, "--learning-rate must be > 0, got 0.0"),
        ("warmup_ratio", 1.0, r"--warmup-ratio must be in \[0, 1\), got 1.0"),
        ("max_grad_norm", math.nan, "--max-grad-norm must be a finite number"),
        ("max_length", 4, "--max-length must be >= 8, got 4"),
    ],
)
def test_train_config_refuses_non_finite_and_out_of_range_numbers(setting, value, message):
    with pytest.raises(ValueError, match=f"^{message}"):
        TrainConfig(labels="l", output="o", model="m", **{setting: value})


def test_cluster_settings_name_the_flag_of_a_bad_value():
    with pytest.raises(ValueError, match=r"^--gpus-per-worker must be >= 0, got -1$"):
        ClusterSettings(workers=1, gpus_per_worker=-1)


@pytest.mark.parametrize(
    ("flags", "flag"),
    [
        (["--temperature", "nan"], "--temperature"),
        (["--top-p", "inf"], "--top-p"),
        (["--ci-width", "-1"], "--ci-width"),
        (["--gpu-memory-utilization", "nan"], "--gpu-memory-utilization"),
        (["--max-rejected-share", "nan"], "--max-rejected-share"),
        (["--workers", "1", "--gpus-per-worker", "-1"], "--gpus-per-worker"),  # not the --tensor-parallel-size it sets
    ],
)
def test_label_flags_are_checked_before_an_engine_or_the_output(flags, flag, tmp_path, capsys, no_engine):
    assert main(["label", "--output", str(tmp_path / "out"), "--quiet", *flags]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"labeler label: error: {flag} must be")
    assert not (tmp_path / "out").exists()


def test_label_with_a_nan_temperature_exits_2_fast_in_a_process_of_its_own(tmp_path):
    data = write_jsonl(tmp_path / "in.jsonl", good_rows())
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "labeler.cli", "label", "--input", str(data), "--output", str(tmp_path / "out"), "--temperature", "nan"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert time.monotonic() - started < 10, "a model was loaded, or something as slow"
    assert result.returncode == 2
    assert result.stderr.strip() == "labeler label: error: --temperature must be a finite number, got nan"
    assert not (tmp_path / "out").exists()


# label, judge and bon: what each needs besides the flag under test (nothing is read: the flag is refused first)
COMMANDS = {"label": [], "judge": ["--input", "no-such-labels"], "bon": ["--input", "no-such-problems.jsonl"]}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_negative_seed_exits_2_before_a_model_loads_and_leaves_no_output(command, tmp_path):
    """vLLM refuses it once the model is loaded (a long traceback), after the manifest holding it is written."""
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "labeler.cli", command, *COMMANDS[command], "--output", str(tmp_path / "out"), "--seed", "-3"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip() == f"labeler {command}: error: --seed must be in [0, 4294967295], got -3"
    assert result.stdout == "" and not (tmp_path / "out").exists()
    assert time.monotonic() - started < 20, "a model was loaded, or something as slow"


REFUSED_LATER = [
    (["--seed", "4294967296"], "--seed must be in [0, 4294967295], got 4294967296"),
    (["--temperature", "2.5"], "--temperature must be in [0, 2], got 2.5"),
    (["--stop", ""], "--stop must not be empty"),
]


@pytest.mark.parametrize(
    ("command", "flags", "message"),
    [(command, flags, message) for command in COMMANDS for flags, message in REFUSED_LATER if (command, flags[0]) != ("judge", "--stop")],
)  # a judge has no --stop
def test_settings_the_engine_would_refuse_are_refused_before_it_starts(command, flags, message, tmp_path, capsys, no_engine):
    assert main([command, *COMMANDS[command], "--output", str(tmp_path / "out"), "--quiet", *flags]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"labeler {command}: error: {message}")
    assert not (tmp_path / "out").exists()


def test_the_judge_and_train_seeds_have_the_same_range():
    from labeler.judging.config import JudgeConfig

    with pytest.raises(ValueError, match=r"^--seed must be in \[0, 4294967295\], got -1$"):
        JudgeConfig(input="i", output="o", model="m", seed=-1)
    with pytest.raises(ValueError, match=r"^--seed must be in \[0, 4294967295\], got -1$"):
        TrainConfig(labels="l", output="o", model="m", seed=-1)


@pytest.mark.parametrize(
    ("flags", "flag"),
    [
        (["--learning-rate", "nan"], "--learning-rate"),
        (["--weight-decay", "inf"], "--weight-decay"),
        (["--validation-fraction", "1"], "--validation-fraction"),
    ],
)
def test_train_flags_are_checked_before_a_backbone_loads(flags, flag, tmp_path, capsys, monkeypatch):
    def resolve_backbone(model):
        raise AssertionError("the backbone was resolved")

    monkeypatch.setattr("labeler.cli.train.resolve_backbone", resolve_backbone)
    assert main(["train", "--labels", str(tmp_path / "l"), "--output", str(tmp_path / "run"), "--quiet", *flags]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"labeler train: error: {flag} must be")


def test_score_checks_its_format_flags_before_the_prm_loads(tmp_path, capsys):
    data = write_jsonl(tmp_path / "in.jsonl", good_rows())
    code = main(["score", "--prm", str(tmp_path / "no-prm"), "--input", str(data), "--max-row-chars", "0", "--quiet"])
    assert code == 2 and capsys.readouterr().err.strip() == "labeler score: error: --max-row-chars must be >= 1, got 0"


def test_the_rejected_share_is_outside_the_config_hash_and_the_engine_settings():
    default = LabelConfig(input="problems.jsonl", output="out", model="m")
    other = LabelConfig(input="problems.jsonl", output="out", model="m", max_rejected_share=0.9)
    assert default.config_hash() == other.config_hash() == "2cdad35ab1415642"  # as pinned in test_config_flags
    assert "max_rejected_share" not in default.output_settings()
    assert "max_rejected_share" not in LabelConfig.ENGINE_ONLY and LabelConfig.GUARDS == ("max_rejected_share",)


# --- inputs: no rows, or too many of them rejected ----------------------------------------------


@pytest.mark.parametrize("content", [b"", b"\n\n   \n\t\n"], ids=["empty", "blank-lines"])
def test_an_input_with_no_rows_is_refused(content, tmp_path, checker):
    path = tmp_path / "in.jsonl"
    path.write_bytes(content)
    with pytest.raises(InputError, match=f"^{path}: no rows$"):
        run(config(path, tmp_path / "out"), checker)
    assert not (tmp_path / "out").exists()


def rows_of(path):
    return read_rows(str(path), None, False)


def test_a_binary_file_is_one_error_naming_the_file(tmp_path, checker):
    path = tmp_path / "picture.jsonl"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)
    with pytest.raises(InputError) as error:
        run(config(path, tmp_path / "out"), checker)
    message = str(error.value)
    assert message.startswith(f"{path}: every row rejected (") and "none readable" in message and "row: " in message
    assert not (tmp_path / "out" / "manifest.json").exists()  # no job started; its rows in rejected/, every reason
    assert pq.read_table(tmp_path / "out" / "rejected").num_rows == len(list(rows_of(path)))


def test_a_preset_that_reads_none_of_the_rows_is_refused_with_the_commonest_reason(tmp_path, checker):
    path = write_jsonl(tmp_path / "in.jsonl", good_rows())
    with pytest.raises(InputError) as error:
        run(config(path, tmp_path / "out", preset="gsm8k"), checker)
    assert str(error.value) == (
        f"{path}: every row rejected (10 of 10, read as gsm8k); commonest reason, 10 rows (e.g. row 0): problem: missing column 'question'"
        f"; every rejected row, with its reason, is in {tmp_path / 'out' / 'rejected' / 'input.parquet'}"
    )
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_more_than_the_share_rejected_is_refused(tmp_path, checker):
    rows = good_rows()[:4] + [bad_row(k) for k in range(6)]  # 6 of 10 rejected, over 0.5
    path = write_jsonl(tmp_path / "in.jsonl", rows)
    with pytest.raises(InputError, match=r"6 of the first 10 rows rejected \(read as processbench\), more than --max-rejected-share 0.5; ") as error:
        run(config(path, tmp_path / "out"), checker)
    # every rejected row, with its reason, where a job writes them; no job is started (no manifest)
    assert str(error.value).endswith(f"every rejected row, with its reason, is in {tmp_path / 'out' / 'rejected' / 'input.parquet'}")
    rejected = pq.read_table(tmp_path / "out" / "rejected" / "input.parquet").to_pylist()
    assert [row["row_index"] for row in rejected] == list(range(4, 10)) and all(row["reason"] and row["stage"] == "input" for row in rejected)
    assert sorted(os.listdir(tmp_path / "out")) == ["rejected"]
    summary = run(config(path, tmp_path / "out", max_rejected_share=0.6), checker)  # a higher share, asked for: the job goes on
    assert summary.solutions == 4 and summary.rejected_rows == 6
    assert pq.read_table(tmp_path / "out" / "rejected").num_rows == 6  # the job's own, written over the refused run's


@pytest.mark.parametrize("manifest_lost", [False, True])  # lost: a job that --rebuild-manifest folds anew from its commits
def test_a_refused_input_leaves_an_output_that_holds_a_job_as_it_was(tmp_path, checker, manifest_lost):
    out = tmp_path / "out"
    run(config(write_jsonl(tmp_path / "good.jsonl", good_rows()), out), checker)
    if manifest_lost:
        (out / "manifest.json").unlink()
    before = {name: (out / name).read_bytes() for name in ("manifest.json", "rejected/input.parquet") if (out / name).exists()}
    assert "rejected/input.parquet" in before
    bad = write_jsonl(tmp_path / "bad.jsonl", good_rows()[:4] + [bad_row(k) for k in range(6)])
    with pytest.raises(InputError, match=r"holds a job: its rejected/ is left as it was; rerun with another --output to have them written"):
        run(config(bad, out), checker)
    assert {name: (out / name).read_bytes() for name in before} == before


def test_a_share_not_exceeded_lets_the_job_run(tmp_path, checker):
    rows = good_rows() + [bad_row(k) for k in range(10)]  # exactly half rejected: not more than 0.5
    path = write_jsonl(tmp_path / "in.jsonl", rows)
    summary = run(config(path, tmp_path / "out"), checker)
    assert summary.solutions == 10 and summary.rejected_rows == 10


def test_a_share_of_one_never_refuses_for_rejected_rows_but_an_input_with_no_row_to_label_is_refused(tmp_path, checker):
    path = write_jsonl(tmp_path / "in.jsonl", [bad_row(k) for k in range(3)] + good_rows()[:1])
    summary = run(config(path, tmp_path / "out", max_rejected_share=1.0), checker)
    assert summary.solutions == 1 and summary.rejected_rows == 3
    # every row rejected: a job that can label nothing is refused (it finished with 0 solutions before), its rows kept
    path = write_jsonl(tmp_path / "bad.jsonl", [bad_row(k) for k in range(3)])
    with pytest.raises(InputError, match="no row to label: all 3 rows read were rejected"):
        run(config(path, tmp_path / "out2", max_rejected_share=1.0), checker)
    assert pq.read_table(tmp_path / "out2" / "rejected").num_rows == 3


def test_the_share_is_judged_on_the_first_rows_and_refuses_as_soon_as_they_are_read():
    def rows():
        for k in range(JUDGED_ROWS):
            yield bad_row(k)
        raise AssertionError("read past the judged rows")

    with pytest.raises(InputError, match=f"^memory:rows: {JUDGED_ROWS} of the first {JUDGED_ROWS} rows rejected"):
        plan_rows(rows_from_records(rows()), LabelConfig(input="memory:rows", output="o", model="m"))
    many_bad_after = good_rows() * 10 + [bad_row(k) for k in range(300)]  # the first 100 are good
    plan = plan_rows(rows_from_records(many_bad_after), LabelConfig(input="memory:rows", output="o", model="m"))
    assert plan.rows_read == 400 and len(plan.rejected) == 300


def test_the_commonest_reason_and_its_first_row_are_named(tmp_path):
    rows = [bad_row(0), {"id": "x", "answer": "5", "steps": ["5"]}, bad_row(1), bad_row(2)]  # 3 without an answer, 1 without a problem
    path = write_jsonl(tmp_path / "in.jsonl", rows)
    with pytest.raises(InputError, match=r"commonest reason, 3 rows \(e.g. row 0\): answer: "):
        plan_job(config(path, tmp_path / "out", preset="math"))

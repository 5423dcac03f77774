"""What an outside read of issue 53's labels and trainer change found (round 4's review), each with its test:
a retraced step's label, train's counts of steps with a target, status's resume command for a job a resume would
refuse, and posterior's retraces under --truncated incorrect."""

from __future__ import annotations

import pyarrow as pa
import pytest

from schemas import LABELS_SCHEMA, SchemaError, validate_labels
from tests.synthetic_labels import labels_row


def retraced_row(hard: bool) -> dict:
    row = labels_row("p0", "p0-s0", "Add the numbers.", ["1 + 1 = 2.", "2 + 2 = 4.", "4 + 4 = 8."], [0.5, None, 0.25], [True, hard, True])
    return row | {"label_method": ["rollouts", "retraced", "rollouts"], "first_error": -1 if hard else 1, "strategy": "posterior"}


def test_validate_requires_a_retraced_step_to_be_labelled_right():
    """A retraced step is passed on rollouts of a shorter prefix that wrote it and reached the answer: it is never a
    negative (posterior writes it with hard True, soft null)."""
    validate_labels(pa.Table.from_pylist([retraced_row(True)], schema=LABELS_SCHEMA))
    with pytest.raises(SchemaError, match="step 1: a retraced step is labelled right"):
        validate_labels(pa.Table.from_pylist([retraced_row(False) | {"trajectory_label": False}], schema=LABELS_SCHEMA))


def interrupted_job(tmp_path, monkeypatch, strategy: str):
    """A label job whose engine crashed on its second unit: one unit committed, the job interrupted."""
    import workers.vllm_generator
    from labeler.cli import main
    from tests.conftest import write_jsonl
    from tests.fakes import Crash, ScriptedGenerator

    answers = {f"What is {i} plus {i}?": str(2 * i) for i in range(1, 5)}
    rows = [{"id": f"q{k}", "problem": p, "answer": a, "steps": ["We add.", "Then we check.", f"The answer is: {a}"]}
            for k, (p, a) in enumerate(answers.items())]  # fmt: skip

    class Crashy(ScriptedGenerator):
        def generate(self, requests, sampling):
            if any(r.user_message.startswith("What is 3 plus 3?") for r in requests):
                raise Crash()
            return super().generate(requests, sampling)

    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: Crashy(answers))
    out = tmp_path / strategy
    with pytest.raises(Crash):
        main(["label", "--input", str(write_jsonl(tmp_path / "in.jsonl", rows)), "--output", str(out), "--model", "scripted",
              "--rollouts", "2", "--shard-size", "2", "--strategy", strategy, "--quiet"])  # fmt: skip
    return out


@pytest.mark.parametrize("strategy, refused", [("posterior", True), ("exhaustive", False)])
def test_status_of_an_interrupted_job_a_resume_would_refuse_says_so_instead_of_a_resume_command(tmp_path, monkeypatch, capsys, strategy, refused):
    import json

    from tests.conftest import status_of

    out = interrupted_job(tmp_path, monkeypatch, strategy)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["schema_version"] = "1.6"  # written before posterior's retrace rule (1.7)
    (out / "manifest.json").write_text(json.dumps(manifest))
    status, text = status_of(out, capsys)
    assert status["state"] == "interrupted"
    if refused:
        assert status["resume_command"] is None and "1.7 changed which steps it passes" in status["resume_refused"]
        assert "resume    : refused: " in text and "labeler label --input" not in text
    else:  # 1.6 resumes under 1.7 for every other strategy: the command as before
        assert status["resume_refused"] is None and status["resume_command"].startswith("labeler label ")
        assert f"resume    : {status['resume_command']}" in text


@pytest.mark.parametrize("truncated, tally", [("incorrect", [0, 2]), ("excluded", None)])
def test_an_unchecked_retracing_rollout_counts_as_a_failure_for_the_prefixes_it_reached_under_truncated_incorrect(truncated, tally):
    """A rollout still inside the thinking (verdict truncated: nothing checked) counts as a failure for its own prefix under
    --truncated incorrect (rollouts.py record); it counts so for the prefixes it retraced too, and for none under excluded."""
    from types import SimpleNamespace

    from labeler.checking.checker import AnswerChecker
    from labeler.labeling.prompts import STEP_SEPARATOR
    from labeler.labeling.rollouts import TRUNCATED, RolloutRecord
    from labeler.labeling.strategies.posterior import _read_retraces
    from labeler.records import Solution

    steps = ("Step 1 works.", "Step 2 works.", "Step 3 works.", "The answer is: 42")
    solution = Solution("p", "s", "What is 20 + 22?", "42", steps, "test", 0)
    text = "".join(step + STEP_SEPARATOR for step in steps[1:3]) + "Still thinking about"
    records = [RolloutRecord("s", 0, r, r, text, None, TRUNCATED, 30, "length") for r in range(2)]
    retraced = [{}]
    with AnswerChecker() as checker:
        _read_retraces(records, [solution], {"s": 0}, [SimpleNamespace(size=len(steps))], checker, retraced, truncated)
    assert retraced[0].get(1) == tally and retraced[0].get(2) == tally


def test_train_counts_the_steps_with_a_target_after_the_split_and_last_step_only(tiny_model_dir, tmp_path):
    """The count said "192 trained" where 168 trained and 24 were validation, and counted steps that
    --train-on-last-step-only then dropped."""
    from labeler.prm.config import TrainConfig
    from labeler.prm.model import ProcessRewardModel
    from labeler.prm.trainer import _counted_examples
    from labeler.store.reader import read_labelled_rows
    from tests.synthetic_labels import write_labels

    rows = [labels_row(f"p{p}", f"p{p}-s{s}", "Add the numbers.", ["1 + 1 = 2.", "2 + 2 = 4.", "4 + 4 = 8."], [0.5, 0.25, 0.75],
                       [True, True, True]) for p in range(8) for s in range(2)]  # fmt: skip
    labels = write_labels(tmp_path / "labels", rows)
    prm = ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=384, target="soft")
    config = TrainConfig(labels=str(labels), output=str(tmp_path / "run"), model=str(tiny_model_dir), validation_fraction=0.25,
                         train_on_last_step_only=True)  # fmt: skip
    train, validation, counts = _counted_examples(config, prm, [read_labelled_rows(labels)])
    assert (len(train), len(validation)) == (12, 4)  # 6 train problems, 2 validation ones, 2 solutions each
    assert (counts.train, counts.validation) == (12, 12)  # a train solution's last step alone; every validation step
    assert counts.describe().startswith("24 with a target (12 train, 12 validation): 24 rollouts on their soft label;")
    assert counts.to_dict()["trained"] == {"rollouts": {"soft": 24}}

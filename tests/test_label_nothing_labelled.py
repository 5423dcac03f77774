"""A job that labels nothing does not finish green, however its rows were lost: units that raise
(tests/test_unit_failures.py), rows rejected without an exception (a prompt over the model's context: the
engine returns an error result), or every input row bad. One bad row among good ones still goes to rejected/
and the job finishes (issue 53, item 9; the outside read's finding 1)."""

import pyarrow.parquet as pq

import workers.vllm_generator
from labeler.cli import main
from labeler.labeling.generation import GenerationResult
from tests.conftest import status_of, write_jsonl
from tests.fakes import ScriptedGenerator

ANSWERS = {f"What is {i} plus {i}?": str(2 * i) for i in range(1, 9)}
TOO_LONG = "prompt has 900 tokens, the model's context is 256"


def rows(n=4, steps=True):
    out = []
    for k, (problem, answer) in enumerate(list(ANSWERS.items())[:n]):
        row = {"id": f"q{k}", "problem": problem, "answer": answer}
        if steps:
            row["steps"] = ["We add.", "Then we check.", f"The answer is: {answer}"]
        out.append(row)
    return out


class TooLong(ScriptedGenerator):
    """Prompts over the model's context (as with a too-small --max-model-len): error results, no exception;
    `only`: the problems that are too long (None: every one)."""

    def __init__(self, answers, only=None):
        super().__init__(answers, sampled_solution="We add.\n\nThe answer is: {answer}", miss_every=None)
        self.only = only

    def generate(self, requests, sampling):
        results = super().generate(requests, sampling)
        return [
            GenerationResult((), error=TOO_LONG, context_exceeded=True)
            if self.only is None or any(request.user_message.startswith(p) for p in self.only)
            else result
            for request, result in zip(requests, results)
        ]


def label(tmp_path, monkeypatch, capsys, generator, data, *extra):
    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: generator)
    out = tmp_path / "out"
    code = main(["label", "--input", str(data), "--output", str(out), "--model", "scripted", "--rollouts", "2", "--quiet", *extra])
    printed, err = capsys.readouterr()
    return code, printed, err, out


def test_a_job_whose_every_sampled_row_is_rejected_without_an_exception_stops_with_the_cause(tmp_path, monkeypatch, capsys):
    data = write_jsonl(tmp_path / "in.jsonl", rows(4, steps=False))
    code, printed, err, out = label(tmp_path, monkeypatch, capsys, TooLong(ANSWERS), data)
    assert code == 1, (printed, err)
    assert "no row of this run was labelled" in err and TOO_LONG in err and "4 rows" in err, err
    assert "solutions labelled" not in printed  # no summary of a job that did not finish
    status, _ = status_of(out, capsys)
    assert status["state"] != "finished"
    assert not list(out.glob("rejected/*.parquet")) or all(pq.read_table(p).num_rows == 0 for p in out.glob("rejected/*.parquet"))


def test_one_rejected_row_among_labelled_ones_goes_to_rejected_and_the_job_finishes(tmp_path, monkeypatch, capsys):
    data = write_jsonl(tmp_path / "in.jsonl", rows(4, steps=False))
    generator = TooLong(ANSWERS, only=[list(ANSWERS)[0]])
    code, printed, err, out = label(tmp_path, monkeypatch, capsys, generator, data, "--shard-size", "1")
    assert code == 0, err
    rejected = pq.read_table(out / "rejected").to_pylist()
    assert [row["problem_id"] for row in rejected] == ["q0"] and TOO_LONG in rejected[0]["reason"]
    status, _ = status_of(out, capsys)
    assert status["state"] == "finished"


def test_an_input_whose_every_row_is_bad_is_refused_even_when_rejected_rows_never_refuse_it(tmp_path, monkeypatch, capsys):
    bad = [{"id": f"q{k}", "problem": row["problem"], "answer": ""} for k, row in enumerate(rows(3))]  # a blank answer
    data = write_jsonl(tmp_path / "in.jsonl", bad)
    code, printed, err, out = label(tmp_path, monkeypatch, capsys, TooLong(ANSWERS), data, "--max-rejected-share", "1")
    assert code == 2, (printed, err)
    assert "no row to label" in err and "answer" in err, err
    assert pq.read_table(out / "rejected").num_rows == 3  # every reason kept where the user can read it


def test_given_solutions_whose_every_prefix_failed_finish_with_a_warning_that_counts_them(tmp_path, monkeypatch, capsys):
    data = write_jsonl(tmp_path / "in.jsonl", rows(4))
    code, printed, err, out = label(tmp_path, monkeypatch, capsys, TooLong(ANSWERS), data)
    assert code == 0, err  # the final answers are labels, committed: a resume could not finish otherwise
    assert "no step of this job was measured by rollouts" in err, err
    assert "8 of 8 steps before a final answer are unlabelled" in err and TOO_LONG in err, err

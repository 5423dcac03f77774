"""`labeler bon` and `labeler search` end to end on the real engine (the session's tiny Llama) with
tiny PRM checkpoints built from random backbones; the figures are checked against the estimators
and the scorer run directly, so that what the commands report is what they measured."""

import json
import math
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch

from labeler.checking.answer_keys import answer_key
from labeler.checking.checker import AnswerChecker
from labeler.cli import main
from labeler.decoding.comparison import format_summary
from labeler.evaluation.best_of_n import Pool, estimate
from labeler.evaluation.solutions import SolutionToScore
from labeler.prm.devices import place
from labeler.prm.model import ProcessRewardModel
from labeler.prm.scorers import load_scorer
from labeler.prm.solution_scores import AGGREGATES, aggregate
from tests.conftest import write_jsonl
from tests.tiny_prm_backbone import build_windowed_mistral

pytestmark = pytest.mark.engine

# A separator the tiny random model writes often (its text is gibberish; a blank line is rare in it)
SEPARATOR = "e"

GIVEN = {
    ("What is 2 + 2?", "4"): [
        ("2 + 2 = 4.\n\nThe answer is: 4", True),
        ("2 + 2 = 5.\n\nThe answer is: 5", False),
        ("Two and two make four.\n\nThe answer is: 4", True),
        ("I am not sure.", False),  # states no answer: not checked, never votes
    ],
    ("What is 3 + 3?", "6"): [("3 + 3 = 6.\n\nThe answer is: 6", True), ("3 + 3 = 9.\n\nThe answer is: 9", False), ("The answer is: 9", False)],
}
SAMPLED = [("What is 5 + 5?", "10"), ("What is 7 + 1?", "8")]


class Borrowed:
    """The session's tiny engine lent to a command: closing it leaves it running for the next test."""

    closed = False

    def __init__(self, engine):
        self._engine = engine

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def close(self):
        pass


@pytest.fixture
def engine_starts(tiny_engine, monkeypatch):
    import workers.vllm_generator

    starts = []

    def start(model, config):
        starts.append(model)
        return Borrowed(tiny_engine)

    monkeypatch.setattr(workers.vllm_generator, "start_engine", start)
    return starts


@pytest.fixture
def loaded_prms(monkeypatch):
    import workers.vllm_scorer

    loaded, real = [], workers.vllm_scorer.load_step_scorer

    def load(spec, backend, **kwargs):
        loaded.append(spec)
        return real(spec, backend, **kwargs)

    monkeypatch.setattr(workers.vllm_scorer, "load_step_scorer", load)
    return loaded


@pytest.fixture(scope="module")
def prms(tiny_model_dir, tmp_path_factory):
    """Two tiny PRMs with random heads: one on the tiny Llama, one on the windowed Mistral."""
    folder = tmp_path_factory.mktemp("prms")
    torch.manual_seed(1)
    ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=256, target="soft").save(folder / "llama")
    mistral = build_windowed_mistral(folder / "mistral-backbone", tiny_model_dir)
    torch.manual_seed(2)
    ProcessRewardModel.from_backbone(str(mistral), max_length=256, target="soft").save(folder / "mistral")
    return str(folder / "llama"), str(folder / "mistral")


@pytest.fixture(scope="module")
def problems_file(tmp_path_factory):
    rows = [{"problem": p, "answer": a, "solution": s} for (p, a), solutions in GIVEN.items() for s, _ in solutions]
    rows += [{"problem": p, "answer": a} for p, a in SAMPLED]
    rows.append({"problem": "A row without a reference answer"})  # rejected with its reason, the job goes on
    return write_jsonl(tmp_path_factory.mktemp("bon-input") / "problems.jsonl", rows)


def bon_args(problems_file, output, *prm_specs, candidates=4):
    args = ["bon", "--input", str(problems_file), "--preset", "math", "--output", str(output), "--candidates", str(candidates)]
    args += ["--solution-max-new-tokens", "48", "--temperature", "1.0", "--device", "cpu", "--quiet", "--json"]
    return args + [flag for spec in prm_specs for flag in ("--prm", spec)]


def scores_of(spec, candidates):
    scorer = load_scorer(spec, placement=place("cpu", "fp32"))
    return scorer.step_scores([SolutionToScore(c["problem_id"], c["solution_id"], c["problem"], tuple(c["steps"])) for c in candidates])


def expected_curves(candidates, answers, specs, ns):
    """The curves recomputed here: the checker's verdicts, the answers' keys, the PRMs run directly."""
    scores = {spec: dict(zip((c["solution_id"] for c in candidates), scores_of(spec, candidates))) for spec in specs}
    pools = []
    for problem_id in sorted({c["problem_id"] for c in candidates}):
        members = sorted((c for c in candidates if c["problem_id"] == problem_id), key=lambda c: c["solution_id"])
        named = {
            f"{i}/{how}": tuple(aggregate(scores[spec][c["solution_id"]], how) for c in members) for i, spec in enumerate(specs) for how in AGGREGATES
        }
        keys = tuple(None if answers.get(c["solution_id"]) is None else answer_key(answers[c["solution_id"]]) for c in members)
        unchecked = tuple(c["label_method"][-1] != "final_answer" for c in members)
        pools.append(Pool(problem_id, tuple(c["correct"] for c in members), keys, named, unchecked))
    return estimate(pools, ns, subsets=1000, seed=0)


@pytest.fixture(scope="module")
def bon_run(tmp_path_factory):
    return {"output": tmp_path_factory.mktemp("bon") / "out"}


def test_bon_end_to_end(bon_run, problems_file, prms, engine_starts, capsys):
    output = bon_run["output"]
    assert main(bon_args(problems_file, output, prms[0])) == 0
    results = json.loads(capsys.readouterr().out)
    assert engine_starts == [None]
    assert results == json.loads((output / "bon" / "results.json").read_text()) | {"files": results["files"]}
    assert (output / "bon" / "curves.png").read_bytes()[:4] == b"\x89PNG"

    labels = pq.read_table(output / "labels").to_pylist()
    checks = {r["solution_id"]: r for r in pq.read_table(output / "rollouts").to_pylist()}
    assert len(labels) == 4 + 3 + 2 * 4 and {r["strategy"] for r in labels} == {"final-answer"}
    assert results["rows_rejected"] == 1 and results["problems"] == 4 and results["pool_size"] == {"min": 3, "max": 4}
    # each candidate's verdict is the checker's on its last step; given solutions as written
    candidates, answers, extracted = [], {}, {}
    with AnswerChecker() as checker:
        for row in labels:
            checked = row["label_method"][-1] == "final_answer"
            check = checker.check(row["steps"][-1], row["reference_answer"])
            correct = checked and check.verdict.value == "correct"
            assert (checked and row["hard_labels"][-1]) == correct
            candidates.append({**row, "correct": correct})
            answers[row["solution_id"]] = check.extracted if checked else None  # an unlabelled check's answer is not voted
            extracted[row["solution_id"]] = check.extracted
    given = {(r["problem"], "\n\n".join(r["steps"])): r["correct"] for r in candidates if r["solution_tokens"] == 0}
    assert given == {(p, s): c for (p, _), solutions in GIVEN.items() for s, c in solutions}
    sampled = [r for r in candidates if r["solution_tokens"] > 0]
    assert len(sampled) == 8 and results["tokens_per_candidate"] == pytest.approx(sum(r["solution_tokens"] for r in sampled) / 8)

    assert {sid: check["extracted_answer"] for sid, check in checks.items()} == {sid: a for sid, a in extracted.items() if sid in checks}
    expected = expected_curves(candidates, answers, [prms[0]], [1, 2, 4])
    assert results["n"] == [1, 2, 4] and results["problems_capped"] == [0, 0, 1]  # the 3-candidate pool at N = 4
    for name, key in (("pass", "pass"), ("majority", "majority"), ("random", "random")):
        assert results["baselines"][name] == pytest.approx(expected.accuracy[key])
    prm = results["prms"][0]
    for how in AGGREGATES:
        assert prm["selection"][how] == pytest.approx(expected.accuracy[f"select:0/{how}"])
        assert prm["weighted_vote"][how] == pytest.approx(expected.accuracy[f"vote:0/{how}"])
        assert prm["counted_wrong_unchecked"]["selection"][how] == pytest.approx(expected.unknown[f"select:0/{how}"])
    for name in ("pass", "majority", "random"):
        assert results["counted_wrong_unchecked"][name] == pytest.approx(expected.unknown[name])
    assert prm["no_scored_candidate"] == pytest.approx(expected.unscored["0/min"])
    assert prm["candidates_unscored"] == sum(None in s for s in scores_of(prms[0], candidates))
    assert sum(results["candidates_unchecked"].values()) == sum(r["label_method"][-1] != "final_answer" for r in labels)
    # the given pools by hand: 2 + 2 has 2 of 4 right, 3 + 3 has 1 of 3; the sampled ones
    sampled_pass = [sum(r["correct"] for r in sampled if r["problem"] == p) for p, _ in SAMPLED]
    pass_at_2 = [5 / 6, 2 / 3] + [1 - math.comb(4 - c, 2) / math.comb(4, 2) for c in sampled_pass]
    assert results["baselines"]["pass"][1] == pytest.approx(sum(pass_at_2) / 4)
    bon_run["results"] = results


def test_bon_rerun_with_another_prm_samples_and_scores_nothing_twice(bon_run, problems_file, prms, engine_starts, loaded_prms, capsys, tmp_path):
    output = bon_run["output"]
    first = bon_run["results"]
    kept = (output / "bon" / "scores").glob("*.parquet")
    mtimes = {path.name: path.stat().st_mtime_ns for path in kept}
    assert main(bon_args(problems_file, output, prms[0], prms[1])) == 0
    results = json.loads(capsys.readouterr().out)
    assert engine_starts == [] and loaded_prms == [prms[1]]  # no engine started, the first PRM not loaded again
    assert all((output / "bon" / "scores" / name).stat().st_mtime_ns == mtime for name, mtime in mtimes.items())
    assert [p["spec"] for p in results["prms"]] == list(prms)
    assert results["prms"][0]["selection"] == first["prms"][0]["selection"] and results["baselines"] == first["baselines"]
    # the report shows the curves beside the candidates' labels
    assert main(["report", str(output), "--output", str(tmp_path / "report")]) == 0
    page = (tmp_path / "report" / "index.html").read_text()
    assert "Best-of-N" in page and (tmp_path / "report" / "best_of_n.png").exists()


def test_bon_bad_prm_after_the_candidates_exits_2_and_keeps_them(bon_run, problems_file, engine_starts, tmp_path, capsys):
    assert main(bon_args(problems_file, bon_run["output"], str(tmp_path / "no-such-prm"))) == 2
    error = capsys.readouterr().err
    assert "labeler bon: error: --prm" in error and "candidates are saved" in error and engine_starts == []


def test_search_end_to_end(problems_file, prms, engine_starts, tmp_path, capsys):
    rows = [{"problem": p, "answer": a} for p, a in [*SAMPLED, ("What is 2 + 2?", "4")]]
    data = write_jsonl(tmp_path / "problems.jsonl", rows)
    output = tmp_path / "search"
    args = ["search", "--input", str(data), "--preset", "math", "--output", str(output), "--prm", prms[0], "--beams", "2", "--proposals", "2"]
    args += ["--max-steps", "3", "--step-max-new-tokens", "12", "--step-separator", SEPARATOR, "--candidates", "4"]
    args += ["--solution-max-new-tokens", "48", "--temperature", "1.0", "--device", "cpu", "--quiet", "--json"]
    assert main(args) == 0
    results = json.loads(capsys.readouterr().out)
    assert engine_starts == [None]  # one engine for the candidates and the search
    problems = [json.loads(line) for line in (output / "search" / "problems.jsonl").read_text().splitlines()]
    assert len(problems) == results["problems"] == 3
    scorer = load_scorer(prms[0], placement=place("cpu", "fp32"))
    for problem in problems:
        rounds = problem["rounds"]
        assert 1 <= len(rounds) <= 3
        first = [e for e in rounds[0] if not e.get("carried")]
        assert len(first) == 4 and {e["parent"] for e in first} == {0}  # B x K first steps, from the problem
        proposals = [e for r in rounds for e in r if not e.get("carried")]
        for entry in proposals:
            assert 1 <= entry["tokens"] <= 12
            if entry["status"] == "open":  # cut at the separator, its first occurrence
                assert entry["text"].endswith(SEPARATOR) and entry["text"].find(SEPARATOR) == len(entry["text"]) - len(SEPARATOR)
            if entry["finish_reason"] == "length":
                assert entry["tokens"] == 12
        assert problem["generated_tokens"] == sum(e["tokens"] for e in proposals)
        previous_kept = None
        for entries in rounds:  # the kept ones are the top B by score
            ranked = [e for e in entries if "dropped" not in e]
            kept = [e for e in ranked if e["kept"]]
            assert len(kept) == min(2, len(ranked))
            assert min(e["score"] for e in kept) >= max((e["score"] for e in ranked if not e["kept"]), default=-1)
            if previous_kept is not None:  # each new step grows a beam kept open in the round before
                assert all(previous_kept[e["parent"]]["status"] == "open" for e in entries if not e.get("carried"))
            previous_kept = sorted(kept, key=lambda e: -e["score"])
        # the chosen beam's score is the PRM's, run directly, aggregated by `min` (the default)
        direct = scorer.step_scores([SolutionToScore(problem["problem_id"], "x", problem["problem"], tuple(problem["steps"]))])
        assert problem["score"] == pytest.approx(aggregate(direct[0], "min"), abs=1e-6)
    assert results["settings"]["aggregate"] == "min"
    assert results["generated_tokens"] == sum(p["generated_tokens"] for p in problems)
    # every problem counted wrong without a checked answer, by why (the chosen beam was cut, ...; the check's verdict)
    def unchecked(problem):
        if problem["correct"]:
            return None
        if problem["finished_by"] not in ("answer", "ended"):
            return problem["finished_by"] or "no beam"
        return None if problem["verdict"] == "incorrect" else f"verdict {problem['verdict']}"

    assert results["counted_wrong_unchecked"] == dict(Counter(r for r in map(unchecked, problems) if r is not None))
    assert results["chosen_unscored"] == sum(p["score"] is None for p in problems if p["steps"])
    summary = format_summary(results)
    assert ("counted wrong without a checked answer" in summary) == bool(results["counted_wrong_unchecked"])
    assert ("could not fully score" in summary) == bool(results["chosen_unscored"])
    # the separator cut some steps, and some beams grew past their first step
    assert any(e["status"] == "open" for p in problems for e in p["rounds"][0]) and any(len(p["rounds"]) > 1 for p in problems)
    bon = results["best_of_n"]
    labels = pq.read_table(output / "labels").to_pylist()
    per_candidate = sum(r["solution_tokens"] for r in labels) / len(labels)
    assert bon["tokens_per_candidate"] == pytest.approx(per_candidate)
    assert bon["n_equal_tokens"] == max(1, round(results["tokens_per_problem"] / per_candidate))
    assert bon["n"] == min(bon["n_equal_tokens"], 4) and bon["capped"] == (bon["n_equal_tokens"] > 4)
    assert (output / "search" / "comparison.png").read_bytes()[:4] == b"\x89PNG"
    # a rerun is the same search (per-request seeds) and samples no candidate again
    assert main(args) == 0
    capsys.readouterr()
    assert [json.loads(line) for line in (output / "search" / "problems.jsonl").read_text().splitlines()] == problems

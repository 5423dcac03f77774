"""A Process Reward Model: a causal-LM backbone from transformers and a linear step-score head.

The head maps each token's last hidden state to one logit; only the logits at the score positions
of `labeler.prm.rendering` are used (sigmoid: the probability that the solution is still on a path to
the right answer after that step). A PRM trained with trajectory labels also has a trajectory head
beside it, read at the last step's position: the probability that the whole trajectory (a trace's
thinking and response) reaches the answer (labeler/prm/trajectory.py).

A saved PRM is a folder that `ProcessRewardModel.load` reads back, and that transformers and vLLM
also load as a token classifier (format 2), where transformers has a token classifier with a `score`
head for the backbone (Llama, Mistral, Qwen2, Gemma 2, Phi-3, ...; format 1, below, otherwise):

    prm.json             format, base model, step separator, max length, training target
    config.json          the backbone's config, its architecture the backbone's *ForTokenClassification:
                         label 0 "step" (the step head), label 1 "trajectory" when there is a trajectory head
    model.safetensors    the backbone's weights under `model.` (its base_model_prefix) and the heads as
                         `score.weight` / `score.bias` (one row per label); sharded with an index when large
    tokenizer files      as transformers saves them

So `AutoModelForTokenClassification.from_pretrained(folder)` gives the step logits in column 0, and
vLLM's pooling runner serves the folder as it is (`labeler score --prm-backend vllm`). Format 1
(the bare backbone, and the heads in head.safetensors and trajectory_head.safetensors: PRMs saved
before 2026-12-04, and backbones with no such token classifier, e.g. OLMo 2, GPT-2 or remote code)
loads here too; vLLM cannot serve it (a format-1 PRM loaded and saved again is written in format 2
where its backbone allows).

A PRM with a step-surprise term (`labeler train`'s default, --step-surprise) adds to each step's logit
a learnt weight times the step's surprise: the lowest log-probability the backbone's own language
model gives a token of the step (labeler.prm.rendering's step span), given everything before it. A
model that learnt to write solutions already finds a wrong step's tokens unlikely; the head starts
from that knowledge (weight 1) rather than from nothing. Such a PRM is saved in format 3: the whole
causal LM as transformers saves it (its output layer included) and the heads in head.safetensors
(`weight`, `bias`, `surprise_weight`) and trajectory_head.safetensors. vLLM's pooling runner gives no
token log-probabilities, so it cannot serve format 3 (`labeler score` says so and scores with torch).
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
from torch import nn

from labeler.labeling.prompts import STEP_SEPARATOR

PRM_CONFIG_NAME = "prm.json"
HEAD_NAME = "head.safetensors"
TRAJECTORY_HEAD_NAME = "trajectory_head.safetensors"
FORMAT = "prm-labeler/step-score-head"
FORMAT_VERSION = 2  # a token classifier
SURPRISE_FORMAT_VERSION = 3  # a causal LM and head files: PRMs with a step-surprise term
SCORE_PREFIX = "score."  # the token classifier's head in model.safetensors (format 2)
LABELS = ("step", "trajectory")  # its rows: the step head, then the trajectory head when there is one


class PRMLoadError(ValueError):
    """A folder is not a saved PRM, or the backbone cannot be loaded; the message is for the user."""


@dataclass(frozen=True)
class PRMSettings:
    base_model: str
    max_length: int
    target: str = "soft"
    step_separator: str = STEP_SEPARATOR
    trajectory_head: bool = False  # a second head scores the whole trajectory (absent in PRMs saved before it)
    rendering: str = "plain"  # labeler.prm.rendering; PRMs saved before it read plain
    step_surprise: bool = False  # a learnt weight x the step's lowest token log-probability joins its logit (format 3)
    # The step probability below which a step is called wrong (its first such step the first error), chosen on
    # the validation split by `labeler train`; None: 0.5 (no validation, or a PRM saved before it)
    threshold: float | None = None
    format: str = FORMAT
    format_version: int = FORMAT_VERSION


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class ProcessRewardModel(nn.Module):
    def __init__(self, backbone: nn.Module, tokenizer, settings: PRMSettings, causal_lm: nn.Module | None = None):
        super().__init__()
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.settings = settings
        self.head = nn.Linear(_hidden_size(backbone.config), 1, dtype=torch.float32)
        self.trajectory_head = nn.Linear(_hidden_size(backbone.config), 1, dtype=torch.float32) if settings.trajectory_head else None
        # With a step-surprise term: the causal LM the backbone belongs to (kept out of the module tree, whose
        # backbone it shares; saved whole) and its output layer, which reads the step tokens' log-probabilities.
        self._causal_lm = [causal_lm]
        self.output_layer = causal_lm.get_output_embeddings() if settings.step_surprise else None
        self.surprise_weight = nn.Parameter(torch.ones(1)) if settings.step_surprise else None
        # None, or a function giving the most of a count over all training processes: under DeepSpeed ZeRO-3 every call
        # of the output layer gathers its weights, a collective, so each process must call it as often as the others
        # (labeler.prm.zero sets this); the step tokens' log-probabilities are then read in as many chunks everywhere.
        self.most_across_processes = None
        if settings.step_surprise and self.output_layer is None:
            raise PRMLoadError(f"{settings.base_model}: a step-surprise PRM needs a causal LM with an output layer")

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
        rendering: str = "auto",
        step_surprise: bool = False,
        quantization_config=None,
        device: torch.device | None = None,
    ) -> ProcessRewardModel:
        """A new PRM on the pretrained backbone `model` (hub id or folder), with a fresh head (and
        trajectory head): weights near 0, bias 0 (`start_at_prior` sets it), the surprise weight 1.
        `attention`: the attention kernels transformers runs (sdpa, flash_attention_2, eager; None: its
        default). `rendering`: labeler.prm.rendering's, or auto (chat where the tokenizer has a template).
        `quantization_config`: QLoRA's 4-bit base (labeler.prm.qlora.four_bit_config), loaded onto `device`."""
        from labeler.prm.rendering import rendering_for

        causal = None
        quantized = {}
        if quantization_config is not None:  # bitsandbytes quantizes the weights as they are placed
            quantized = {"quantization_config": quantization_config, "device_map": {"": device or torch.device("cpu")}}
        if step_surprise:
            causal, tokenizer = _load_causal_lm(model, dtype, trust_remote_code, attention, quantized)
            backbone = causal.base_model
        else:
            backbone, tokenizer = _load_backbone(model, dtype, trust_remote_code, attention, quantized=quantized)
        if quantization_config is not None:
            from labeler.prm.qlora import settle

            settle(causal if step_surprise else backbone)
        context = declared_context(backbone.config)
        if context and max_length > context:  # positions past it were never trained; vLLM refuses such a length
            logging.getLogger("labeler.train").warning(
                "--max-length %d is past %s's context of %d tokens: the PRM reads at most %d", max_length, name or model, context, context
            )
            max_length = context
        settings = PRMSettings(
            base_model=name or model, max_length=max_length, target=target, trajectory_head=trajectory_head,
            rendering=rendering_for(tokenizer, rendering), step_surprise=step_surprise,
        )  # fmt: skip
        prm = cls(backbone, tokenizer, settings, causal)
        for head in (prm.head, prm.trajectory_head):
            if head is not None:
                nn.init.normal_(head.weight, std=0.02)
                nn.init.zeros_(head.bias)
        return prm

    def start_at_prior(self, step_prior: float | None, trajectory_prior: float | None = None, step_offset: float = 0.0) -> None:
        """Set each head's bias to the log-odds of its training targets' mean, so the first steps of
        training do not spend themselves (and the backbone) on learning the class balance; the step
        head's less `step_offset`, the mean of the step-surprise term it is added to."""
        for head, prior, offset in ((self.head, step_prior, step_offset), (self.trajectory_head, trajectory_prior, 0.0)):
            if head is not None and prior is not None:
                prior = min(max(prior, 1e-4), 1 - 1e-4)
                with torch.no_grad():
                    head.bias.fill_(math.log(prior / (1 - prior)) - offset)

    def head_parameters(self) -> list[nn.Parameter]:
        """The parameters trained at the head's learning rate: the heads and the surprise weight."""
        heads = [self.head, self.trajectory_head]
        return [p for head in heads if head is not None for p in head.parameters()] + ([self.surprise_weight] if self.step_surprise else [])

    @property
    def step_surprise(self) -> bool:
        return self.settings.step_surprise

    @classmethod
    def load(
        cls, directory: str | Path, *, dtype: torch.dtype = torch.float32, trust_remote_code: bool = False, attention: str | None = None
    ) -> ProcessRewardModel:
        from safetensors.torch import load_file

        directory = Path(directory)
        settings = read_settings(directory)
        causal = None
        if settings.step_surprise:
            causal, tokenizer = _load_causal_lm(str(directory), dtype, trust_remote_code, attention)
            backbone = causal.base_model
        else:
            classifier = settings.format_version == FORMAT_VERSION
            backbone, tokenizer = _load_backbone(str(directory), dtype, trust_remote_code, attention, token_classifier=classifier)
        context = declared_context(backbone.config)
        if context and settings.max_length > context:  # saved before the cap in from_backbone: read no further than the context
            logging.getLogger("labeler.prm").warning(
                "%s: saved with max length %d, past its backbone's context of %d tokens: it reads at most %d (steps past them get no score)",
                directory, settings.max_length, context, context,
            )
            settings = replace(settings, max_length=context)
        prm = cls(backbone, tokenizer, settings, causal)
        if settings.format_version == FORMAT_VERSION:
            prm._load_score_rows(directory)
            return prm
        try:
            head = load_file(str(directory / HEAD_NAME))
            if prm.surprise_weight is not None:
                with torch.no_grad():
                    prm.surprise_weight.copy_(head.pop("surprise_weight"))
            prm.head.load_state_dict(head)
        except (OSError, RuntimeError, KeyError) as error:  # missing file or tensor, or a head of another size
            raise PRMLoadError(f"{directory}: cannot load the step-score head: {str(error).splitlines()[0]}") from error
        if prm.trajectory_head is not None:
            try:
                prm.trajectory_head.load_state_dict(load_file(str(directory / TRAJECTORY_HEAD_NAME)))
            except (OSError, RuntimeError) as error:
                raise PRMLoadError(f"{directory}: cannot load the trajectory head: {str(error).splitlines()[0]}") from error
        return prm

    def _load_score_rows(self, directory: Path) -> None:
        """The heads from the token classifier's score rows (format 2)."""
        tensors = read_tensors(directory, SCORE_PREFIX)
        heads = [self.head] + ([self.trajectory_head] if self.trajectory_head is not None else [])
        weight, bias = tensors.get("score.weight"), tensors.get("score.bias")
        hidden = self.head.in_features
        if weight is None or bias is None or tuple(weight.shape) != (len(heads), hidden) or tuple(bias.shape) != (len(heads),):
            found = ", ".join(f"{key} {tuple(t.shape)}" for key, t in sorted(tensors.items())) or "none"
            raise PRMLoadError(f"{directory}: the score head is not {len(heads)} x {hidden} with a bias (found: {found})")
        for row, head in enumerate(heads):
            head.load_state_dict({"weight": weight[row : row + 1].float(), "bias": bias[row : row + 1].float()})

    def save(self, directory: str | Path, state: dict[str, torch.Tensor] | None = None) -> None:
        """Format 2, a token classifier that transformers and vLLM load (the module's docstring), where
        transformers has one for the backbone with its head named `score`; format 1 otherwise. `state`: the
        PRM's whole state dict to write instead of the module's own (names as `state_dict()` spells them),
        what a sharded run gathers on process 0. LoRA adapters in it are written merged (labeler.prm.lora), into
        the dequantized base where it is 4-bit (labeler.prm.qlora)."""
        from huggingface_hub import save_torch_state_dict

        from labeler.prm.lora import merged_state
        from labeler.prm.qlora import dequantized_state

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        state = self.state_dict() if state is None else state
        if any(".lora_A." in name for name in state):
            state = merged_state(state, self._lora_scaling())
        else:  # a 4-bit base without adapters is written dequantized too (labeler.prm.qlora)
            state = dequantized_state(state)
        backbone = {name[len("backbone.") :]: tensor for name, tensor in state.items() if name.startswith("backbone.")}
        layout = None if self.step_surprise else token_classifier_layout(self.backbone.config)
        if layout is None:
            self._save_with_head_files(directory, state, backbone)
            return
        architecture, prefix = layout
        heads = ["head"] + (["trajectory_head"] if self.trajectory_head is not None else [])
        config = copy.deepcopy(self.backbone.config)
        config.architectures = [architecture]
        config.id2label = dict(enumerate(LABELS[: len(heads)]))
        config.label2id = {label: index for index, label in config.id2label.items()}
        config.save_pretrained(directory)
        tensors = {f"{prefix}.{name}": tensor.detach().cpu().contiguous() for name, tensor in backbone.items()}
        tensors["score.weight"] = torch.cat([state[f"{head}.weight"].detach().float().cpu() for head in heads]).contiguous()
        tensors["score.bias"] = torch.cat([state[f"{head}.bias"].detach().float().cpu() for head in heads]).contiguous()
        with _no_progress_bars():
            save_torch_state_dict(tensors, directory, max_shard_size="5GB")
        self.tokenizer.save_pretrained(directory)
        settings = replace(self.settings, format_version=FORMAT_VERSION)  # a PRM read from format 1 is written in 2
        (directory / PRM_CONFIG_NAME).write_text(json.dumps(asdict(settings), indent=1) + "\n")

    def _save_with_head_files(self, directory: Path, state: dict[str, torch.Tensor], backbone: dict[str, torch.Tensor]) -> None:
        """The heads in files of their own beside the model as transformers saves it: the whole causal LM
        (format 3, a step-surprise PRM) or the bare backbone (format 1)."""
        from safetensors.torch import save_file

        model, weights = self.backbone, backbone
        if self.step_surprise:
            model = self._causal_lm[0]
            output = next(name for name, module in model.named_modules() if module is self.output_layer)
            weights = {f"{model.base_model_prefix}.{name}": tensor for name, tensor in backbone.items()}
            weights |= {f"{output}.{name[len('output_layer.') :]}": t for name, t in state.items() if name.startswith("output_layer.")}
        with _no_progress_bars():
            model.save_pretrained(directory, state_dict={name: tensor.detach().cpu().contiguous() for name, tensor in weights.items()})
        self.tokenizer.save_pretrained(directory)
        head = {name: state[f"head.{name}"].detach().cpu().contiguous() for name in ("weight", "bias")}
        if self.step_surprise:
            head["surprise_weight"] = state["surprise_weight"].detach().float().cpu().contiguous()
        save_file(head, str(directory / HEAD_NAME))
        if self.trajectory_head is not None:
            trajectory = {name: state[f"trajectory_head.{name}"].detach().cpu().contiguous() for name in ("weight", "bias")}
            save_file(trajectory, str(directory / TRAJECTORY_HEAD_NAME))
        settings = replace(self.settings, format_version=SURPRISE_FORMAT_VERSION if self.step_surprise else 1)
        (directory / PRM_CONFIG_NAME).write_text(json.dumps(asdict(settings), indent=1) + "\n")

    def _lora_scaling(self) -> float:
        """The scale of the backbone's LoRA adapters (labeler.prm.lora): alpha / rank, one for all of them."""
        from peft.tuners.lora import LoraLayer

        from labeler.prm.lora import ADAPTER

        scales = {module.scaling[ADAPTER] for module in self.backbone.modules() if isinstance(module, LoraLayer)}
        if len(scales) != 1:
            raise ValueError(f"expected one LoRA scale in the backbone, found {sorted(scales)}")
        return scales.pop()

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
        spans: StepSpans | None = None,
    ) -> torch.Tensor:
        """The step head's logits (see step_and_trajectory_logits)."""
        return self.step_and_trajectory_logits(input_ids, attention_mask, position_ids, score_index, spans=spans)[0]

    def step_and_trajectory_logits(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        score_index: torch.Tensor | None = None,
        trajectory_index: torch.Tensor | None = None,
        spans: StepSpans | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The step head's and the trajectory head's logits, in float32, from one pass of the backbone;
        the second is None without a trajectory head. By default one logit per token, [batch, length]
        each; with `score_index` (flat indices into [batch, length]) only the step logits there,
        [steps], and with `trajectory_index` only the trajectory logits there, each head running at
        those tokens alone. A step-surprise PRM needs `score_index` and the `spans` of those steps.
        Packed rows (several solutions end to end) pass no attention mask and position ids that
        restart at 0 in each solution: transformers then keeps attention within each solution."""
        output = self.backbone(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False)
        hidden = output.last_hidden_state
        flat = hidden.reshape(-1, hidden.shape[-1])
        at_steps = hidden if score_index is None else flat.index_select(0, score_index)
        step = self.head(at_steps.float()).squeeze(-1)
        if self.step_surprise:
            if score_index is None or spans is None:
                raise ValueError("a step-surprise PRM scores steps at score_index, with their spans")
            step = step + self.surprise_weight * self.step_surprises(flat, input_ids.reshape(-1), spans, len(score_index))
        if self.trajectory_head is None:
            return step, None
        at_ends = hidden if trajectory_index is None else flat.index_select(0, trajectory_index)
        return step, self.trajectory_head(at_ends.float()).squeeze(-1)

    def step_surprises(self, flat_hidden: torch.Tensor, flat_ids: torch.Tensor, spans: StepSpans, steps: int) -> torch.Tensor:
        """Per scored step, the lowest log-probability the output layer gives a token of its span (the token
        read from the hidden state before it); 0 for a step with no tokens. [steps], float32."""
        targets = flat_ids.index_select(0, spans.tokens)
        chunks = math.ceil(len(targets) / LOG_PROB_CHUNK)
        if self.most_across_processes is not None:
            chunks = self.most_across_processes(chunks)
        log_probs = token_log_probs(self.output_layer, flat_hidden.index_select(0, spans.tokens - 1), targets, chunks)
        lowest = torch.zeros(steps, dtype=torch.float32, device=flat_hidden.device)
        return lowest.scatter_reduce(0, spans.owners, log_probs, reduce="amin", include_self=True)


@dataclass
class StepSpans:
    """The tokens of the scored steps' spans, as flat indices into [batch, length] (`tokens`), and for each
    which scored step it belongs to (`owners`, an index into score_index). A span never starts a row
    (the problem comes first), so the token before each is in its row."""

    tokens: torch.Tensor
    owners: torch.Tensor

    @classmethod
    def from_lists(cls, spans: list[tuple[int, int]], offsets: list[int] | None = None) -> StepSpans:
        """From each scored step's [start, end) in flat indices (plus its `offsets`, when given)."""
        tokens, owners = [], []
        for k, (start, end) in enumerate(spans):
            shift = offsets[k] if offsets is not None else 0
            tokens.extend(range(start + shift, end + shift))
            owners.extend([k] * (end - start))
        return cls(torch.tensor(tokens, dtype=torch.long), torch.tensor(owners, dtype=torch.long))

    def to(self, device) -> StepSpans:
        return StepSpans(self.tokens.to(device, non_blocking=True), self.owners.to(device, non_blocking=True))

    def pin_memory(self) -> StepSpans:
        return StepSpans(self.tokens.pin_memory(), self.owners.pin_memory())


LOG_PROB_CHUNK = 1024  # tokens whose vocabulary-wide logits are held at once


def token_log_probs(output_layer: nn.Module, hidden: torch.Tensor, targets: torch.Tensor, chunks: int | None = None) -> torch.Tensor:
    """log p(targets[i] | hidden[i]) under the output layer, in float32, a chunk of tokens at a time (with
    gradients, each chunk's logits are recomputed in the backward pass rather than kept: a vocabulary of
    150,000 would otherwise hold 0.6 MB per token). `chunks`: call the output layer this many times (the
    ones past the tokens on nothing), at least as many as the tokens need."""

    def chunk_log_probs(h: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        logits = output_layer(h).float()
        return logits.gather(1, t[:, None])[:, 0] - torch.logsumexp(logits, dim=-1)

    needed = math.ceil(len(targets) / LOG_PROB_CHUNK)
    if chunks is not None and chunks < needed:
        raise ValueError(f"{len(targets)} tokens need {needed} chunks of {LOG_PROB_CHUNK}, not {chunks}")
    pieces = []
    for start in range(0, LOG_PROB_CHUNK * (needed if chunks is None else chunks), LOG_PROB_CHUNK):
        h, t = hidden[start : start + LOG_PROB_CHUNK], targets[start : start + LOG_PROB_CHUNK]
        if torch.is_grad_enabled() and h.requires_grad:
            from torch.utils.checkpoint import checkpoint

            pieces.append(checkpoint(chunk_log_probs, h, t, use_reentrant=False))
        else:
            pieces.append(chunk_log_probs(h, t))
    return torch.cat(pieces) if pieces else hidden.new_zeros(0, dtype=torch.float32)


def _load_causal_lm(model: str, dtype: torch.dtype, trust_remote_code: bool, attention: str | None = None, quantized: dict | None = None):
    """The causal LM (its transformer and output layer) and the tokenizer; `quantized`: from_pretrained's quantization
    arguments (from_backbone's)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kernels = ({"attn_implementation": attention} if attention else {}) | (quantized or {})
    try:
        tokenizer = AutoTokenizer.from_pretrained(model, trust_remote_code=trust_remote_code)
        causal, loading = AutoModelForCausalLM.from_pretrained(
            model, dtype=dtype, trust_remote_code=trust_remote_code, output_loading_info=True, **kernels
        )
    except (OSError, ValueError, KeyError, ImportError) as error:
        raise PRMLoadError(f"cannot load model {model} as a causal LM (a step-surprise PRM reads its output layer): {str(error).splitlines()[0]}") from error
    output = causal.get_output_embeddings()
    if output is None:
        raise PRMLoadError(f"{model}: has no output layer to read token log-probabilities from; train with --no-step-surprise")
    names = {name for name, parameter in causal.named_parameters() if parameter is output.weight}
    if names & set(loading.get("missing_keys", ())):  # initialised at random: its log-probabilities would mean nothing
        raise PRMLoadError(
            f"{model}: its output layer is not in the checkpoint (a PRM saved as a token classifier?); give the base causal LM, "
            "or train with --no-step-surprise"
        )
    return causal, tokenizer


def _load_backbone(model: str, dtype: torch.dtype, trust_remote_code: bool, attention: str | None = None, token_classifier: bool = False,
                   quantized: dict | None = None):  # fmt: skip
    """The bare transformer and the tokenizer; from a saved token classifier (format 2), its base model. `quantized`:
    from_pretrained's quantization arguments (from_backbone's)."""
    from transformers import AutoModel, AutoModelForTokenClassification, AutoTokenizer

    kernels = ({"attn_implementation": attention} if attention else {}) | (quantized or {})
    try:
        tokenizer = AutoTokenizer.from_pretrained(model, trust_remote_code=trust_remote_code)
        # AutoModel gives the bare transformer of a causal LM checkpoint: no vocabulary-sized output layer.
        if token_classifier:
            classifier = AutoModelForTokenClassification.from_pretrained(model, dtype=dtype, trust_remote_code=trust_remote_code, **kernels)
            backbone = classifier.base_model  # the heads are read apart, in float32 (ProcessRewardModel._load_score_rows)
        else:
            backbone = AutoModel.from_pretrained(model, dtype=dtype, trust_remote_code=trust_remote_code, **kernels)
    except (OSError, ValueError, KeyError, ImportError) as error:  # ImportError: flash_attention_2 without flash-attn
        raise PRMLoadError(f"cannot load model {model}: {str(error).splitlines()[0]}") from error
    return backbone, tokenizer


def declared_context(config) -> int | None:
    """The tokens a model's config says it was built for (its text config's max_position_embeddings), or None."""
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    value = getattr(text_config, "max_position_embeddings", None)
    return value if isinstance(value, int) and value > 0 else None


def _hidden_size(config) -> int:
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    for name in ("hidden_size", "d_model", "n_embd"):
        if getattr(text_config, name, None):
            return getattr(text_config, name)
    raise PRMLoadError(f"cannot find the hidden size of {type(config).__name__}")


def read_settings(directory: Path) -> PRMSettings:
    """A saved PRM's prm.json; PRMLoadError when it is missing, unreadable or of a format this version does not read."""
    settings_path = Path(directory) / PRM_CONFIG_NAME
    if not settings_path.is_file():
        raise PRMLoadError(f"{directory}: not a saved PRM (no {PRM_CONFIG_NAME}); pass a checkpoint folder such as OUT/best")
    try:
        settings = PRMSettings(**json.loads(settings_path.read_text()))
    except (ValueError, TypeError) as error:
        raise PRMLoadError(f"{settings_path}: unreadable PRM settings: {error}") from error
    if settings.format != FORMAT or settings.format_version > SURPRISE_FORMAT_VERSION or settings.step_surprise != (settings.format_version == SURPRISE_FORMAT_VERSION):
        raise PRMLoadError(f"{directory}: PRM format {settings.format} v{settings.format_version} is not one this version reads")
    return settings


def token_classifier_layout(config) -> tuple[str, str] | None:
    """(architecture, prefix of the backbone's weights) of the backbone's *ForTokenClassification in
    transformers, when it has one whose head is a Linear named `score` (what vLLM converts too); None
    otherwise (no such class, a model with remote code, a head named `classifier` as GPT-2's)."""
    from transformers import AutoModelForTokenClassification
    from transformers.models.auto.modeling_auto import MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES

    name = MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES.get(getattr(config, "model_type", None))
    if name is None:
        return None
    try:
        with torch.device("meta"):  # no memory: only the layout is read (from a copy: from_config writes to its config)
            classifier = AutoModelForTokenClassification.from_config(copy.deepcopy(config))
    except Exception:  # whatever a model class raises on construction: format 1 saves it all the same
        return None
    prefix = getattr(classifier, "base_model_prefix", "")
    head = getattr(classifier, "score", None)
    base = getattr(classifier, prefix, None) if prefix else None
    if not isinstance(base, nn.Module) or not isinstance(head, nn.Linear) or head.bias is None:
        return None
    return name, prefix


def read_tensors(directory: Path, prefix: str) -> dict[str, torch.Tensor]:
    """The tensors whose names start with `prefix`, from a folder's model.safetensors or its shards."""
    from safetensors import safe_open

    index = directory / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text()).get("weight_map", {})
        files = sorted({file for key, file in weight_map.items() if key.startswith(prefix)})
    else:
        files = ["model.safetensors"] if (directory / "model.safetensors").is_file() else []
    tensors = {}
    for file in files:
        with safe_open(str(directory / file), framework="pt") as weights:
            tensors |= {key: weights.get_tensor(key) for key in weights.keys() if key.startswith(prefix)}
    return tensors


@contextlib.contextmanager
def _no_progress_bars():
    """huggingface_hub and transformers draw a bar per save on stderr; a training run saves often."""
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    from transformers.utils import logging as transformers_logging

    was_disabled, transformers_was = are_progress_bars_disabled(), transformers_logging.is_progress_bar_enabled()
    disable_progress_bars()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if not was_disabled:
            enable_progress_bars()
        if transformers_was:
            transformers_logging.enable_progress_bar()

"""Tiny random PRMs in the published formats of public PRMs, built locally for the adapter tests.

Each is a random 2-layer model of the public PRM's architecture with a byte-level BPE tokenizer
trained here, carrying the tokens its format needs:

- `build_math_shepherd`: a Mistral causal LM; the tokenizer adds a BOS and knows the "ки" tag.
- `build_rlhflow`: a Llama causal LM with a Llama-3-style chat template.
- `build_qwen_prm`: a Qwen2 backbone with the published two-class head (score.0, score.2), saved
  as Qwen2ForProcessRewardModel in two safetensors shards with an index, declaring remote code
  (modeling_prm.py, written here) as the published checkpoint does; `head="linear"` gives a head
  of another shape that only its remote code can run.

Same seed, same weights. Nothing is downloaded.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from tests.tiny_model import _corpus

LLAMA3_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] + '<|eot_id|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
QWEN_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Remote code of the tiny Qwen PRM with a one-layer head: what `trust_remote_code` runs.
REMOTE_MODELING = """
from dataclasses import dataclass

import torch
from torch import nn
from transformers import PreTrainedModel, Qwen2Config, Qwen2Model
from transformers.utils import ModelOutput


@dataclass
class StepLogits(ModelOutput):
    logits: torch.Tensor = None


class Qwen2ForProcessRewardModel(PreTrainedModel):
    config_class = Qwen2Config
    base_model_prefix = "model"

    def __init__(self, config):
        super().__init__(config)
        self.model = Qwen2Model(config)
        self.score = nn.Linear(config.hidden_size, 2)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask, **kwargs).last_hidden_state
        return StepLogits(logits=self.score(hidden))
"""


def build_tokenizer(path: Path, *, special: list[str], added: tuple[str, ...] = (), bos: str | None, eos: str, pad: str,
                    chat_template: str | None, bos_in_encoding: bool = False, seed: int = 0):  # fmt: skip
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    bpe.train_from_iterator(_corpus(random.Random(seed), lines=150), trainer)
    if bos_in_encoding:  # as Llama and Mistral tokenizers do: a BOS first unless add_special_tokens=False
        bpe.post_processor = processors.TemplateProcessing(single=f"{bos} $A", special_tokens=[(bos, bpe.token_to_id(bos))])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token=bos, eos_token=eos, pad_token=pad, model_max_length=1024)
    if added:
        tokenizer.add_tokens(list(added))
    if chat_template:
        tokenizer.chat_template = chat_template
    tokenizer.save_pretrained(path)
    return tokenizer


def _small(config_class, tokenizer, **extra):
    return config_class(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **extra,
    )


def build_math_shepherd(path: Path, seed: int = 0) -> Path:
    import torch
    from transformers import MistralConfig, MistralForCausalLM

    path = Path(path)
    tokenizer = build_tokenizer(
        path, special=["<s>", "</s>"], added=("ки",), bos="<s>", eos="</s>", pad="</s>", chat_template=None, bos_in_encoding=True
    )
    torch.manual_seed(seed)
    MistralForCausalLM(_small(MistralConfig, tokenizer, head_dim=32, tie_word_embeddings=False)).save_pretrained(path)
    return path


def build_rlhflow(path: Path, seed: int = 1) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    path = Path(path)
    special = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    tokenizer = build_tokenizer(
        path, special=special, bos="<|begin_of_text|>", eos="<|eot_id|>", pad="<|end_of_text|>", chat_template=LLAMA3_TEMPLATE
    )
    torch.manual_seed(seed)
    LlamaForCausalLM(_small(LlamaConfig, tokenizer, tie_word_embeddings=False)).save_pretrained(path)
    return path


def build_qwen_prm(path: Path, head: str = "published", seed: int = 2):
    """The folder, and (backbone, head) as built, for manual forward passes in the tests."""
    import torch
    from safetensors.torch import save_file
    from torch import nn
    from transformers import Qwen2Config, Qwen2Model

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<extra_0>"]
    tokenizer = build_tokenizer(path, special=special, bos=None, eos="<|im_end|>", pad="<|endoftext|>", chat_template=QWEN_TEMPLATE)
    config = _small(Qwen2Config, tokenizer, tie_word_embeddings=False)
    torch.manual_seed(seed)
    backbone = Qwen2Model(config).eval()
    if head == "published":
        score = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))
    else:
        score = nn.Linear(64, 2)
    tensors = {f"model.{key}": value.contiguous() for key, value in backbone.state_dict().items()}
    tensors |= {f"score.{key}": value.detach().contiguous() for key, value in score.state_dict().items()}
    # two shards and an index, as a large checkpoint is stored; the head in the second shard
    backbone_keys = sorted(key for key in tensors if not key.startswith("score."))
    half = len(backbone_keys) // 2
    shards = {
        "model-00001-of-00002.safetensors": backbone_keys[:half],
        "model-00002-of-00002.safetensors": backbone_keys[half:] + sorted(key for key in tensors if key.startswith("score.")),
    }
    weight_map = {}
    for file, keys in shards.items():
        save_file({key: tensors[key] for key in keys}, str(path / file), metadata={"format": "pt"})
        weight_map |= dict.fromkeys(keys, file)
    (path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    document = config.to_dict() | {
        "architectures": ["Qwen2ForProcessRewardModel"],
        "auto_map": {"AutoModel": "modeling_prm.Qwen2ForProcessRewardModel"},
    }
    (path / "config.json").write_text(json.dumps(document, indent=1))
    (path / "modeling_prm.py").write_text(REMOTE_MODELING)
    return path, backbone, score

"""The world model's tokenizer: byte-level BPE trained with `tokenizers` on the world's own texts.

Each digit is a token (with the space before it: the model does arithmetic digit by digit), and no token spans a newline,
so a prompt that ends with the step separator or the chat template's newline tokenizes as the same
text does inside a training sequence. The labeler's instruction, in every prompt, is one token."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from labeler.labeling.prompts import INSTRUCTION

__all__ = ["IM_START", "IM_END", "EOT", "CHAT_TEMPLATE", "train_tokenizer"]

IM_START, IM_END, EOT = "<|im_start|>", "<|im_end|>", "<|endoftext|>"

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def train_tokenizer(texts: Iterable[str], path: Path, vocab_size: int = 1024):
    """Train on `texts`, save as a Hugging Face tokenizer folder at `path`, and return it
    (a PreTrainedTokenizerFast with the chat template)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex("\n"), behavior="isolated"),
        pre_tokenizers.Split(Regex(r" ?[0-9]"), behavior="isolated"),  # one digit a token, with its space
        pre_tokenizers.ByteLevel(add_prefix_space=False),
    ])  # fmt: skip
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOT, IM_START, IM_END],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # all 256 bytes: any text encodes
        show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer)
    bpe.add_tokens([AddedToken(INSTRUCTION, normalized=False)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token=IM_START, eos_token=IM_END, pad_token=EOT, model_max_length=1024)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(path)
    return tokenizer

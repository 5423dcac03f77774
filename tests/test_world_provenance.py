"""What a world build and a world bench run record of the environment their figures depend on (issue 54, item 5)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from labeler.world.provenance import REFERENCE_BUILDS, differs_from_reference, environment

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def test_the_environment_names_the_libraries_the_commit_and_the_threads():
    import torch
    import transformers

    found = environment(threads=3)
    assert found["threads"] == 3 and found["cores"] >= 1 and found["cpu"]
    assert found["libraries"]["torch"] == torch.__version__.split("+")[0] or found["libraries"]["torch"].startswith(torch.__version__.split("+")[0])
    assert found["libraries"]["transformers"] == transformers.__version__ and found["torch"] == found["libraries"]["torch"]
    # this checkout is a git repository: its commit, marked when tracked files differ from it
    assert re.fullmatch(r"[0-9a-f]{40}(\+changes)?", found["commit"])


def _record(completer: int, policy: int, problems: int = 200) -> dict:
    return {"held_out_greedy_accuracy": {"correct": completer, "problems": problems},
            "policy_held_out_greedy_accuracy": {"correct": policy, "problems": problems},
            "built_on": {"cpu": "Some CPU", "torch": "2.13.0"}}  # fmt: skip


def test_a_build_with_other_accuracies_than_the_reference_says_so_in_one_line():
    name, reference = next(iter(REFERENCE_BUILDS.items()))
    folder = Path("/cache/models") / name
    assert differs_from_reference(folder, _record(reference["completer"], reference["policy"])) is None
    line = differs_from_reference(folder, _record(146, 96))
    assert line and "\n" not in line and "146/200" in line and "not the reference world" in line and "Some CPU" in line
    assert differs_from_reference(Path("/cache/models/world-unknown"), _record(1, 1)) is None  # no reference known
    assert differs_from_reference(folder, None) is None


def test_the_world_bench_trains_its_prms_on_pinned_threads_and_samples_on_the_default(monkeypatch):
    import bench.world as world

    seen = []

    def run(command, **kwargs):
        seen.append((command, kwargs.get("env")))
        return subprocess.CompletedProcess(command, 0, stdout="{}")

    monkeypatch.setattr(world.subprocess, "run", run)
    world.subprocess_runner(["train", "--labels", "x"])
    world.subprocess_runner(["label", "--input", "x"])
    assert seen[0][1]["OMP_NUM_THREADS"] == str(world.TRAIN_THREADS)
    assert seen[1][1] is None  # sampling keeps the engine's own thread setting


def test_a_record_without_its_accuracies_is_not_called_another_world():
    """A partial or hand-edited marker says nothing of the build's accuracies: no claim either way (the report
    prints '?' for them), never 'None/None is not the reference'."""
    name = next(iter(REFERENCE_BUILDS))
    folder = Path("/cache/models") / name
    assert differs_from_reference(folder, {"built_on": {"cpu": "Some CPU"}}) is None
    assert differs_from_reference(folder, {"held_out_greedy_accuracy": {"correct": None, "problems": 200}}) is None

"""The kept PRM scores of best-of-N's candidates (labeler/decoding/prm_scores.py) come back only for the same PRM:
the same bytes in its folder, whatever its spec spells it, the same precision and max length."""

import os
from pathlib import Path

import pytest
import torch

from labeler.decoding.candidates import Candidate
from labeler.decoding.prm_scores import candidate_step_scores, scoring_settings
from labeler.prm.model import ProcessRewardModel
from labeler.store.location import OutputLocation

STEPS = ("2 + 2 = 4.", "The answer is: 4")
CANDIDATES = [Candidate("p", f"s{i}", "What is 2 + 2?", "4", STEPS, True, "4", None, 0, False) for i in range(2)]


class Scorer:
    name = "fake"

    def step_scores(self, solutions):
        return [[0.5] * len(s.steps) for s in solutions]


@pytest.fixture
def scored(tmp_path):
    """score(spec, **settings) -> whether the PRM had to be loaded (the kept scores did not serve)."""
    location = OutputLocation(tmp_path / "out")

    def score(spec, precision="fp32", max_length=None):
        loads = []
        candidate_step_scores(
            location, spec, CANDIDATES, lambda: loads.append(spec) or Scorer(), scoring=scoring_settings(precision, max_length)
        )
        return bool(loads)

    return score


def save_checkpoint(tiny_model_dir, path: Path, seed: int) -> None:
    torch.manual_seed(seed)
    ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=384, target="soft").save(path)


def keep_times(path: Path):
    """Every file's modification time now; calling the result puts them back (a copy that keeps times, `cp -p`)."""
    times = {f: (f.stat().st_atime_ns, f.stat().st_mtime_ns) for f in path.rglob("*") if f.is_file()}
    return lambda: [os.utime(f, ns=t) for f, t in times.items()]


@pytest.mark.parametrize("prefix", ["", "checkpoint:"])
def test_a_retrained_checkpoint_misses_even_with_the_same_sizes_and_times(prefix, tiny_model_dir, tmp_path, scored):
    run = tmp_path / "run"
    save_checkpoint(tiny_model_dir, run / "best", seed=0)
    spec = prefix + str(run)
    assert scored(spec) and not scored(spec)  # scored once, then kept
    restore = keep_times(run / "best")
    sizes = {f.name: f.stat().st_size for f in (run / "best").iterdir()}
    save_checkpoint(tiny_model_dir, run / "best", seed=1)  # retrained: other weights, the same files and sizes
    restore()
    assert {f.name: f.stat().st_size for f in (run / "best").iterdir()} == sizes
    assert scored(spec) and not scored(spec)


@pytest.mark.parametrize("kind", ["qwen-prm", "math-shepherd", "rlhflow"])
def test_a_public_prm_folder_is_known_by_its_bytes(kind, tmp_path, scored):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"a": 1}')
    (folder / "model.safetensors").write_bytes(b"weights-1")
    spec = f"{kind}:{folder}"
    assert scored(spec) and not scored(spec)
    restore = keep_times(folder)
    (folder / "model.safetensors").write_bytes(b"weights-2")
    restore()
    assert scored(spec) and not scored(spec)


def test_precision_and_max_length_are_part_of_the_key(tiny_model_dir, tmp_path, scored):
    save_checkpoint(tiny_model_dir, tmp_path / "prm", seed=0)
    spec = str(tmp_path / "prm")
    assert scored(spec) and not scored(spec)
    assert scored(spec, precision="bf16") and not scored(spec, precision="bf16")
    assert scored(spec, precision="bf16", max_length=64) and not scored(spec, precision="bf16", max_length=64)
    assert scored(spec)  # back to the first settings: scored again (one file per PRM spec holds the latest)


def test_a_folder_overwritten_while_scoring_is_scored_again(tmp_path, monkeypatch):
    """The scores are kept under the fingerprint of the bytes taken before loading: a best/ written during scoring
    (training still running) misses next time; and a miss reads the folder once."""
    import labeler.decoding.prm_scores as prm_scores

    prm = tmp_path / "prm"
    prm.mkdir()
    (prm / "config.json").write_text("{}")
    (prm / "model.safetensors").write_bytes(b"old weights")

    class Overwriting(Scorer):
        def step_scores(self, solutions):
            (prm / "model.safetensors").write_bytes(b"new weights")
            return super().step_scores(solutions)

    digests = []
    real_digest = prm_scores.folder_digest
    monkeypatch.setattr(prm_scores, "folder_digest", lambda folder: digests.append(folder) or real_digest(folder))
    location = OutputLocation(tmp_path / "out")
    spec = f"qwen-prm:{prm}"
    candidate_step_scores(location, spec, CANDIDATES, Overwriting, scoring=scoring_settings("fp32"))
    assert len(digests) == 1
    loads = []
    candidate_step_scores(location, spec, CANDIDATES, lambda: loads.append(1) or Scorer(), scoring=scoring_settings("fp32"))
    assert loads == [1]


def test_scores_of_an_older_adapter_version_are_scored_again(tmp_path, scored, monkeypatch):
    """An adapter that reads a PRM otherwise (Math-Shepherd's token ids as the card takes them) bumps its
    SCORING_VERSION: the same model's kept scores are stale."""
    from labeler.prm import adapters

    assert adapters.SCORING_VERSIONS["math-shepherd"] >= 2  # bumped with the token ids as the card reads them
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights")
    spec = f"math-shepherd:{folder}"
    assert scored(spec) and not scored(spec)
    monkeypatch.setitem(adapters.SCORING_VERSIONS, "math-shepherd", adapters.SCORING_VERSIONS["math-shepherd"] + 1)
    assert scored(spec) and not scored(spec)
    assert scored(f"rlhflow:{folder}")  # another adapter of the same bytes is another key

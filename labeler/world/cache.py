"""The world model in the cache: trained once (`make world`), then loaded like the embedded model.

The folder's name carries a fingerprint of its settings, so a changed setting trains a new model
beside the old one. The folder appears whole or not at all (trained in a temporary folder, then
renamed), and a file lock keeps two processes from training it at once."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from labeler.world.accuracy import greedy_accuracy
from labeler.world.problems import make_problems
from labeler.world.provenance import environment
from labeler.world.training import POLICY_FOLDER, WorldModelSettings, train_world_model

__all__ = ["HELD_OUT_SPLITS", "build_once", "models_cache_dir", "world_model_dir", "ensure_world_model", "held_out_texts"]

# Bumped whenever the problems, the prompt, the tokenizer or the training change: a new folder, trained
# anew (tests/test_world.py pins the problems and the user turn to this version; the chat template and the
# tokenizer's and trainer's code need the bump by hand).
WORLD_VERSION = 2  # 2: one run gives the policy (policy/) and the completer
MARKER = "world_model.json"  # written last: the folder is complete
# The splits the bench draws from, and how many problems of each the training must never see.
HELD_OUT_SPLITS = {"label": 2000, "test": 2000, "bon": 2000}


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def models_cache_dir(cache_dir: Path | None = None) -> Path:
    """<cache>/models, where the embedded model (workers/embedded_model.py) and the world model live:
    `cache_dir`, else $PRM_LABELER_CACHE, else $XDG_CACHE_HOME/prm-labeler, else ~/.cache/prm-labeler."""
    if cache_dir is None:
        if os.environ.get("PRM_LABELER_CACHE"):
            cache_dir = Path(os.environ["PRM_LABELER_CACHE"])
        elif os.environ.get("XDG_CACHE_HOME"):
            cache_dir = Path(os.environ["XDG_CACHE_HOME"]) / "prm-labeler"
        else:
            cache_dir = Path.home() / ".cache" / "prm-labeler"
    return Path(cache_dir).expanduser() / "models"


def world_model_dir(settings: WorldModelSettings = WorldModelSettings(), cache_dir: Path | None = None) -> Path:
    """<cache>/models/world-<fingerprint of the version and settings>, beside the embedded model."""
    fingerprint = hashlib.sha256(json.dumps([WORLD_VERSION, asdict(settings)], sort_keys=True).encode()).hexdigest()[:10]
    return models_cache_dir(cache_dir) / f"world-{fingerprint}"


def held_out_texts(seed: int = 0) -> set[str]:
    """The problem texts of the bench's splits, kept out of training."""
    return {p.text for split, n in HELD_OUT_SPLITS.items() for p in make_problems(n, split, seed)}


def ensure_world_model(settings: WorldModelSettings = WorldModelSettings(), cache_dir: Path | None = None,
                       log: Callable[[str], None] = _log, accuracy_problems: int = 200) -> Path:  # fmt: skip
    """The folder of the trained world model (the completer; the policy in its policy/), training it first
    when the cache has none. The greedy accuracy of both on `accuracy_problems` held-out problems is
    measured after training, logged and recorded in the marker, with the machine, libraries, commit and threads
    that built them (labeler/world/provenance.py: builds are deterministic on one machine; another CPU sums in
    another order)."""
    target = world_model_dir(settings, cache_dir)

    def train(tmp: Path) -> None:
        log(f"training the world model into {target} (once)")
        start = time.monotonic()
        train_world_model(tmp, settings, held_out=held_out_texts(settings.seed), log=log)
        trained = time.monotonic() - start
        problems = make_problems(accuracy_problems, "test", settings.seed)
        accuracy, policy_accuracy = greedy_accuracy(tmp, problems), greedy_accuracy(tmp / POLICY_FOLDER, problems)
        record = {"world_version": WORLD_VERSION, "settings": asdict(settings), "training_seconds": round(trained), "held_out_greedy_accuracy": accuracy,
                  "policy_held_out_greedy_accuracy": policy_accuracy, "built_on": environment(settings.threads)}  # fmt: skip
        (tmp / MARKER).write_text(json.dumps(record, indent=1) + "\n")
        for path in tmp.rglob("*"):  # readable by all, like the folder (the policy's folder within it too)
            path.chmod(0o755 if path.is_dir() else 0o644)
        log(f"world model ready in {time.monotonic() - start:.0f} s ({trained:.0f} s training): {target}")
        log(f"world model: greedy accuracy from the problem on held-out problems: completer {accuracy['correct']}/{accuracy['problems']}, "
            f"policy {policy_accuracy['correct']}/{policy_accuracy['problems']}")

    return build_once(target, MARKER, train)


def build_once(target: Path, marker: str, build: Callable[[Path], None]) -> Path:
    """`target`, unless it holds `marker` already, first built by `build(folder)` into a temporary folder
    beside it that is then renamed into place: it appears whole or not at all (`build` writes the
    marker last). A file lock keeps two processes from building it at once. Returns `target`."""
    if (target / marker).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)

    from filelock import FileLock

    with FileLock(str(target) + ".lock"):
        if (target / marker).exists():  # another process built it while we waited
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            build(tmp)
            tmp.chmod(0o755)  # mkdtemp makes it private
            if target.exists():  # a leftover without marker, e.g. copied in by hand
                shutil.rmtree(target)
            os.replace(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return target

"""The training run's folder: `best/` and `last/` PRM checkpoints, each replaced atomically.

`last/` also holds training_state.pt (optimizer, step counters, random state, best metric), from
which a rerun resumes. A checkpoint is written to a hidden folder, then swapped in by renames; a
crash mid-swap leaves the previous checkpoint under `.NAME.old`, which `checkpoint_dir` finds.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch

from labeler.prm.model import ProcessRewardModel

BEST, LAST = "best", "last"
STATE_NAME = "training_state.pt"
CONFIG_NAME = "train_config.json"
METRICS_NAME = "metrics.jsonl"


def checkpoint_dir(run_dir: Path, name: str) -> Path | None:
    for candidate in (run_dir / name, run_dir / f".{name}.old"):
        if (candidate / "prm.json").is_file():
            return candidate
    return None


def save_checkpoint(run_dir: Path, name: str, prm: ProcessRewardModel, state: dict | None = None, model_state: dict | None = None,
                    started: bool = False) -> Path:  # fmt: skip
    """`model_state`: the PRM's weights to write instead of its own (a sharded run's, gathered on process 0);
    `started`: the hidden folder was made by `start_checkpoint` and holds files of other writers already."""
    final = run_dir / name
    temp, old = staging_dir(run_dir, name), run_dir / f".{name}.old"
    if not started:
        start_checkpoint(run_dir, name)
    prm.save(temp, model_state)
    if state is not None:
        torch.save(state, temp / STATE_NAME)
    if final.exists():
        shutil.rmtree(old, ignore_errors=True)
        final.rename(old)
    temp.rename(final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def staging_dir(run_dir: Path, name: str) -> Path:
    """Where checkpoint `name` is written before it is swapped in."""
    return run_dir / f".{name}.tmp"


def start_checkpoint(run_dir: Path, name: str) -> Path:
    """An empty staging folder for checkpoint `name` (a leftover of a crashed write removed)."""
    temp = staging_dir(run_dir, name)
    shutil.rmtree(temp, ignore_errors=True)
    temp.mkdir(parents=True)
    return temp


def load_training_state(run_dir: Path) -> dict | None:
    last = checkpoint_dir(run_dir, LAST)
    if last is None or not (last / STATE_NAME).is_file():
        return None
    # Only tensors and plain containers are stored: no arbitrary unpickling. Memory-mapped: every process of a
    # sharded run reads the optimizer's full state, and shares the pages instead of holding a copy each.
    return torch.load(last / STATE_NAME, map_location="cpu", weights_only=True, mmap=True)


def read_saved_config(run_dir: Path) -> dict | None:
    path = run_dir / CONFIG_NAME
    return json.loads(path.read_text()) if path.is_file() else None


def write_config(run_dir: Path, config: dict) -> None:
    (run_dir / CONFIG_NAME).write_text(json.dumps(config, indent=1) + "\n")


def append_metrics(run_dir: Path, record: dict) -> None:
    with open(run_dir / METRICS_NAME, "a") as handle:
        handle.write(json.dumps(record) + "\n")

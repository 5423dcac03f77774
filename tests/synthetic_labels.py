"""Labels shards written by hand for the PRM tests: the labels table's schema, made-up content.

`arithmetic_rows` makes solutions whose steps state sums such as "3 + 4 = 7."; a step is right
exactly when its sum is, so step correctness is visible in the text. Like PRM800K trajectories,
a solution with a wrong step ends at it.
"""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from schemas import LABELS_SCHEMA, SCHEMA_VERSION
from schemas.tables import first_error

# Small on purpose: a tiny model learns these sums from scratch in a few hundred CPU steps. The
# problem text holds no digits, so only the step's own numbers decide its label.
PROBLEM_TEXT = "Add the numbers."
MAX_TERM = 3
MAX_STEPS = 4
WRONG_BY = (-2, -1, 1, 2)


def labels_row(
    problem_id: str, solution_id: str, problem: str, steps: list[str], soft: list[float | None], hard: list[bool | None], **extra
) -> dict:
    n_rollouts = [4 if s is not None else 0 for s in soft]
    n_correct = [round(s * 4) if s is not None else 0 for s in soft]
    methods = ["rollouts" if s is not None else ("inferred" if h is not None else "unlabelled") for s, h in zip(soft, hard)]
    row = {
        "problem_id": problem_id,
        "solution_id": solution_id,
        "problem": problem,
        "reference_answer": "0",
        "steps": steps,
        "soft_labels": soft,
        "hard_labels": hard,
        "n_correct": n_correct,
        "n_rollouts": n_rollouts,
        "n_truncated": [0] * len(steps),
        "n_timeouts": [0] * len(steps),
        "label_method": methods,
        "unlabelled_reason": ["synthetic" if method == "unlabelled" else None for method in methods],
        "first_error": first_error(hard),
        "thinking_steps": 0,
        "trajectory_verdict": "incorrect" if False in hard else "correct",
        "trajectory_label": False not in hard,
        "generated_tokens": 10 * sum(n_rollouts),
        "solution_tokens": 0,
        "solution_truncated": False,
        "row_index": 0,
        "unit_id": "unit-0",
        "source": "synthetic",
        "model": "none",
        "strategy": "exhaustive",
        "seed": 0,
        "config_hash": "synthetic",
        "schema_version": SCHEMA_VERSION,
        "label_source": "monte-carlo",
    }
    row.update(extra)
    return row


def write_labels(directory: Path, rows: list[dict], shard_size: int = 64) -> Path:
    """Shards `labels/part-NNNNN.parquet` under `directory`, as a job writes them."""
    folder = Path(directory) / "labels"
    folder.mkdir(parents=True, exist_ok=True)
    for index, start in enumerate(range(0, len(rows), shard_size)):
        table = pa.Table.from_pylist(rows[start : start + shard_size], schema=LABELS_SCHEMA)
        pq.write_table(table, folder / f"part-{index:05d}.parquet")
    return Path(directory)


def arithmetic_rows(problems: int, solutions_per_problem: int, seed: int, prefix: str = "p") -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for p in range(problems):
        problem_id = f"{prefix}{p}"
        for s in range(solutions_per_problem):
            n_steps = rng.randint(1, MAX_STEPS)
            wrong = rng.random() < 0.5
            steps, soft, hard = [], [], []
            for i in range(n_steps):
                a, b = rng.randint(1, MAX_TERM), rng.randint(1, MAX_TERM)
                is_wrong = wrong and i == n_steps - 1
                c = a + b + (rng.choice(WRONG_BY) if is_wrong else 0)
                steps.append(f"{a} + {b} = {c}.")
                soft.append(0.0 if is_wrong else rng.choice([0.75, 1.0]))
                hard.append(not is_wrong)
            rows.append(labels_row(problem_id, f"{problem_id}-s{s}", PROBLEM_TEXT, steps, soft, hard))
    return rows

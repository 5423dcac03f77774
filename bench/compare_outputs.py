"""Compare two labeling outputs column by column: do two runs (two versions of the code, two
executors, ...) give the same labels and rollouts?

    .venv/bin/python bench/compare_outputs.py OUT_A OUT_B [OUT_A2 OUT_B2 ...]

Rows are matched by solution_id (and step_index, rollout_index for rollouts). Prints one line per
table and IDENTICAL or DIFFERENT; exit code 0 only when identical.
"""

from __future__ import annotations

import sys

import pyarrow.parquet as pq

KEYS = {"labels": ["solution_id"], "rollouts": ["solution_id", "step_index", "rollout_index"]}


def compare(first: str, second: str) -> bool:
    same = True
    for table, keys in KEYS.items():
        a = pq.read_table(f"{first}/{table}").sort_by([(key, "ascending") for key in keys])
        b = pq.read_table(f"{second}/{table}").sort_by([(key, "ascending") for key in keys])
        differing = [name for name in a.column_names if name in b.column_names and a.column(name).to_pylist() != b.column(name).to_pylist()]
        matches = a.column_names == b.column_names and a.num_rows == b.num_rows and not differing
        print(f"{first} vs {second} {table}: rows {a.num_rows}/{b.num_rows}, {len(a.column_names)} columns, differing: {differing or 'none'}")
        same &= matches
    return same


def main(paths: list[str]) -> int:
    if len(paths) < 2 or len(paths) % 2:
        print(__doc__, file=sys.stderr)
        return 2
    same = all([compare(paths[i], paths[i + 1]) for i in range(0, len(paths), 2)])
    print("IDENTICAL" if same else "DIFFERENT")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

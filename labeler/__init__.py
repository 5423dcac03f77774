"""prm-labeler: Math-Shepherd-style step labels for Process Reward Models."""

__version__ = "0.1.0"

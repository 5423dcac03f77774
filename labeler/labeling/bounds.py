"""The range a numeric setting must lie in, declared with the setting: `setting(0.7, at_least=0)`,
`setting(1.0, above=0, at_most=1)` (see labeler/labeling/config.py, `setting` and `check_numbers`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bounds:
    """low/high: the ends (None: unbounded on that side); an open end is itself outside the range."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    @classmethod
    def of(cls, *, at_least=None, above=None, at_most=None, below=None) -> Bounds | None:
        """The range `setting(...)`'s keywords spell, or None when none is given."""
        if at_least is not None and above is not None or at_most is not None and below is not None:
            raise TypeError("give at_least or above, and at_most or below, not both")
        if at_least is None and above is None and at_most is None and below is None:
            return None
        low, high = (above if at_least is None else at_least), (below if at_most is None else at_most)
        return cls(low, high, low_open=above is not None, high_open=below is not None)

    def __contains__(self, value: float) -> bool:
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        if self.high is not None and (value >= self.high if self.high_open else value > self.high):
            return False
        return True

    def __str__(self) -> str:
        """How the range reads in a message or --help: ">= 1", "> 0", "in (0, 1]"."""
        if self.high is None:
            return f"{'>' if self.low_open else '>='} {self.low}"
        if self.low is None:
            return f"{'<' if self.high_open else '<='} {self.high}"
        return f"in {'(' if self.low_open else '['}{self.low}, {self.high}{')' if self.high_open else ']'}"

"""Telling a broken reward setup from occasional gaps, in the RL reward paths (verl's compute_score, the
OpenRLHF server). One sample whose reward cannot be measured gets its own outcome (unmeasured_score) and the
batch goes on; but when the first SETUP_WINDOW samples a reward worker scores all have no reward, for the same
reason (a dataset without extra_info['question'], labels never sent, a PRM length limit below every response),
that is the setup's fault: training would go on at a constant reward and learn nothing, so the caller stops
with the reason instead. Once one of the first samples is measured, or they were unmeasured for different
reasons, the setup is taken as working and every later gap is per sample.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from typing import Sequence

SETUP_WINDOW = 32  # the first samples a worker scores that decide whether its setup can measure any reward


def reason_kind(reason: str) -> str:
    """A reason's kind: its words before the first '(' or ':' (the counts by reason use it too)."""
    return re.split(r"[(:]", reason)[0].strip()


class FirstSamples:
    """The first `size` samples of one reward worker (thread-safe): `add` each call's samples' outcomes."""

    def __init__(self, size: int = SETUP_WINDOW):
        self.size = size
        self.seen = 0
        self.reasons: Counter[str] = Counter()  # by kind; the first full reason of each kind kept for the message
        self.examples: dict[str, str] = {}
        self.working = size <= 0  # decided: some early sample was measured, or the early gaps had different reasons
        self.lock = threading.Lock()

    def add(self, reasons: Sequence[str | None]) -> str | None:
        """`reasons`: per sample, None where it was measured, else why not. The reason (in full, of its first sample)
        when the first `size` samples were all unmeasured for one kind of reason: the caller stops; else None."""
        with self.lock:
            if self.working or any(reason is None for reason in reasons):  # a sample of this call measured, even past the window
                self.working = True
                return None
            for reason in reasons:
                if self.seen >= self.size:
                    break
                self.seen += 1
                kind = reason_kind(reason)
                self.reasons[kind] += 1
                self.examples.setdefault(kind, reason)
            if self.seen < self.size:
                return None
            if len(self.reasons) > 1:
                self.working = True
                return None
            return self.examples[next(iter(self.reasons))]

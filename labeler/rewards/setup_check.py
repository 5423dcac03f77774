"""Telling a broken reward setup from occasional gaps, in the RL reward paths (verl's compute_score, the
OpenRLHF server). One sample whose reward cannot be measured gets its own outcome (unmeasured_score) and the
batch goes on; but when the first SETUP_WINDOW samples a reward worker scores all have no reward, for the same
kind of reason (a dataset without extra_info['question'], labels never sent, a PRM length limit below every
response, whatever the responses' step counts: Reward.reason_kind, labeler/rewards/process_reward.py),
that is the setup's fault: training would go on at a constant reward and learn nothing, so the caller stops
with the reason instead (and so is every later call whose samples are all unmeasured). Once a sample is
measured (one of the first ones, or one of a later call after a refusal: the setup was fixed, say the labels
now sent), or the first ones were unmeasured for different kinds of reasons, the setup is taken as working and
every later gap is per sample.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Sequence

SETUP_WINDOW = 32  # the first samples a worker scores that decide whether its setup can measure any reward


def kind_of(result) -> str:
    """What an unmeasured Reward's reason counts as: its reason_kind (the reason without its counts or values), the
    counts by reason group by it too; a reason made without a kind counts as itself."""
    return result.reason_kind or result.reason


class FirstSamples:
    """The first `size` samples of one reward worker (thread-safe): `add` each call's samples' Rewards."""

    def __init__(self, size: int = SETUP_WINDOW):
        self.size = size
        self.seen = 0
        self.reasons: Counter[str] = Counter()  # by kind; the first full reason of each kind kept for the message
        self.examples: dict[str, str] = {}
        self.working = size <= 0  # decided: some early sample was measured, or the early gaps had different reasons
        self.lock = threading.Lock()

    def add(self, results: Sequence) -> str | None:
        """`results`: a call's Rewards (labeler/rewards/process_reward.py), value None where not measured. The reason
        (in full, of its first sample) when the first `size` samples were all unmeasured for one kind of reason, and
        no sample was measured since: the caller stops; else None."""
        with self.lock:
            if self.working or any(result.value is not None for result in results):  # one measured, even past the window
                self.working = True
                return None
            for result in results:
                if self.seen >= self.size:
                    break
                self.seen += 1
                kind = kind_of(result)
                self.reasons[kind] += 1
                self.examples.setdefault(kind, result.reason)
            if self.seen < self.size:
                return None
            if len(self.reasons) > 1:
                self.working = True
                return None
            return self.examples[next(iter(self.reasons))]

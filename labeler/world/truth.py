"""The exact first error of any solution to a world problem, the model's own samples included.

The world knows its arithmetic, so a step is checked against it, not against Monte-Carlo rollouts:
step k is right when it restates the k-th event (its sentence, ordinal and phrase, without the final
period) and then states that event's operation on the running value and the value after it, and
nothing more ("<the k-th event's sentence>: a op b = c." with a the value before the event, op and b
the event's, c the value after). A step that restates another event (another ordinal, another phrase:
"buys 5" where the event "finds 5"), even with the right arithmetic, or that adds text after its
equation, is wrong: the world cannot tell which event it does.
The first step that is not so is the first error; a solution whose steps are all right, one per
event, ending with the answer line "The answer is: <the answer>", is correct (-1).

What a step may be that the parser does not read (no "a op b = c" in it, a step past the last
event, an answer line that differs from the value, a solution that stops before the last event: its
last step) is wrong at that step: the solution
leaves the path the world defines there. Since the completer learnt only this format, such a step
is itself a mistake of the model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from labeler.world.problems import _SYMBOL, Problem

__all__ = ["exact_first_error"]

# "<restated event>: <left> <op> <operand> = <result>." the whole first line of a step (its period optional)
_STEP_LINE = re.compile(r"(.*?):\s*(-?\d+)\s*([+\-*/])\s*(-?\d+)\s*=\s*(-?\d+)\s*\.?", re.DOTALL)
_ANSWER_ANYWHERE = re.compile(r"The answer is:\s*(-?\d+)")
_ANSWER_AT_END = re.compile(r"\nThe answer is:\s*(-?\d+)\s*\.?\s*$")  # its own line, nothing after it


def exact_first_error(problem: Problem, steps: Sequence[str]) -> int:
    """The index of the first wrong step of `steps` as a solution of `problem`, or -1 when all are right;
    ValueError for no steps (no step to be wrong)."""
    if not steps:
        raise ValueError("a solution with no steps has no first error")
    before = problem.start
    for k, step in enumerate(steps):
        if k >= len(problem.events):
            return k  # a step past the last event
        event = problem.events[k]
        body, _, answer_line = step.partition("\n")
        line = _STEP_LINE.fullmatch(body.strip())
        if line is None:  # no equation, or text after it
            return k
        restated, left, op, operand, result = line.groups()
        if " ".join(restated.split()) != event.sentence[:-1]:  # another event restated (its ordinal, its phrase), or none
            return k
        after = event.apply(before)
        if (int(left), op, int(operand), int(result)) != (before, _SYMBOL[event.kind], event.number, after):
            return k
        stated = list(_ANSWER_ANYWHERE.finditer(step))
        if k == len(problem.events) - 1:  # one answer line, the step's end, stating the value
            ending = _ANSWER_AT_END.search(step)
            if len(stated) != 1 or ending is None or int(ending.group(1)) != after:
                return k
        elif stated or answer_line.strip():
            return k  # an answer (or a line after the step's own) before the last event
        before = after
    if len(steps) == len(problem.events):
        return -1
    return max(len(steps) - 1, 0)  # it stops before the last event, without the answer: its last step is where it goes wrong

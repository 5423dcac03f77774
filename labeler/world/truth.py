"""The exact first error of any solution to a world problem, the model's own samples included.

The world knows its arithmetic, so a step is checked against it, not against Monte-Carlo rollouts:
step k is right when it states the k-th event's operation on the running value and the value after
it ("..., a op b = c." with a the value before the event, op and b the event's, c the value after).
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

# "<left> <op> <operand> = <result>", the last such equation in the step (the step restates the event first)
_EQUATION = re.compile(r"(-?\d+)\s*([+\-*/])\s*(-?\d+)\s*=\s*(-?\d+)")
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
        equations = _EQUATION.findall(body)
        if not equations:
            return k
        left, op, operand, result = equations[-1]
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

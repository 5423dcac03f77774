"""Multi-step arithmetic word problems with step-by-step solutions, and solutions with a known first error.

A problem is a starting quantity and a chain of 3-10 events that change it ("First, she buys 5 more.",
"Second, she doubles them."). Its solution has one step per event, each stating the event's arithmetic on
the running value ("First, she buys 5 more: 12 + 5 = 17."); the last step ends with the answer line
"The answer is: X". Every value stays an integer in [0, MAX_VALUE], so a small model can learn the
arithmetic from digits.

`inject_error` makes step k wrong (an arithmetic slip, or the wrong operation for the event) and
carries the wrong value correctly through the later steps, so the solution's first error is k and
its final answer is wrong: a ProcessBench row with a known `label`.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass
from typing import Iterator

__all__ = [
    "MAX_VALUE", "MIN_EVENTS", "MAX_EVENTS", "Event", "Problem", "make_problem", "make_problems",
    "inject_error", "solution_steps", "processbench_rows", "split_seed",
]  # fmt: skip

MAX_VALUE = 99
MIN_EVENTS, MAX_EVENTS = 3, 10

# Each template: what is counted, how the problem opens and asks, and the phrases of its events.
# "{s}" is the subject (a name or "she"/"he"), "{n}" the event's number.
_TEMPLATES = (
    {
        "unit": ["apples", "stickers", "marbles", "cards", "pencils", "stamps", "coins", "shells"],
        "open": "{name} has {start} {unit}.",
        "ask": "How many {unit} does {name} have now?",
        "+": ["{s} buys {n} more.", "{s} finds {n} more.", "{s} gets {n} more from a friend."],
        "-": ["{s} gives away {n}.", "{s} loses {n}.", "{s} sells {n}."],
        "*2": ["{s} doubles them."], "*3": ["{s} triples them."], "/2": ["{s} gives away half of them."],
    },
    {
        "unit": ["liters", "cups", "buckets"],
        "open": "A tank holds {start} {unit} of water.",
        "ask": "How many {unit} are in the tank now?",
        "+": ["Someone pours in {n} more.", "Rain adds {n}."],
        "-": ["Someone takes out {n}.", "A leak drains {n}."],
        "*2": ["The water is doubled."], "*3": ["The water is tripled."], "/2": ["Half of the water is poured out."],
    },
    {
        "unit": ["dollars"],
        "open": "{name} has {start} {unit} in a jar.",
        "ask": "How many {unit} are in the jar now?",
        "+": ["{s} earns {n} more.", "{s} saves {n} more."],
        "-": ["{s} spends {n}.", "{s} pays {n} for lunch."],
        "*2": ["{s} doubles the money."], "*3": ["{s} triples the money."], "/2": ["{s} spends half of the money."],
    },
)
_NAMES = [("Mia", "She"), ("Tom", "He"), ("Ava", "She"), ("Leo", "He"), ("Zoe", "She"), ("Sam", "He"),
          ("Ivy", "She"), ("Max", "He"), ("Ella", "She"), ("Ben", "He")]  # fmt: skip
_SYMBOL = {"+": "+", "-": "-", "*2": "*", "*3": "*", "/2": "/"}
# Each event opens with its ordinal, and so does its step: the model finds the event it is at by its
# ordinal rather than by counting sentences.
ORDINALS = ("First", "Second", "Third", "Fourth", "Fifth", "Sixth", "Seventh", "Eighth", "Ninth", "Tenth")


@dataclass(frozen=True)
class Event:
    """One change to the running value: `kind` is +, -, *2, *3 or /2; `number` the operand."""

    kind: str
    number: int
    sentence: str  # as the problem states it

    def apply(self, value: int) -> int:
        return {"+": value + self.number, "-": value - self.number, "*2": value * 2, "*3": value * 3, "/2": value // 2}[self.kind]

    def valid_on(self, value: int) -> bool:
        """Whether the event keeps an integer in [0, MAX_VALUE] from `value`."""
        if self.kind == "/2":
            return value % 2 == 0
        return 0 <= self.apply(value) <= MAX_VALUE


@dataclass(frozen=True)
class Problem:
    id: str
    text: str
    start: int
    events: tuple[Event, ...]

    @property
    def values(self) -> list[int]:
        """The running value after each event."""
        out, value = [], self.start
        for event in self.events:
            value = event.apply(value)
            out.append(value)
        return out

    @property
    def answer(self) -> int:
        return self.values[-1]


def split_seed(split: str, seed: int = 0) -> int:
    """A seed of its own for each named split ("train", "label", "test", "bon"), so no split's
    problems are drawn from another's stream."""
    return zlib.crc32(f"{split}:{seed}".encode())


def make_problem(rng: random.Random, problem_id: str, n_events: int | None = None) -> Problem:
    """One problem with `n_events` events (random in [MIN_EVENTS, MAX_EVENTS] when None)."""
    template = rng.choice(_TEMPLATES)
    unit = rng.choice(template["unit"])
    name, pronoun = rng.choice(_NAMES)
    n_events = n_events or rng.randint(MIN_EVENTS, MAX_EVENTS)
    start = rng.randint(2, 40)
    value, events = start, []
    for k in range(n_events):
        event = _draw_event(rng, template, value, pronoun, ORDINALS[k])
        events.append(event)
        value = event.apply(value)
    opening = template["open"].format(name=name, start=start, unit=unit)
    ask = template["ask"].format(name=name, unit=unit)
    text = " ".join([opening, *(e.sentence for e in events), ask])
    return Problem(problem_id, text, start, tuple(events))


def _draw_event(rng: random.Random, template: dict, value: int, pronoun: str, ordinal: str) -> Event:
    kinds = [k for k in ("+", "-", "*2", "*3", "/2") if _possible(k, value)]
    kind = rng.choices(kinds, weights=[3 if k in "+-" else 1 for k in kinds])[0]
    number = {"*2": 2, "*3": 3, "/2": 2}.get(kind)
    if kind == "+":
        number = rng.randint(1, min(20, MAX_VALUE - value))
    elif kind == "-":
        number = rng.randint(1, min(20, value))
    phrase = rng.choice(template[kind]).format(s=pronoun, n=number)
    return Event(kind, number, f"{ordinal}, {phrase[0].lower()}{phrase[1:]}")


def _possible(kind: str, value: int) -> bool:
    return {"+": value < MAX_VALUE, "-": value > 0, "*2": 0 < value * 2 <= MAX_VALUE,
            "*3": 0 < value * 3 <= MAX_VALUE, "/2": value > 0 and value % 2 == 0}[kind]  # fmt: skip


def make_problems(n: int, split: str, seed: int = 0) -> list[Problem]:
    """`n` problems of one split, each with a distinct text."""
    rng = random.Random(split_seed(split, seed))
    out, seen = [], set()
    while len(out) < n:
        problem = make_problem(rng, f"world-{split}-{len(out)}")
        if problem.text not in seen:
            seen.add(problem.text)
            out.append(problem)
    return out


def _step_text(event: Event, before: int, after: int, kind: str | None = None) -> str:
    """The step of one event: its sentence without the final period, then its arithmetic."""
    kind = kind or event.kind
    return f"{event.sentence[:-1]}: {before} {_SYMBOL[kind]} {event.number} = {after}."


def solution_steps(problem: Problem, values: list[int] | None = None, kinds: list[str] | None = None) -> list[str]:
    """The step-by-step solution; `values` and `kinds` override the results and operations written
    (an injected error), else the correct ones. The last step states the answer."""
    values = values or problem.values
    kinds = kinds or [e.kind for e in problem.events]
    steps, before = [], problem.start
    for event, kind, after in zip(problem.events, kinds, values):
        steps.append(_step_text(event, before, after, kind))
        before = after
    steps[-1] += f"\nThe answer is: {values[-1]}"
    return steps


def inject_error(problem: Problem, position: int, rng: random.Random) -> list[str]:
    """The solution with its first error at step `position`, carried through the later steps (each
    later step's arithmetic is right on the wrong value), so the final answer is wrong. Raises
    ValueError when no error at that position can be carried to a different integer answer."""
    if not 0 <= position < len(problem.events):
        raise ValueError(f"position {position} is outside the {len(problem.events)} steps")
    correct = problem.values
    before = problem.start if position == 0 else correct[position - 1]
    event = problem.events[position]
    candidates: list[tuple[int, str]] = []  # (wrong value at position, the operation written)
    for delta in [d for d in range(-10, 11) if d]:
        candidates.append((correct[position] + delta, event.kind))  # an arithmetic slip
    for kind in ("+", "-"):  # the wrong operation on the event's number, done right ("doubles: 14 + 2 = 16")
        if kind != event.kind:
            wrong_op = Event(kind, event.number, event.sentence)
            candidates.append((wrong_op.apply(before), kind))
    rng.shuffle(candidates)
    for wrong, kind in candidates:
        values = _carried(problem, position, wrong)
        if values is not None and values[-1] != problem.answer:
            kinds = [e.kind for e in problem.events]
            kinds[position] = kind
            return solution_steps(problem, values, kinds)
    raise ValueError(f"no error at step {position} of {problem.id} can be carried to a wrong answer")


def _carried(problem: Problem, position: int, wrong: int) -> list[int] | None:
    """The values with `wrong` at `position` and each later event applied to it; None when a value
    leaves [0, MAX_VALUE] or a half is not whole."""
    if not 0 <= wrong <= MAX_VALUE or wrong == problem.values[position]:
        return None
    values = problem.values[:position] + [wrong]
    for event in problem.events[position + 1 :]:
        if not event.valid_on(values[-1]):
            return None
        values.append(event.apply(values[-1]))
    return values


def processbench_rows(problems: list[Problem], error_share: float, seed: int = 0) -> Iterator[dict]:
    """One ProcessBench row per problem (`id`, `problem`, `answer`, `steps`, `label` = the first
    wrong step or -1): a share `error_share` of them with an error injected at a uniformly drawn
    step (a problem where no error can be carried keeps its correct solution, label -1)."""
    rng = random.Random(seed)
    for problem in problems:
        label, steps = -1, solution_steps(problem)
        if rng.random() < error_share:
            position = rng.randrange(len(problem.events))
            try:
                steps, label = inject_error(problem, position, rng), position
            except ValueError:
                pass
        yield {"id": problem.id, "problem": problem.text, "answer": str(problem.answer), "steps": steps, "label": label}

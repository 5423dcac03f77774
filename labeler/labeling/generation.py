"""What the domain asks of a text generator. The engine behind it (in-process vLLM, a Ray actor,
a test double) lives in workers/ and is invisible here."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Protocol, Sequence

from labeler.store.manifest import NOT_LOADED


@dataclass(frozen=True)
class SamplingSettings:
    temperature: float = 0.7
    top_p: float = 1.0
    max_new_tokens: int = 256
    # The least budget a completion may be given: a prompt that leaves less room in the model's context
    # is refused as beyond it (context_exceeded) rather than sampled with a budget too small to answer in.
    min_budget: int = 1
    stop: tuple[str, ...] = ()
    # When set, a completion ends at the end of the line where it first writes this marker
    # (e.g. "The answer is"): the answer is stated, the rest would be tokens spent for nothing.
    # A completion from inside a trace's thinking (GenerationRequest.thinking) ends there only after it
    # closed its thinking: reasoning models state answers while they think, then correct them.
    answer_marker: str | None = None
    answer_max_tokens: int = 48  # budget for the rest of the answer line after the marker


@dataclass(frozen=True)
class GenerationRequest:
    """Sample `n` continuations of an assistant turn that starts with `assistant_prefix`.

    The generator renders `user_message` with the model's chat template and appends the prefix,
    so the model continues the solution rather than starting a new one.
    """

    user_message: str
    assistant_prefix: str
    n: int
    seed: int
    # The prefix ends inside a reasoning trace's thinking: the completion thinks on, then responds after
    # `</think>`; SamplingSettings.answer_marker ends it only in that response.
    thinking: bool = False


@dataclass(frozen=True)
class Completion:
    text: str
    tokens: int
    finish_reason: str  # "stop", "length" (cut by its token budget), ...
    budget: int | None = None  # tokens it was allowed: max_new_tokens, or less near the context limit

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


@dataclass(frozen=True)
class GenerationResult:
    completions: tuple[Completion, ...]
    error: str | None = None  # set when this request could not run
    context_exceeded: bool = False  # the error is a prompt that leaves no room in the model's context


class Generator(Protocol):
    model_name: str

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingSettings) -> list[GenerationResult]:
        """One result per request, in order. Implementations batch all requests into one engine call."""
        ...


class NoGeneration:
    """The generator of a job with nothing to generate: the final-answer strategy on rows that all carry
    their solution only checks each one's stated answer. No model loads; asked to generate, it raises.
    Its engine record names the model and says that nothing was generated (`needs_generation`)."""

    def __init__(self, model_name: str):
        self.model_name = model_name
        self.closed = False

    @classmethod
    def factory(cls, model_name: str):
        """The generator factory an executor is given: it says it loads no model (`loads_model`), so none is announced."""
        make = partial(cls, model_name)
        make.loads_model = False
        return make

    def describe(self) -> dict:
        return {"model": self.model_name, "model_revision": NOT_LOADED}

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingSettings) -> list[GenerationResult]:
        raise RuntimeError(f"asked to generate {len(requests)} requests in a job that generates nothing (no model loaded)")

    def close(self) -> None:
        self.closed = True


def needs_generation(strategy: str, rows) -> bool:
    """Whether a job of `strategy` on the planned `rows` (PlannedRow) needs a model: every strategy samples
    rollouts but final-answer, which samples only the solutions of rows that carry none."""
    from labeler.labeling.config import MONTE_CARLO_STRATEGIES

    return strategy in MONTE_CARLO_STRATEGIES or any(row.needs_solutions for row in rows)


class EngineDiedError(RuntimeError):
    """The engine under a Generator died (its process was killed, ran out of memory): this Generator
    is unusable, a new one must be started. Raised by `generate` instead of waiting forever."""

"""A deterministic test double of the Generator, for unit tests of the labeling logic only.

Completions depend on the prefix text and the request seed, never on batch order: a prefix whose
text contains the marker WRONG leads every completion to a wrong answer; otherwise rollout r of a
request (sampled with seed + r, as vLLM does for n > 1) is correct unless (seed + r) % miss_every == 0
(never missed when miss_every is None). A completion of a prefix that ends inside a trace's thinking
closes the thinking first (`</think>`), then answers, unless the prefix holds PONDER_MARKER.
"""

from __future__ import annotations

import re
from typing import Sequence

from labeler.inputs.traces import THINK_CLOSE, THINK_OPEN
from labeler.labeling.generation import Completion, GenerationRequest, GenerationResult, SamplingSettings

WRONG_MARKER = "WRONG"
CUT_MARKER = "RAMBLE"  # a prefix with this text leads every completion to run out of its token budget
LONG_MARKER = "HUGE"  # a prefix with this text does not fit the model's context
CUT_HERE_MARKER = "RAMBLE-HERE"  # a prefix that ends with this text has every completion cut (longer prefixes do not)
# a prefix inside a trace's thinking with this text has every completion end (finish "stop") still thinking,
# after it wrote the answer marker: what a reasoning model does before it corrects itself
PONDER_MARKER = "PONDER"
# a prefix with this text has the completions of even seed (all of them after "SLOW!") write it: SlowChecker times out on them
SLOW_MARKER = "SLOW"
THINKING_CLOSED = f"That settles it.\n{THINK_CLOSE}\n\n"  # how a completion from inside the thinking ends it


class ScriptedGenerator:
    model_name = "scripted-test-double"
    dtype, max_model_len = "float32", 2048  # what a real engine would have resolved; tests change them

    def describe(self) -> dict:
        """Like VLLMGenerator.describe: the engine as it resolved its settings."""
        return {"model": self.model_name, "model_revision": "scripted", "dtype": self.dtype, "max_model_len": self.max_model_len}

    def __init__(self, answers: dict[str, str], fail_when: str | None = None, sampled_solution: str | None = None, miss_every: int | None = 3):
        self.answers = answers  # problem text -> reference answer
        self.fail_when = fail_when  # requests whose prefix starts with this get an error result
        self.sampled_solution = sampled_solution  # text returned for whole-solution requests ("{answer}" filled in)
        self.miss_every = miss_every
        self.calls: list[int] = []  # number of requests in each generate call

    def close(self) -> None:  # as an engine is closed when a command ends: nothing to free
        pass

    def _answer(self, request: GenerationRequest) -> str:
        for problem, answer in self.answers.items():
            if request.user_message.startswith(problem.strip()):
                return answer
        raise KeyError(f"unknown problem in {request.user_message[:60]!r}")

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingSettings) -> list[GenerationResult]:
        self.calls.append(len(requests))
        results = []
        for request in requests:
            if self.fail_when and request.assistant_prefix.startswith(self.fail_when):
                results.append(GenerationResult((), error="engine error"))
                continue
            if LONG_MARKER in request.assistant_prefix:
                results.append(GenerationResult((), error="prompt has 2000 tokens, the model's context is 1024", context_exceeded=True))
                continue
            answer = self._answer(request)
            thinking = THINK_OPEN in request.assistant_prefix and THINK_CLOSE not in request.assistant_prefix
            completions = []
            for r in range(request.n):
                finish, closes = "stop", thinking
                if not request.assistant_prefix and self.sampled_solution is not None:
                    text = self.sampled_solution.format(answer=answer)
                    finish = "length" if CUT_MARKER in text else "stop"
                elif request.assistant_prefix.rstrip().endswith(CUT_HERE_MARKER):
                    text, finish = "Let me think about this for a long", "length"
                elif CUT_MARKER in request.assistant_prefix and ((request.seed + r) % 2 == 0 or CUT_MARKER + "!" in request.assistant_prefix):
                    # rollouts of even seed are cut (all of them after "RAMBLE!"), mid-sentence, before any answer
                    text, finish = "Let me think about this for a long", "length"
                elif thinking and PONDER_MARKER in request.assistant_prefix:
                    text, closes = f"20 - 15 = 5. The answer is {_wrong(answer)}? Wait, let me recheck.", False
                elif WRONG_MARKER in request.assistant_prefix or (self.miss_every and (request.seed + r) % self.miss_every == 0):
                    text = f"So it is {_wrong(answer)}.\n\nThe answer is: {_wrong(answer)}"
                elif SLOW_MARKER in request.assistant_prefix and (
                    (request.seed + r) % 2 == 0 or f"{SLOW_MARKER}!" in request.assistant_prefix
                ):
                    text = f"Slow going ({SLOW_MARKER}).\n\nThe answer is: {answer}"
                else:
                    text = f"Continuing.\n\nThe answer is: {answer}"
                if closes and finish == "stop":
                    text = THINKING_CLOSED + text
                completions.append(Completion(text, tokens=len(text.split()), finish_reason=finish, budget=sampling.max_new_tokens))
            results.append(GenerationResult(tuple(completions)))
        return results


class SlowChecker:
    """An answer checker whose check of any text holding SLOW_MARKER times out (after its retry too)."""

    def __init__(self, checker):
        self.checker = checker

    def check_many(self, pairs, questions=None):
        from labeler.checking import CheckResult, Verdict

        verdicts = list(self.checker.check_many(pairs, questions))
        return [CheckResult(Verdict.TIMEOUT, None) if SLOW_MARKER in text else verdict for (text, _), verdict in zip(pairs, verdicts)]


def _wrong(answer: str) -> str:
    number = re.sub(r"[^0-9]", "", answer) or "0"
    return str(int(number) + 1)


class Crash(BaseException):  # like a kill: no executor retries it
    pass


class CrashingGenerator(ScriptedGenerator):
    """Dies on its n-th generate call, like a killed process would, after earlier units committed."""

    def __init__(self, answers, crash_on_call: int):
        super().__init__(answers)
        self.crash_on_call = crash_on_call

    def generate(self, requests, sampling):
        if len(self.calls) + 1 == self.crash_on_call:
            raise Crash("engine died")
        return super().generate(requests, sampling)


class ScriptedJudge:
    """A test double of a judge model: the critique of a request is `script(problem, seed)`, where
    `problem` is the problem text the critique prompt shows (the line after "# Problem") and `seed`
    the request's seed; by default every critique finds no error. Tokens: one per word."""

    model_name = "scripted-judge"
    dtype, max_model_len = "float32", 2048

    def __init__(self, script=None, too_long: str | None = None):
        self.script = script or (lambda problem, seed: "Every paragraph checks out.\n\n\\boxed{-1}")
        self.too_long = too_long  # a problem whose prompt does not fit the context
        self.calls: list[int] = []
        self.seeds: list[int] = []

    def describe(self) -> dict:
        return {"model": self.model_name, "model_revision": "scripted", "dtype": self.dtype, "max_model_len": self.max_model_len}

    @staticmethod
    def problem_of(prompt: str) -> str:
        after = prompt.split("# Problem\n\n", 1)[-1]
        return after.split("\n\n# Solution", 1)[0]

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingSettings) -> list[GenerationResult]:
        self.calls.append(len(requests))
        results = []
        for request in requests:
            self.seeds.append(request.seed)
            problem = self.problem_of(request.user_message)
            if self.too_long and problem == self.too_long:
                results.append(GenerationResult((), error="prompt has 5000 tokens, the model's context is 2048", context_exceeded=True))
                continue
            text = self.script(problem, request.seed)
            finish = "length" if text.endswith(CUT_MARKER) else "stop"
            results.append(GenerationResult((Completion(text, len(text.split()), finish, sampling.max_new_tokens),)))
        return results

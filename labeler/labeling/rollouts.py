"""Sampling continuations from step prefixes, checking them, and keeping the per-step ledger.

Every strategy works in rounds of *probes*: "sample `count` rollouts of solution s from prefix
s1..s(i+1), starting at rollout number `first_rollout`". A round is one batched generate call.

Rollout r of a prefix is sampled with seed `prefix_seed + r` (a request with n=N and seed S is
N requests with seeds S..S+N-1 in vLLM), so every strategy draws the very same completions for the
same (prefix, r) and comparisons between strategies isolate the strategy from sampling noise.
The prefix seed depends on the problem text, the reference answer and the prefix text only (the
prompt, in short), so identical prefixes of different solutions of one problem are one request,
rolled out once, their counts shared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

from labeler.labeling import prompts
from labeler.labeling.generation import Completion, GenerationRequest, GenerationResult, Generator, SamplingSettings
from labeler.ids import derived_seed
from labeler.inputs.traces import THINK_CLOSE, response_part
from labeler.records import Solution, StepCounts

FINAL_ANSWER_FINISH = "final_answer_check"
# The verdict of a completion left out of the label unchecked: cut by its token budget, or ended (by its budget,
# end of text or a stop string) inside a trace's thinking, before it closed it: it has not answered yet.
TRUNCATED = "truncated"
TIMEOUT = "timeout"  # the verdict of a completion whose answer check timed out, even after a retry: out of the label
UNPARSEABLE = "unparseable"  # a final check that could not compare the stated answer: unknown (a rollout so read stays wrong)


class Checker(Protocol):
    def check_many(self, pairs: Sequence[tuple[str, str]], questions: Sequence[str] | None = None) -> list:
        """One verdict per (completion, reference) pair; `questions`, one per pair, lets the checker
        read what the problem asks (an ordered tuple or a set, the quantity counted)."""
        ...


@dataclass(frozen=True)
class Probe:
    solution: int  # position in the batch
    step: int  # prefix s1..s(step+1)
    first_rollout: int
    count: int


@dataclass(frozen=True)
class RolloutRecord:
    """One checked completion, or the check of a final step that states the answer itself."""

    solution_id: str
    step_index: int
    rollout_index: int
    seed: int
    text: str
    extracted_answer: str | None
    verdict: str
    tokens: int
    finish_reason: str
    token_budget: int | None = None


@dataclass
class LabelledSolution:
    solution: Solution
    steps: list[StepCounts]
    trajectory_verdict: str | None = None  # the solution as a whole (labeler/labeling/trajectory.py)

    @property
    def generated_tokens(self) -> int:
        """Tokens of its rollouts plus, for a sampled solution, the tokens of sampling it."""
        return sum(step.tokens for step in self.steps) + self.solution.sampling_tokens


@dataclass
class BatchOutcome:
    labelled: list[LabelledSolution] = field(default_factory=list)
    rollouts: list[RolloutRecord] = field(default_factory=list)
    failed: list[tuple[Solution, str]] = field(default_factory=list)  # solutions the engine could not run
    failed_tokens: int = 0  # tokens generated for the failed solutions (they have no labels row to carry them)
    probes: int = 0  # prefix probes asked for
    requests: int = 0  # requests sent after merging identical prefixes
    written_through: int = 0  # steps passed as "retraced" on rollouts of shorter prefixes that wrote them (posterior)
    prior_fitted: bool | None = None  # posterior: whether some round fitted a prior (None: another strategy)
    # prompt tokens vLLM looked up in its prefix cache for this batch's rollouts, and found there; None: not reported
    prefix_cache: tuple[int, int] | None = None


@dataclass
class SentRound:
    """A round's probes, the distinct requests they became, and the engine's results (unchecked)."""

    probes: list[Probe]
    request_of_probe: list[int]
    requests: list[GenerationRequest]
    results: list[GenerationResult]
    prefix_cache: tuple[int, int] | None = None  # the engine's prompt tokens looked up in its prefix cache, and found


def prefix_seed(base_seed: int, solution: Solution, step_index: int) -> int:
    """Seed of rollout 0 from prefix s1..s(step_index+1); rollout r uses this + r."""
    return derived_seed(base_seed, solution.problem, solution.reference_answer, *solution.steps[: step_index + 1])


class PrefixSampler:
    def __init__(self, solutions: Sequence[Solution], generator: Generator, *, sampling: SamplingSettings, seed: int):
        self.solutions = solutions
        self.generator = generator
        self.sampling = sampling
        self.seed = seed

    def prompt_of(self, s: int, step: int) -> tuple[str, str, str]:
        """What a rollout of solution s's prefix through `step` is drawn from: identical for identical prefixes of one
        problem (their rollouts are one request, their counts one measurement)."""
        solution = self.solutions[s]
        return solution.problem, solution.reference_answer, prompts.assistant_prefix(solution.steps[: step + 1], solution.thinking_steps)

    def send(self, probes: Sequence[Probe]) -> SentRound:
        """One generate call for all probes; probes of identical prefixes share one request."""
        index_of_key: dict[tuple, int] = {}
        request_of_probe: list[int] = []
        requests: list[GenerationRequest] = []
        for probe in probes:
            solution = self.solutions[probe.solution]
            prefix = prompts.assistant_prefix(solution.steps[: probe.step + 1], solution.thinking_steps)
            key = (*self.prompt_of(probe.solution, probe.step), probe.first_rollout, probe.count)
            if key not in index_of_key:
                index_of_key[key] = len(requests)
                requests.append(
                    GenerationRequest(
                        user_message=prompts.user_message(solution.problem),
                        assistant_prefix=prefix,
                        n=probe.count,
                        seed=prefix_seed(self.seed, solution, probe.step) + probe.first_rollout,
                        thinking=solution.thinks_at(probe.step),
                    )
                )
            request_of_probe.append(index_of_key[key])
        counts = getattr(self.generator, "prefix_cache_counts", None)  # vLLM's running totals (workers/vllm_generator.py)
        before = counts() if counts and requests else None
        results = self.generator.generate(requests, self.sampling) if requests else []
        after = counts() if before is not None else None
        cache = (after[0] - before[0], after[1] - before[1]) if before is not None and after is not None else None
        return SentRound(list(probes), request_of_probe, requests, results, cache)


class StepLedger:
    """Counts, rollout records and failures of a batch of solutions, filled round by round.

    `truncated` is the policy for completions cut by their token budget: "excluded" (the default)
    records them with verdict `truncated` and leaves them out of the label, whose soft value is then
    correct / finished rollouts; "incorrect" checks them as they stand, as Math-Shepherd did (a cut
    completion rarely states the answer, so it almost always counts as wrong).

    A completion from inside a trace's thinking that ends before it closes it (`</think>`) has not
    answered: whatever answer it wrote while thinking is never checked. It is truncated too (counted in
    n_truncated), left out of the label, or under "incorrect" counted as a wrong answer. A completion
    whose check times out (the checker retried it already: labeling/checker_watch.py) is its own verdict,
    `timeout`, counted in n_timeouts and never in the label under either policy.

    A step none of whose rollouts is correct is hard 0 only when enough of them were counted: at least
    `min_counted` (--min-counted-rollouts), and timed-out checks not the most of those sampled (a timeout is the
    checker's failure, not the prefix's). Else it is unlabelled with the reason, and record() gives its probe no
    verdict, so no strategy infers a label from it.
    """

    def __init__(
        self, solutions: Sequence[Solution], truncated: str = "excluded", max_new_tokens: int | None = None, min_counted: int = 1
    ):
        self.solutions = solutions
        self.truncated = truncated
        self.min_counted = min_counted
        self.max_new_tokens = max_new_tokens  # to tell, when a step's rollouts were all cut, whether the context shrank their budget
        self.budgets: dict[tuple[int, int], int] = {}  # (solution, step) -> the smallest budget its rollouts had
        # (solution, step) -> rollouts that ended inside the thinking before their budget did (end of text, a stop string)
        self.still_thinking: dict[tuple[int, int], int] = {}
        self.counts = [
            [StepCounts(measured_by="unlabelled", truncated_counted=truncated == "incorrect") for _ in solution.steps]
            for solution in solutions
        ]
        self.records: list[RolloutRecord] = []
        self.failed: dict[int, str] = {}
        self.probes = 0
        self.requests = 0
        # vLLM's prefix cache over the rounds that asked the engine for something: prompt tokens looked up, and found
        self.prefix_cache_counts = (0, 0)
        self.prefix_cache_unreported = False  # a round the engine gave no counts for: the totals would cover part of the batch

    def _checked(self, completion: Completion, thinking: bool) -> bool:
        """Whether the answer of a completion is checked: never when it ended inside the thinking (it has not
        answered), when its budget cut it only under --truncated incorrect."""
        if thinking and _still_thinking(completion):
            return False
        return not completion.truncated or self.truncated == "incorrect"

    def record(self, sent: SentRound, checker: Checker, final_checks: Sequence[int] = ()) -> list[int | None]:
        """Check a round (each distinct completion once) plus the final steps of `final_checks`.

        Returns, per probe, its number of correct rollouts; None when the probe gave no counted
        rollout (its request failed, its prefix does not fit the context, or every rollout was cut or timed out).
        """
        owner_of_request: dict[int, Probe] = {}
        for probe, request_index in zip(sent.probes, sent.request_of_probe):
            owner_of_request.setdefault(request_index, probe)
        pairs: list[tuple[str, str]] = []
        questions: list[str] = []
        pair_of_completion: dict[tuple[int, int], int] = {}  # (request, offset) -> its pair; cut completions have none
        for request_index, result in enumerate(sent.results):
            solution = self.solutions[owner_of_request[request_index].solution]
            for offset, completion in enumerate(result.completions):
                if self._checked(completion, sent.requests[request_index].thinking):
                    pair_of_completion[request_index, offset] = len(pairs)
                    pairs.append((response_part(completion.text), solution.reference_answer))  # a reasoning model answers after its thinking
                    questions.append(solution.problem)
        final_start = len(pairs)
        pairs.extend((self.solutions[s].steps[-1], self.solutions[s].reference_answer) for s in final_checks)
        questions.extend(self.solutions[s].problem for s in final_checks)
        verdicts = checker.check_many(pairs, questions)

        charged: set[int] = set()  # generated tokens are counted once, for the first probe of a request
        correct_per_probe: list[int | None] = []
        for probe, request_index in zip(sent.probes, sent.request_of_probe):
            request, result = sent.requests[request_index], sent.results[request_index]
            if result.context_exceeded:
                self._unlabelled(probe.solution, probe.step, f"the prefix does not fit the model's context: {result.error}")
                correct_per_probe.append(None)
                continue
            if result.error is not None:
                self.failed.setdefault(probe.solution, f"step {probe.step}: {result.error}")
                correct_per_probe.append(None)
                continue
            step = self._measured(probe.solution, probe.step, "rollouts")
            key = (probe.solution, probe.step)
            correct = counted = 0
            for offset, completion in enumerate(result.completions):
                pair = pair_of_completion.get((request_index, offset))
                verdict = None if pair is None else verdicts[pair]
                self._keep(probe.solution, probe.step, probe.first_rollout + offset, request.seed + offset, completion, verdict)
                thinking = request.thinking and _still_thinking(completion)  # budget-cut or not: it wrote no response
                step.n_truncated += completion.truncated or thinking
                self.still_thinking[key] = self.still_thinking.get(key, 0) + (thinking and not completion.truncated)
                if completion.budget is not None:
                    self.budgets[key] = min(self.budgets.get(key, completion.budget), completion.budget)
                if verdict is None:
                    counted += thinking and self.truncated == "incorrect"  # unchecked, counted as wrong
                elif verdict.verdict.value == TIMEOUT:
                    step.n_timeouts += 1
                else:
                    counted += 1
                    correct += verdict.verdict == "correct"
            step.n_rollouts += counted
            step.n_correct += correct
            if request_index not in charged:
                charged.add(request_index)
                step.tokens += sum(completion.tokens for completion in result.completions)
            correct_per_probe.append(correct if counted and not self.too_few_counted(step) else None)
        for position, s in enumerate(final_checks):
            verdict = verdicts[final_start + position]
            last = len(self.solutions[s].steps) - 1
            self._keep(s, last, 0, 0, Completion(self.solutions[s].steps[-1], 0, FINAL_ANSWER_FINISH), verdict)
            if verdict.verdict.value == TIMEOUT:  # not known: never a wrong answer
                self.counts[s][last].n_timeouts += 1
                self._unlabelled(s, last, "the check of the answer it states timed out, even after a retry")
                continue
            if verdict.verdict.value == UNPARSEABLE:  # the gate found an answer the check could not compare: not known either
                self._unlabelled(s, last, f"the stated answer could not be compared: {verdict.rule or 'unparseable'}")
                continue
            step = self._measured(s, last, "final_answer")
            step.n_rollouts += 1
            step.n_correct += verdict.verdict == "correct"
        self.probes += len(sent.probes)
        self.requests += len(sent.requests)
        if sent.requests:  # a round that asked the engine for something
            if sent.prefix_cache is None:
                self.prefix_cache_unreported = True
            else:
                self.prefix_cache_counts = tuple(total + count for total, count in zip(self.prefix_cache_counts, sent.prefix_cache))
        return correct_per_probe

    def closed(self, s: int, i: int) -> bool:
        """A prefix that cannot be sampled further (it does not fit the context)."""
        return self.counts[s][i].measured_by == "unlabelled" and self.counts[s][i].unlabelled_reason is not None

    def infer(self, s: int, i: int, hard: bool | None, reason: str | None = None) -> None:
        """Give an unmeasured step a label inferred from others (None: leave it unlabelled, for `reason`)."""
        step = self.counts[s][i]
        if step.measured_by in ("unlabelled", "inferred") and step.unlabelled_reason is None:
            step.measured_by = "unlabelled" if hard is None else "inferred"
            step.inferred_hard = hard
            step.unlabelled_reason = reason if hard is None else None

    def outcome(self) -> BatchOutcome:
        outcome = BatchOutcome(probes=self.probes, requests=self.requests, prefix_cache=self._prefix_cache())
        for s, solution in enumerate(self.solutions):
            for i, step in enumerate(self.counts[s]):
                if step.measured and step.n_rollouts == 0:  # sampled, but every rollout was cut or timed out
                    self._unlabel(step, self._uncounted_reason(step, self.budgets.get((s, i)), self.still_thinking.get((s, i), 0)))
                elif self.too_few_counted(step):
                    self._unlabel(step, self._too_few_reason(step, self.still_thinking.get((s, i), 0)))
                elif step.measured_by == "unlabelled" and step.unlabelled_reason is None:
                    step.unlabelled_reason = "not sampled"
            if s in self.failed:
                outcome.failed.append((solution, self.failed[s]))
                outcome.failed_tokens += LabelledSolution(solution, self.counts[s]).generated_tokens
            else:
                outcome.labelled.append(LabelledSolution(solution, self.counts[s]))
        failed_ids = {solution.solution_id for solution, _ in outcome.failed}
        outcome.rollouts = [record for record in self.records if record.solution_id not in failed_ids]
        return outcome

    def _prefix_cache(self) -> tuple[int, int] | None:
        """The batch's prefix cache counts; None when it asked the engine for nothing or a round was not reported."""
        return self.prefix_cache_counts if self.requests and not self.prefix_cache_unreported else None

    def too_few_counted(self, step: StepCounts) -> bool:
        """A step sampled by rollouts, none correct, that too few counted rollouts would make hard 0."""
        if step.measured_by not in ("rollouts", "early_stop") or step.n_correct:
            return False
        return step.n_rollouts < self.min_counted or 2 * step.n_timeouts > step.n_sampled

    def _too_few_reason(self, step: StepCounts, still_thinking: int) -> str:
        parts = self._uncounted_parts(step, still_thinking)
        why = (
            f"fewer than --min-counted-rollouts {self.min_counted}"
            if step.n_rollouts < self.min_counted
            else "most of its checks timed out: the checker failed, not the prefix"
        )
        left_out = f": {', '.join(parts)}" if parts else ""
        return f"{step.n_rollouts} of {step.n_sampled} rollouts counted, none correct{left_out}; {why}"

    def _uncounted_reason(self, step: StepCounts, budget: int | None, still_thinking: int) -> str:
        """Why a sampled step has no counted rollout."""
        if not still_thinking and not step.n_timeouts:
            return self._all_cut_reason(step, budget)
        return f"none of its {step.n_sampled} rollouts could be counted: " + ", ".join(self._uncounted_parts(step, still_thinking))

    def _uncounted_parts(self, step: StepCounts, still_thinking: int) -> list[str]:
        """The rollouts of a step left out of its label, by why."""
        cut = 0 if step.truncated_counted else step.n_truncated - still_thinking  # under incorrect, only timeouts are left out
        parts = [f"{cut} cut by the token budget (--max-new-tokens)"] if cut else []
        if still_thinking and not step.truncated_counted:
            parts.append(f"{still_thinking} ended inside the thinking, before any response (no {THINK_CLOSE})")
        if step.n_timeouts:
            parts.append(f"{step.n_timeouts} whose answer check timed out, even after a retry")
        return parts

    def _all_cut_reason(self, step: StepCounts, budget: int | None) -> str:
        if budget is not None and self.max_new_tokens is not None and budget < self.max_new_tokens:
            return (
                f"all {step.n_truncated} rollouts were cut by their token budget, {budget} tokens: the prefix leaves "
                f"no more of the model's context (--max-new-tokens {self.max_new_tokens}, --max-model-len)"
            )
        return f"all {step.n_truncated} rollouts were cut by the token budget (--max-new-tokens)"

    def _unlabelled(self, s: int, i: int, reason: str) -> None:
        self._unlabel(self.counts[s][i], reason)

    @staticmethod
    def _unlabel(step: StepCounts, reason: str) -> None:
        step.measured_by = "unlabelled"
        step.inferred_hard = None
        step.unlabelled_reason = reason

    def _measured(self, s: int, i: int, method: str) -> StepCounts:
        step = self.counts[s][i]
        step.measured_by = method
        step.inferred_hard = None
        step.unlabelled_reason = None
        return step

    def _keep(self, s: int, i: int, rollout: int, seed: int, completion: Completion, verdict) -> None:
        """Record a completion; `verdict` None: left unchecked (cut by its budget, or ended inside the thinking)."""
        self.records.append(
            RolloutRecord(
                solution_id=self.solutions[s].solution_id,
                step_index=i,
                rollout_index=rollout,
                seed=seed,
                text=completion.text,
                extracted_answer=None if verdict is None else verdict.extracted,
                verdict=TRUNCATED if verdict is None else verdict.verdict.value,
                tokens=completion.tokens,
                finish_reason=completion.finish_reason,
                token_budget=completion.budget,
            )
        )


def _still_thinking(completion: Completion) -> bool:
    """A completion of a prefix inside a trace's thinking that never closed it: it wrote no response."""
    return THINK_CLOSE not in completion.text

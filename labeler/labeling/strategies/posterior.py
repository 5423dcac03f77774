"""The search for the first error with rollouts spent by doubt: each probe stops as soon as its verdict is settled.

The search is first-error's (gallop, then bisect; labeler/labeling/strategies/first_error.py); what a probe
costs is not. A probe of prefix i draws rollouts in rounds of --round-size, with the seeds exhaustive uses
for them (the same completions), and stops:
- positive at its first correct rollout (its hard label, any-correct, is decided);
- negative once the chance that the rest of exhaustive's N rollouts would have reached the answer falls
  below --stop-risk, under a Beta-Binomial prior over prefixes' success rates fitted to the batch's own
  counts so far, one count per distinct prefix (labeler/labeling/beta_binomial.py; until 16 distinct
  prefixes were counted twice or more there is no prior and no early negative stop), or at N rollouts with
  none correct, as first-error decides.
The prior is the unit's, pooled over its problems, so its chance is an average over them: a hard problem
among easy ones (its right prefixes reaching the answer one time in four) would have its right prefixes
stopped as often as an easy problem's wrong ones. So a probe stops early only where its own problem has
shown the completer sure of it: a prefix of the problem whose every rollout reached the answer, and none
whose rollouts split (some right, some wrong). Elsewhere it draws to N, as first-error does.
Where completers are sure (rates near 0 or 1) a negative probe stops after a rollout or two; where they are
not, it draws on towards N.

A positive probe most of whose rollouts failed is in doubt: a prefix past the first error reaches the answer now
and then, and a search that probes one steps over the first error (exhaustive's first negative prefix lies
before it). Rates fall at an error, so the search looks before such a probe for a negative prefix first, as
if it were negative, and goes on after it only if it finds none (labeler/labeling/strategies/first_error.py,
_Search.doubt). Doubted: a positive probe fewer than half of whose counted rollouts are correct (in rounds of
2, one whose first round failed and whose next gave one correct rollout, not two); rollouts cut by the budget
under --truncated excluded are not counted, so not failures.

A correct rollout is evidence past its own prefix where its text allows. One that wrote the solution's next
steps word for word (each whole, separator and all) is, after each of them, a completion of that longer
prefix; where what it wrote after one reached the answer on its own (checked apart: an answer stated in a
copied step is not one the longer prefix reached), that prefix is positive, and the shorter ones, as after a
positive probe, and the search goes on after it without probing them (galloping, its next probe is the prefix
where the rollout left the solution, most often the first error). Only hard labels are read this way: those
steps are `inferred` (soft null, no counts of their own), as every step the search does not draw from; a
prefix already found negative by its own rollouts keeps its label and bounds the reach; a doubted probe's
rollouts are not read.

Labels are honest about what was drawn: a prefix that reached its N rollouts has its soft label
correct / N, as exhaustive's; one stopped earlier is `early_stop` (its hard label, a null soft label, its
counts written: correct/drawn under a rule that stops on the outcomes is biased); steps between probes are
`inferred`, as first-error's.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from labeler.inputs.traces import response_part
from labeler.labeling.beta_binomial import fit_prior
from labeler.labeling.generation import Generator
from labeler.labeling.prompts import assistant_prefix
from labeler.labeling.rollouts import FINAL_ANSWER_FINISH, BatchOutcome, Checker, PrefixSampler, Probe, StepLedger
from labeler.labeling.strategies import StrategySettings, checked_final_steps, sampled_prefixes
from labeler.labeling.strategies.first_error import _Search, infer_from_searches
from labeler.records import Solution, StepCounts

PRIOR_FROM = 16  # distinct prefixes of the batch counted twice or more before a prior is fitted (and a probe may stop early)


def search(solutions: Sequence[Solution], generator: Generator, checker: Checker, settings: StrategySettings) -> BatchOutcome:
    ledger = StepLedger(solutions, settings.truncated, settings.sampling.max_new_tokens, settings.min_counted_rollouts)
    sampler = PrefixSampler(solutions, generator, sampling=settings.sampling, seed=settings.seed)
    searches = [_Search(size=sampled_prefixes(solution, settings.final_step, checker)) for solution in solutions]
    final_checks = checked_final_steps(solutions, settings.final_step, checker)
    probing: dict[int, int] = {}  # solution -> the prefix its search is probing now
    prompts: dict[tuple[int, int], tuple] = {}  # (solution, step) -> what its rollouts are drawn from, made once
    # a rollout record names its solution by id: read on past a probe only where the id names one solution of the batch
    one_of_its_id = {id for id, count in Counter(solution.solution_id for solution in solutions).items() if count == 1}
    written: set[tuple[int, int]] = set()  # (solution, step) found positive by a correct rollout of a shorter prefix
    fitted = False  # whether some round fitted a prior (without one no probe stops early as negative)
    while True:
        probes = []
        for s, state in enumerate(searches):
            if s in ledger.failed:
                continue
            if s not in probing:
                step = state.next_probe()
                if step is None:
                    continue
                probing[s] = step
            step = probing[s]
            drawn = _drawn(ledger.counts[s][step])
            probes.append(Probe(s, step, drawn, min(settings.round_size, settings.rollouts - drawn)))
        if not probes and not final_checks:
            break
        first_record = len(ledger.records)
        ledger.record(sampler.send(probes), checker, final_checks=final_checks)
        final_checks = ()
        correct_texts: dict[tuple[str, int], list[str]] = {}  # (solution id, step) -> this round's correct rollouts
        for record in ledger.records[first_record:]:
            if record.verdict == "correct" and record.finish_reason != FINAL_ANSWER_FINISH:
                correct_texts.setdefault((record.solution_id, record.step_index), []).append(record.text)
        counts = _distinct_counts(ledger, sampler, prompts)
        prior = fit_prior(counts.values(), PRIOR_FROM)
        fitted = fitted or prior is not None
        # (problem, reference) whose completer has shown it is sure: a prefix whose every rollout reached the answer,
        # none whose rollouts split
        split = {key[:2] for key, (c, n) in counts.items() if 0 < c < n}
        sure = {key[:2] for key, (c, n) in counts.items() if c == n} - split
        retraced: list[tuple[int, int, str, int]] = []  # (solution, its probe, a correct rollout, the prefix it wrote to)
        for probe in probes:
            s, step = probe.solution, probe.step
            if s in ledger.failed:  # rejected whole
                continue
            if ledger.closed(s, step):
                searches[s].beyond_context(step)
                del probing[s]
                continue
            problem = (solutions[s].problem, solutions[s].reference_answer)  # prompt_of's first two parts
            own = ledger.counts[s][step]
            verdict = _verdict(ledger, own, settings, prior if problem in sure else None)
            if verdict is True and 2 * own.n_correct < own.n_rollouts:  # most of its rollouts failed
                searches[s].doubt(step)
                del probing[s]
                continue
            if verdict != "open":
                searches[s].observe(step, verdict)
                del probing[s]
            if verdict is True and solutions[s].solution_id in one_of_its_id:  # and every longer prefix a correct rollout wrote
                state = searches[s]
                last = min(state.size, state.high if state.high is not None else state.size) - 1
                for text in correct_texts.get((solutions[s].solution_id, step), ()):
                    reached = written_through(solutions[s], step, text, last)
                    if reached > step:
                        retraced.append((s, step, text, reached))
        for s, (step, reached) in _reached_from(retraced, solutions, checker).items():
            searches[s].written_through(reached)
            written.update((s, i) for i in range(step + 1, reached + 1))
    infer_from_searches(ledger, solutions, searches, settings)
    for steps in ledger.counts:
        for step in steps:
            if step.measured_by == "rollouts" and _drawn(step) < settings.rollouts:
                step.measured_by = "early_stop"
    outcome = ledger.outcome()
    outcome.prior_fitted = fitted
    outcome.written_through = sum(ledger.counts[s][i].measured_by == "inferred" for s, i in written if s not in ledger.failed)
    return outcome


def written_through(solution: Solution, step: int, text: str, last: int) -> int:
    """The longest prefix, up to `last`, that a completion `text` of prefix `step` wrote word for word: the prefix as
    the completer would be given it is the shorter one followed by the completion's first characters."""
    shorter = assistant_prefix(solution.steps[: step + 1], solution.thinking_steps)
    reached = step
    for longer_step in range(step + 1, last + 1):
        longer = assistant_prefix(solution.steps[: longer_step + 1], solution.thinking_steps)
        if not longer.startswith(shorter) or not text.startswith(longer[len(shorter) :]):
            break
        reached = longer_step
    return reached


def _reached_from(retraced: list[tuple[int, int, str, int]], solutions: Sequence[Solution], checker: Checker) -> dict[int, tuple[int, int]]:
    """Solution -> (its probe, the longest prefix one of its correct rollouts wrote word for word and then reached the
    answer from): what the rollout wrote after that prefix is checked on its own. A rollout correct by an answer in
    the steps it copied (a step that states it) reached nothing from the longer prefix: it is read to a shorter one,
    or not at all."""
    reached: dict[int, tuple[int, int]] = {}
    pending = retraced
    while pending:
        rest = [(s, step, text, to, _after(solutions[s], step, to, text)) for s, step, text, to in pending]
        verdicts = checker.check_many([(response_part(after), solutions[s].reference_answer) for s, _, _, _, after in rest],
                                      [solutions[s].problem for s, *_ in rest])  # fmt: skip
        pending = []
        for (s, step, text, to, _), verdict in zip(rest, verdicts):
            if verdict.verdict == "correct":
                reached[s] = (step, max(to, reached.get(s, (step, step))[1]))
            elif to - 1 > max(step, reached.get(s, (step, step))[1]):
                pending.append((s, step, text, to - 1))
    return reached


def _after(solution: Solution, step: int, to: int, text: str) -> str:
    """What a completion `text` of prefix `step`, which wrote the solution word for word through prefix `to`, wrote
    after it: the completion of that longer prefix."""
    shorter = assistant_prefix(solution.steps[: step + 1], solution.thinking_steps)
    longer = assistant_prefix(solution.steps[: to + 1], solution.thinking_steps)
    return text[len(longer) - len(shorter) :]


def _distinct_counts(ledger: StepLedger, sampler: PrefixSampler, prompts: dict) -> dict[tuple, tuple[int, int]]:
    """(correct, counted) of each distinct prefix measured by rollouts: identical prefixes of one problem (twin
    solutions, shared first steps) are one measurement, counted once, at the most rollouts any of them drew."""
    best: dict[tuple, tuple[int, int]] = {}
    for s, steps in enumerate(ledger.counts):
        for i, step in enumerate(steps):
            if step.measured_by == "rollouts":
                key = prompts.get((s, i)) or prompts.setdefault((s, i), sampler.prompt_of(s, i))
                if key not in best or step.n_rollouts > best[key][1]:
                    best[key] = (step.n_correct, step.n_rollouts)
    return best


def _drawn(step: StepCounts) -> int:
    return step.n_sampled if step.measured else 0


def _verdict(ledger: StepLedger, step: StepCounts, settings: StrategySettings, prior) -> bool | None | str:
    """True (positive), False (negative), None (no verdict: too few rollouts counted), or "open" (draw on)."""
    if step.n_correct > 0:
        return True
    drawn = _drawn(step)
    if ledger.too_few_counted(step):  # cut or timed out too often to call it 0: draw on while N allows
        return None if drawn >= settings.rollouts else "open"
    if drawn >= settings.rollouts:
        return False
    if prior is not None and prior.chance_of_success(step.n_rollouts, settings.rollouts - drawn) < settings.stop_risk:
        return False
    return "open"

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
shown the completer sure of it: prefixes of the problem every counted rollout of which reached the answer,
holding at least SURE_FROM (2) counted rollouts between them, and none whose rollouts split (some right, some
wrong). Only counted rollouts show it: a prefix whose rollouts were all cut, still thinking or timed out
(0 of 0) shows nothing, and one lucky rollout (1 of 1, a positive probe under --round-size 1) is not enough.
Elsewhere it draws to N, as first-error does.
Where completers are sure (rates near 0 or 1) a negative probe stops after a rollout or two; where they are
not, it draws on towards N.

A positive probe most of whose rollouts failed is in doubt: a prefix past the first error reaches the answer now
and then, and a search that probes one steps over the first error (exhaustive's first negative prefix lies
before it). Rates fall at an error, so the search looks before such a probe for a negative prefix first, as
if it were negative, and goes on after it only if it finds none (labeler/labeling/strategies/first_error.py,
_Search.doubt). Doubted: a positive probe fewer than half of whose counted rollouts are correct (in rounds of
2, one whose first round failed and whose next gave one correct rollout, not two); rollouts cut by the budget
under --truncated excluded are not counted, so not failures.

A rollout is evidence past its own prefix where its text allows. One that wrote the solution's next steps word
for word (each whole, separator and all) is, after each of them, a completion of that longer prefix, and what it
wrote after one is checked on its own (an answer stated in a copied step is not one the longer prefix reached):
right or wrong, each such rollout counts for each prefix it reached, failures as well as successes (one cut by
its budget or whose check timed out, for none). Those are not the prefix's own rollouts (not exhaustive's draws
of it), so a positive probe's search passes a longer prefix without probing it only on as much evidence as a
probe of it would give, and more: at least RETRACED_FROM (2) counted retracing rollouts and at least a round's
(--round-size), not doubted by the rule above (fewer than half correct), and the chance that its own N rollouts
would all fail, given those counts under a uniform prior over its rate, below --stop-risk (at N = 8 and the
default 0.05: 2 of 2 passes, 1 of 2 does not, 0.055; not the batch's prior: pooled over the unit's right
prefixes, it would call a lucky wrong one sure). Every prefix up to the one passed must qualify; a prefix
already found negative by its own rollouts bounds the reach; galloping, the next probe is the prefix after the
last one passed, most often where the rollouts left the solution. Only hard labels are read this way: those steps are `retraced` (hard label
positive, soft null, no counts of their own; the retracing rollouts are in the rollouts table under the prefix
they were drawn from).

Labels are honest about what was drawn: a prefix that reached its N rollouts has its soft label
correct / N, as exhaustive's; one stopped earlier is `early_stop` (its hard label, a null soft label, its
counts written: correct/drawn under a rule that stops on the outcomes is biased); steps between probes are
`inferred`, as first-error's.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from labeler.inputs.traces import response_part
from labeler.labeling.beta_binomial import UNIFORM, fit_prior
from labeler.labeling.generation import Generator
from labeler.labeling.prompts import assistant_prefix
from labeler.labeling.rollouts import FINAL_ANSWER_FINISH, TIMEOUT, TRUNCATED, BatchOutcome, Checker, PrefixSampler, Probe, StepLedger
from labeler.labeling.strategies import StrategySettings, checked_final_steps, sampled_prefixes
from labeler.labeling.strategies.first_error import _Search, infer_from_searches
from labeler.records import Solution, StepCounts

PRIOR_FROM = 16  # distinct prefixes of the batch counted twice or more before a prior is fitted (and a probe may stop early)
SURE_FROM = 2  # counted rollouts, all correct, a problem's unsplit prefixes need between them to show its completer sure
RETRACED_FROM = 2  # counted retracing rollouts (and at least a round's) a prefix needs to be passed without a probe


def search(solutions: Sequence[Solution], generator: Generator, checker: Checker, settings: StrategySettings) -> BatchOutcome:
    ledger = StepLedger(solutions, settings.truncated, settings.sampling.max_new_tokens, settings.min_counted_rollouts)
    sampler = PrefixSampler(solutions, generator, sampling=settings.sampling, seed=settings.seed)
    searches = [_Search(size=sampled_prefixes(solution, settings.final_step, checker)) for solution in solutions]
    final_checks = checked_final_steps(solutions, settings.final_step, checker)
    probing: dict[int, int] = {}  # solution -> the prefix its search is probing now
    prompts: dict[tuple[int, int], tuple] = {}  # (solution, step) -> what its rollouts are drawn from, made once
    # a rollout record names its solution by id: read on past a probe only where the id names one solution of the batch
    ids = Counter(solution.solution_id for solution in solutions)
    readable = {solution.solution_id: s for s, solution in enumerate(solutions) if ids[solution.solution_id] == 1}
    # solution -> prefix -> [correct, counted] of the rollouts of shorter prefixes that wrote the solution through it
    retraced: list[dict[int, list[int]]] = [{} for _ in solutions]
    written: set[tuple[int, int]] = set()  # (solution, step) passed without a probe, on the rollouts that retraced it
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
        _read_retraces(ledger.records[first_record:], solutions, readable, searches, checker, retraced, settings.truncated)
        counts = _distinct_counts(ledger, sampler, prompts)
        prior = fit_prior(counts.values(), PRIOR_FROM)
        fitted = fitted or prior is not None
        sure = _sure_problems(counts)
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
            if verdict is True and _doubted(own.n_correct, own.n_rollouts):
                searches[s].doubt(step)
                del probing[s]
                continue
            if verdict != "open":
                searches[s].observe(step, verdict)
                del probing[s]
            if verdict is True:  # and every longer prefix that rollouts retraced, as a probe of it would have found it
                reached = _passable(searches[s], step, retraced[s], settings)
                if reached > step:
                    searches[s].written_through(reached)
                    written.update((s, i) for i in range(step + 1, reached + 1))
    infer_from_searches(ledger, solutions, searches, settings)
    for steps in ledger.counts:
        for step in steps:
            if step.measured_by == "rollouts" and _drawn(step) < settings.rollouts:
                step.measured_by = "early_stop"
    for s, i in written:
        step = ledger.counts[s][i]
        if step.measured_by == "inferred" and step.inferred_hard:
            step.measured_by = "retraced"
    outcome = ledger.outcome()
    outcome.prior_fitted = fitted
    outcome.written_through = sum(ledger.counts[s][i].measured_by == "retraced" for s, i in written if s not in ledger.failed)
    return outcome


def _sure_problems(counts: dict[tuple, tuple[int, int]]) -> set[tuple]:
    """(problem, reference) whose completer has shown it is sure: prefixes of it every counted rollout of which reached
    the answer, holding SURE_FROM counted rollouts or more between them, and none whose rollouts split (some right, some
    wrong). A prefix with no counted rollout (all cut, still thinking or timed out) shows nothing; one lucky rollout
    (1 of 1, under --round-size 1) is not enough."""
    split = {key[:2] for key, (c, n) in counts.items() if 0 < c < n}
    all_correct = Counter()
    for key, (c, n) in counts.items():
        if c == n:
            all_correct[key[:2]] += n
    return {problem for problem, counted in all_correct.items() if counted >= SURE_FROM} - split


def _doubted(correct: int, counted: int) -> bool:
    """The doubt rule, for a probed prefix and for one reached by retracing rollouts alike: fewer than half of its counted
    rollouts correct."""
    return 2 * correct < counted


def _passable(state: _Search, step: int, retraced: dict[int, list[int]], settings: StrategySettings) -> int:
    """The longest prefix after a positive probe of `step` that the search may pass without probing: every prefix up to it
    reached by at least RETRACED_FROM (and a round's) counted rollouts that retraced the solution, failed ones counted
    too, not doubted by them, and settled by them: the chance that its own N rollouts would all fail, under a uniform
    prior updated by those counts, below --stop-risk. Never at or past a prefix known negative."""
    needed = max(RETRACED_FROM, settings.round_size)
    last = min(state.size, state.high if state.high is not None else state.size) - 1
    reached = step
    for k in range(step + 1, last + 1):
        correct, counted = retraced.get(k, (0, 0))
        if counted < needed or _doubted(correct, counted):
            break
        if UNIFORM.chance_all_fail(correct, counted, settings.rollouts) >= settings.stop_risk:
            break
        reached = k
    return reached


def _read_retraces(records, solutions: Sequence[Solution], readable: dict[str, int], searches: list[_Search], checker: Checker,
                   retraced: list[dict[int, list[int]]], truncated: str = "excluded") -> None:  # fmt: skip
    """Add to `retraced` what a round's rollouts say of the longer prefixes they wrote word for word: for each prefix a
    rollout retraced, whether what it wrote after that prefix reached the answer on its own (checked apart: an answer
    stated in a copied step is not one the longer prefix reached). Every checked rollout counts, a failed one as a
    failure; one cut by its budget (under --truncated excluded) or whose check timed out counts for none, as for its own
    prefix; one left unchecked under --truncated incorrect (still inside the thinking) counts as a failure, as for its own
    prefix (rollouts.py record)."""
    pending: dict[tuple[str, str, str], list[tuple[int, int]]] = {}  # (after, reference, problem) -> the (solution, prefix) it reached
    for record in records:
        s = readable.get(record.solution_id)
        if s is None or record.finish_reason == FINAL_ANSWER_FINISH or record.verdict == TIMEOUT:
            continue
        if record.verdict == TRUNCATED and truncated != "incorrect":
            continue
        solution = solutions[s]
        reached = written_through(solution, record.step_index, record.text, searches[s].size - 1)
        for k in range(record.step_index + 1, reached + 1):
            if record.verdict == TRUNCATED:  # unchecked, counted as wrong
                retraced[s].setdefault(k, [0, 0])[1] += 1
                continue
            after = response_part(_after(solution, record.step_index, k, record.text))
            pending.setdefault((after, solution.reference_answer, solution.problem), []).append((s, k))
    if not pending:
        return
    verdicts = checker.check_many([(after, reference) for after, reference, _ in pending], [problem for *_, problem in pending])
    for reached, verdict in zip(pending.values(), verdicts):
        if verdict.verdict.value == TIMEOUT:
            continue
        for s, k in reached:
            tally = retraced[s].setdefault(k, [0, 0])
            tally[0] += verdict.verdict == "correct"
            tally[1] += 1


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

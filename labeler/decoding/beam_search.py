"""Step-level beam search guided by a PRM, on any Generator (the vLLM engine, a test double).

Per problem: the first round samples B x K first steps from the problem; every later round samples
K next steps from each kept beam that is still open. A step ends at the step separator (a stop
string: the engine stops there, and the separator is kept, so the next prompt continues exactly
what the model wrote). Each new partial solution is scored by the PRM and ranked by the aggregate
of its step scores (`aggregate`, default `min`: its least trusted step, as best-of-N selects; or
`last`, `product`, `mean`; equal ones, to RANK_DIGITS, by the newest step's score); the top B of the
new ones and of the beams that already finished are kept. A proposal ends its beam when it does not stop at the separator: it states the answer ("The
answer is ..."; its line is finished, as in labeling), the model ends its turn or writes a stop
string (`answer`, `ended`), or it runs out of its step budget (`cut`). The search of a problem ends
when every kept beam has ended, or after `max_steps` steps (beams still open end as `step_limit`).

The answer is the best-scored kept beam among those that ended on their own (`answer`, `ended`),
else the best-scored kept beam; it is correct when it ended on its own and the checker finds the
reference answer in its last step (as a best-of-N candidate's is checked). Identical partial
solutions of a problem are kept once; a blank step is dropped (its tokens still count). Every
generated token counts, the proposals not kept too; prompts are not counted.

All beams of all problems expand in one generate call per round, and all new partial solutions
are scored in one call of the scorer. Each request's seed derives from --seed, the problem and the
steps so far, so a run is reproducible and does not depend on batch order (labeler/ids.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from labeler.evaluation.solutions import SolutionToScore
from labeler.ids import derived_seed, stable_id
from labeler.labeling import prompts
from labeler.labeling.generation import GenerationRequest, Generator, SamplingSettings
from labeler.labeling.rollouts import Checker
from labeler.prm.scorers import StepScorer
from labeler.prm.solution_scores import aggregate, checked_scores

RANK_DIGITS = 6  # beams whose aggregates agree to this many decimals tie, and the newest step's score decides

OPEN, ANSWER, ENDED, CUT, STEP_LIMIT, NO_ROOM, FAILED = "open", "answer", "ended", "cut", "step_limit", "no_room", "failed"
ENDED_ON_ITS_OWN = (ANSWER, ENDED)


@dataclass(frozen=True)
class SearchSettings:
    beams: int
    proposals: int
    max_steps: int
    separator: str
    aggregate: str
    seed: int
    sampling: SamplingSettings  # the step budget; its stop strings hold the separator (`step_sampling`)


def step_sampling(base: SamplingSettings, separator: str, step_max_new_tokens: int) -> SamplingSettings:
    """`base` (temperature, top_p, stop strings, answer marker) with a step's budget, stopping at the separator."""
    return SamplingSettings(
        temperature=base.temperature,
        top_p=base.top_p,
        max_new_tokens=step_max_new_tokens,
        stop=(separator, *(s for s in base.stop if s != separator)),
        answer_marker=base.answer_marker,
        answer_max_tokens=base.answer_max_tokens,
    )


@dataclass(frozen=True)
class SearchProblem:
    problem_id: str
    problem: str
    reference_answer: str


@dataclass
class Beam:
    steps: tuple[str, ...]
    step_scores: list[float | None]
    score: float | None
    status: str
    tokens: int  # generated for its own steps

    def rank(self) -> tuple[float, float]:
        """Higher is better: the aggregate, to RANK_DIGITS (a prefix's steps are scored again each round, and move in
        the 7th digit with the batch: children of one beam share a `min` up to that noise), then the newest step's score."""
        if self.score is None:
            return -math.inf, -math.inf
        newest = self.step_scores[-1] if self.step_scores and self.step_scores[-1] is not None else -math.inf
        return round(self.score, RANK_DIGITS), newest


@dataclass
class ProblemSearch:
    problem: SearchProblem
    kept: list[Beam] = field(default_factory=list)
    rounds: list[list[dict]] = field(default_factory=list)  # per round, every candidate considered (the trace)
    generated_tokens: int = 0
    requests: int = 0
    proposals: int = 0
    chosen: Beam | None = None
    answer: str | None = None
    verdict: str | None = None
    error: str | None = None  # why a request of this problem could not run (its prompt outgrew the context, ...)

    @property
    def done(self) -> bool:
        return bool(self.rounds) and not any(beam.status == OPEN for beam in self.kept)

    @property
    def correct(self) -> bool:
        return self.chosen is not None and self.chosen.status in ENDED_ON_ITS_OWN and self.verdict == "correct"

    def summary(self) -> dict:
        return {
            "problem_id": self.problem.problem_id,
            "problem": self.problem.problem,
            "reference_answer": self.problem.reference_answer,
            "correct": self.correct,
            "answer": self.answer,
            "verdict": self.verdict,
            "finished_by": None if self.chosen is None else self.chosen.status,
            "steps": None if self.chosen is None else list(self.chosen.steps),
            "score": None if self.chosen is None else self.chosen.score,
            "generated_tokens": self.generated_tokens,
            "answer_tokens": None if self.chosen is None else self.chosen.tokens,  # of the chosen beam's own steps
            "requests": self.requests,
            "proposals": self.proposals,
            "error": self.error,
            "rounds": self.rounds,
        }


def beam_search(
    problems: Sequence[SearchProblem],
    generator: Generator,
    scorer: StepScorer,
    settings: SearchSettings,
    progress: Callable[[str], object] | None = None,
) -> list[ProblemSearch]:
    searches = [ProblemSearch(problem, kept=[Beam((), [], None, OPEN, 0)]) for problem in problems]
    for depth in range(settings.max_steps):
        expanding = [(search, b, beam) for search in searches if not search.done for b, beam in enumerate(search.kept) if beam.status == OPEN]
        if not expanding:
            break
        if progress is not None:
            open_problems = len({id(search) for search, _, _ in expanding})
            tokens = sum(search.generated_tokens for search in searches)
            progress(f"step {depth + 1}: {len(expanding)} open beams of {open_problems} problems; {tokens} tokens generated so far")
        requests = [_request(search.problem, beam, settings, first=depth == 0) for search, _, beam in expanding]
        results = generator.generate(requests, settings.sampling)
        proposed: dict[int, list[tuple[dict, Beam | None]]] = {id(search): [] for search, _, _ in expanding}
        to_score: list[tuple[ProblemSearch, Beam]] = []
        for (search, parent_index, parent), result in zip(expanding, results, strict=True):
            search.requests += 1
            if result.error is not None:  # the prompt no longer fits the context, or the engine refused it
                parent.status = NO_ROOM if result.context_exceeded else FAILED
                search.error = result.error
                continue
            search.proposals += len(result.completions)
            for completion in result.completions:
                search.generated_tokens += completion.tokens
                entry, beam = _proposal(parent, parent_index, completion, settings, last_step=depth + 1 == settings.max_steps)
                proposed[id(search)].append((entry, beam))
                if beam is not None and beam.steps != parent.steps:
                    to_score.append((search, beam))
        _score(to_score, scorer, settings)
        for search in {id(s): s for s, _, _ in expanding}.values():
            _keep_top(search, proposed[id(search)], settings.beams)
    for search in searches:
        finished = [beam for beam in search.kept if beam.status in ENDED_ON_ITS_OWN and beam.steps]
        search.chosen = max(finished or [beam for beam in search.kept if beam.steps], key=Beam.rank, default=None)
    return searches


def check_answers(searches: Sequence[ProblemSearch], checker: Checker) -> None:
    """The chosen beam's last step against the reference answer, for every search that chose one."""
    chosen = [search for search in searches if search.chosen is not None]
    pairs = [(search.chosen.steps[-1], search.problem.reference_answer) for search in chosen]
    verdicts = checker.check_many(pairs, [search.problem.problem for search in chosen])  # the question, as candidates are checked
    for search, result in zip(chosen, verdicts):
        search.answer, search.verdict = result.extracted, result.verdict.value


def _request(problem: SearchProblem, beam: Beam, settings: SearchSettings, first: bool) -> GenerationRequest:
    return GenerationRequest(
        user_message=prompts.user_message(problem.problem),
        assistant_prefix="".join(step + settings.separator for step in beam.steps),
        n=settings.beams * settings.proposals if first else settings.proposals,
        seed=derived_seed(settings.seed, "beam-search", problem.problem, *beam.steps),
    )


def _proposal(parent: Beam, parent_index: int, completion, settings: SearchSettings, last_step: bool) -> tuple[dict, Beam | None]:
    """The partial solution a proposed step makes (None: a blank step, dropped), and its trace entry."""
    text = completion.text
    if prompts.ANSWER_MARKER in text:
        status, step = ANSWER, text.rstrip()
    elif completion.finish_reason == "length":
        status, step = CUT, text.rstrip()
    elif text.endswith(settings.separator):
        status, step = (STEP_LIMIT if last_step else OPEN), text[: -len(settings.separator)]
    else:
        status, step = ENDED, text.rstrip()
    beam = None
    if step.strip():
        beam = Beam(parent.steps + (step,), [], None, status, parent.tokens + completion.tokens)
    elif status != OPEN and parent.steps:  # nothing more to say: the parent's solution is whole
        beam = Beam(parent.steps, parent.step_scores, parent.score, status, parent.tokens + completion.tokens)
    entry = {"parent": parent_index, "text": text, "tokens": completion.tokens, "finish_reason": completion.finish_reason, "status": status}
    return entry, beam


def _score(pairs: list[tuple[ProblemSearch, Beam]], scorer: StepScorer, settings: SearchSettings) -> None:
    """Step scores and rank of every new partial solution, in one call of the scorer."""
    if not pairs:
        return
    solutions = [
        SolutionToScore(search.problem.problem_id, stable_id(search.problem.problem_id, *beam.steps), search.problem.problem, beam.steps)
        for search, beam in pairs
    ]
    for (_, beam), scores in zip(pairs, scorer.step_scores(solutions), strict=True):
        beam.step_scores = checked_scores(scores, len(beam.steps))[0]
        beam.score = aggregate(beam.step_scores, settings.aggregate)


def _keep_top(search: ProblemSearch, proposed: list[tuple[dict, Beam | None]], width: int) -> None:
    """Keep the `width` best of the beams that had already ended and of the new partial solutions;
    the round's trace records each with its score and whether it was kept."""
    carried = [({"carried": True, "status": beam.status}, beam) for beam in search.kept if beam.status != OPEN]
    seen, ranked = set(), []
    for entry, beam in carried + proposed:
        entry.update(steps=None if beam is None else len(beam.steps), score=None if beam is None else beam.score, kept=False)
        if beam is None:
            entry["dropped"] = "blank step"
        elif (beam.steps, beam.status) in seen:
            entry["dropped"] = "duplicate"
        else:
            seen.add((beam.steps, beam.status))
            ranked.append((entry, beam))
    ranked.sort(key=lambda pair: pair[1].rank(), reverse=True)  # stable: ties keep their order (earlier beams, then proposals)
    for entry, _ in ranked[:width]:
        entry["kept"] = True
    search.kept = [beam for _, beam in ranked[:width]]
    search.rounds.append([entry for entry, _ in carried + proposed])

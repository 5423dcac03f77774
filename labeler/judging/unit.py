"""Judging one work unit: K critiques of each solution, their verdict, and the unit's tables.

`JudgingTask` is what the executors run (labeler/labeling/job.py: UnitTask), as they run labeling:
- `generate`, the engine's work, in rounds of one generate call for the whole unit: round 0 asks for
  every vote of every solution; each later round resamples, with a new seed, the votes whose critique
  could not be read (labeler/judging/critique.py) or was cut by its token budget, up to
  --critique-retries rounds;
- `finish` builds the judgments table from the votes (their majority, the agreement) and sends to
  rejected/ each solution with a vote still unread, or that the engine could not judge (a prompt too
  long for its context), with the reason. No answer checker is involved.

Vote v's sample a is drawn with a seed derived from --seed, the prompt's text, v and a: the same
requests whatever the batch, the shard size or the worker, like labeling's rollouts.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from labeler.ids import derived_seed
from labeler.judging.config import JudgeConfig
from labeler.judging.critique import parse_critique
from labeler.judging.prompts import critique_prompt
from labeler.judging.tables import JudgedSolution, JudgmentProvenance, Vote, judgments_table
from labeler.labeling.generation import GenerationRequest, Generator
from labeler.labeling.planning import WorkUnit
from labeler.labeling.rollouts import Checker
from labeler.labeling.tables import rejected_table
from labeler.labeling.unit import UnitResult
from labeler.records import RejectedRow, Solution
from labeler.store.shard_store import JUDGMENTS_DIR, REJECTED_DIR


def critique_seed(base_seed: int, prompt: str, vote: int, sample: int) -> int:
    return derived_seed(base_seed, prompt, "vote", str(vote), "sample", str(sample))


@dataclass
class SolutionUnderJudgment:
    solution: Solution
    prompt: str
    votes: list[Vote]
    tokens: int = 0  # every sample's
    failure: str | None = None  # why the engine could not judge it at all
    failure_field: str = "critique"

    def unread(self) -> list[int]:
        return [v for v, vote in enumerate(self.votes) if vote.index is None]


@dataclass
class GeneratedJudgments:
    unit: WorkUnit
    solutions: list[SolutionUnderJudgment]
    started: float
    samples: int = 0  # critiques drawn, resamples included
    resamples: int = 0


@dataclass(frozen=True)
class JudgingTask:
    """A judge as a unit task: critiques of every solution of the unit (labeler/labeling/job.py: UnitTask)."""

    config: JudgeConfig
    config_hash: str
    samples_name = "critiques"

    def planned_solutions(self, unit: WorkUnit) -> int:
        return len(unit.rows)

    def generate(self, unit: WorkUnit, generator: Generator, checker: Checker | None = None) -> GeneratedJudgments:
        config = self.config
        started = time.monotonic()
        items = []
        for row in unit.rows:
            solution = row.given_solution()
            prompt = critique_prompt(config.template, solution.problem, solution.steps)
            items.append(SolutionUnderJudgment(solution, prompt, [Vote() for _ in range(config.votes)]))
        generated = GeneratedJudgments(unit, items, started)
        for sample in range(1 + config.critique_retries):
            todo = [(item, v) for item in items if item.failure is None for v in item.unread()]
            if not todo:
                break
            requests = [GenerationRequest(item.prompt, "", 1, critique_seed(config.seed, item.prompt, v, sample)) for item, v in todo]
            results = generator.generate(requests, config.sampling)
            generated.samples += len(todo)
            generated.resamples += len(todo) if sample else 0
            for (item, v), request, result in zip(todo, requests, results):
                if result.error is not None:
                    if item.failure is None:
                        item.failure = f"the engine could not judge it: {result.error}"
                        item.failure_field = "steps" if result.context_exceeded else "critique"
                    continue
                completion = result.completions[0]
                item.tokens += completion.tokens
                vote = item.votes[v]
                vote.samples += 1
                if completion.truncated:
                    vote.problem = f"cut by its token budget after {completion.tokens} tokens, before its verdict"
                    continue
                parsed = parse_critique(completion.text, len(item.solution.steps), item.solution.steps)
                if parsed.index is None:
                    vote.problem = parsed.problem
                    continue
                vote.critique, vote.index, vote.seed = completion.text, parsed.index, request.seed
        return generated

    def finish(self, generated: GeneratedJudgments, checker: Checker | None = None, engine: dict | None = None) -> UnitResult:
        config, unit = self.config, generated.unit
        judged: list[JudgedSolution] = []
        rejected: list[RejectedRow] = []
        rejected_tokens = 0
        for item in generated.solutions:
            reason = item.failure or _unread_reason(item, config.votes)
            if reason is None:
                judged.append(JudgedSolution(item.solution, item.votes, item.tokens))
                continue
            rejected_tokens += item.tokens
            steps = json.dumps(list(item.solution.steps))[:2000]
            rejected.append(RejectedRow(item.solution.row_index, item.failure_field, f"solution {item.solution.solution_id}: {reason}",
                                        item.solution.problem_id, steps))  # fmt: skip
        provenance = JudgmentProvenance(unit.unit_id, config.model, config.seed, config.template_hash, self.config_hash)
        tables = {JUDGMENTS_DIR: judgments_table(judged, provenance)}
        if rejected:
            tables[REJECTED_DIR] = rejected_table(rejected, stage="judge")
        stats = {
            "solutions": len(judged),
            "steps": sum(len(item.solution.steps) for item in judged),
            # the job machinery counts a unit's samples as "rollouts": here the critiques drawn, resamples included
            "rollouts": generated.samples,
            "critique_resamples": generated.resamples,
            "generated_tokens": sum(item.generated_tokens for item in judged) + rejected_tokens,
            "rejected_tokens": rejected_tokens,
            "rejected": len(rejected),
            "seconds": round(time.monotonic() - generated.started, 3),
        }
        return UnitResult(unit.unit_id, unit.shard_name, tables, stats, engine)


def _unread_reason(item: SolutionUnderJudgment, votes: int) -> str | None:
    unread = item.unread()
    if not unread:
        return None
    vote = item.votes[unread[0]]
    more = f" ({len(unread)} of its {votes} votes alike)" if len(unread) > 1 else ""
    return f"critique {unread[0] + 1} of {votes} could not be read in {vote.samples} samples{more}; the last: {vote.problem}"

"""One reward per completion from a PRM: the completion cut into steps, each step scored, the scores
aggregated (min by default), plus, when asked, a verifiable reward for the final answer.

    reward = ProcessReward(RewardConfig(prm="qwen-prm:Qwen/Qwen2.5-Math-PRM-7B", answer_weight=1.0))
    results = reward.rewards(problems, completions, references)   # one Reward per completion
    values = [r.value for r in results]                             # None where it could not be measured

A reward that could not be measured is None with its reason, never a number: a completion with no
step (empty), one with a step past the PRM's length limit (an aggregate of the steps that fit would
reward a cut completion as if the PRM had read it all), one the PRM cannot read (its text holds the
PRM's own step marker, named in the reason), one with a step score that is not a finite number (NaN, inf: None
in step_scores, named in the reason), or, with an answer weight, one whose reference
is missing (None, NaN: pandas' missing value, blank, or the text of a missing value: "nan", "None", "null",
"<NA>", any case, as pandas' astype(str) and CSV exports write one; never checked against "nan": the rule
the label job reads references by too, labeler/inputs/missing_answers.py) or whose answer
check timed out or could not compare the answer. A completion with no final answer is a wrong answer (0).
Beside its reason (which names its counts and values: "1 of 3 steps unscored: past the PRM's length limit") each
such reward has a reason_kind, one of REASON_KINDS, the same for every sample of one cause: what the RL paths
count by and their setup check (labeler/rewards/setup_check.py) groups by.
"""

from __future__ import annotations

import numbers
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from labeler.inputs.missing_answers import missing_answer
from labeler.checking.verdicts import Verdict
from labeler.evaluation.solutions import SolutionToScore
from labeler.inputs.splitting import split_steps
from labeler.prm.solution_scores import PAST_LENGTH_LIMIT, aggregate, checked_scores, is_score
from labeler.rewards.config import RewardConfig

# Every kind of reason a reward is unmeasured (Reward.reason_kind): the reason itself names its counts and values
# ("3 of 5 steps unscored: past the PRM's length limit", "no reference answer (the text 'nan'): ..."), its kind
# does not, so that the samples of one cause count as one, whatever their step counts.
EMPTY = "empty completion"
PAST_LIMIT = f"steps unscored: {PAST_LENGTH_LIMIT}"
NOT_FINITE = "steps unscored: a score that is not a finite number"
UNREADABLE = "steps unscored: the PRM cannot read the text (its own step marker)"
NO_REFERENCE = "no reference answer"
CHECK_TIMEOUT = f"answer check {Verdict.TIMEOUT.value}"
CHECK_UNPARSEABLE = f"answer check {Verdict.UNPARSEABLE.value}"
# verl's compute_score (labeler/rewards/verl_score.py): a sample whose extra_info gives no problem text
NO_EXTRA_INFO = "no extra_info"
NO_QUESTION = "extra_info has no 'question'"
QUESTION_NOT_TEXT = "extra_info's 'question' is not text"
REASON_KINDS = (EMPTY, PAST_LIMIT, NOT_FINITE, UNREADABLE, NO_REFERENCE, CHECK_TIMEOUT, CHECK_UNPARSEABLE, NO_EXTRA_INFO, NO_QUESTION, QUESTION_NOT_TEXT)


@dataclass
class Reward:
    value: float | None  # process + answer_weight * answer; None when not measured (reason says why)
    process: float | None = None  # the aggregate of the step scores
    answer_correct: bool | None = None  # the verifiable part: None when not asked for, or not known
    step_scores: list[float | None] = field(default_factory=list)  # None: a step the PRM did not score
    reason: str | None = None  # why value is None
    # the reason's kind, without its counts or values (REASON_KINDS): what the counts by reason and the setup check group by
    reason_kind: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


class ProcessReward:
    """A PRM (any spec `labeler score` takes) as a reward function over batches of completions.
    The PRM loads at construction; the answer checker, only when answer_weight > 0, at the first call."""

    def __init__(self, config: RewardConfig, scorer=None):
        from labeler.prm.devices import place
        from labeler.prm.scorers import load_scorer

        self.config = config
        self.scorer = scorer or load_scorer(
            config.prm,
            placement=place(config.device, config.precision),
            batch_size=config.batch_size,
            trust_remote_code=config.trust_remote_code,
            max_length=config.max_length,
        )
        self._checker = None
        self._checker_lock = threading.Lock()  # callers on several threads (verl's reward loop) share one checker

    def rewards(
        self, problems: Sequence[str], completions: Sequence[str], references: Sequence[str | int | float | None] | None = None
    ) -> list[Reward]:
        """One Reward per completion, in order. ValueError, naming the item, for lists of unequal length, a
        text that is not a string (or not valid Unicode), no references at all or one of another type while
        answer_weight > 0. References may be numbers (a dataset's answer column often is); they are read only when
        answer_weight > 0; a missing one (None, NaN, blank, "nan": `missing_reference`) makes its completion's reward unmeasured."""
        self._validate(problems, completions, references)
        missing: dict[int, str] = {}
        if self.config.answer_weight > 0:
            missing = {i: why for i, reference in enumerate(references) if (why := missing_reference(reference))}
            references = [str(reference) for reference in references]
        steps = [split_steps(text, self.config.split) for text in completions]
        to_score = [i for i, s in enumerate(steps) if s]
        solutions = [SolutionToScore(f"p{i}", f"c{i}", problems[i], tuple(steps[i])) for i in to_score]
        given = self.scorer.step_scores(solutions) if solutions else []
        scores: dict[int, list[float | None]] = {}
        unscored = {}  # why a completion's steps give no process reward (the render check's reason, a non-finite score, the length limit)
        for i, solution, step_scores in zip(to_score, solutions, given, strict=True):
            scores[i], _, why = checked_scores(step_scores, len(steps[i]), scorer=self.scorer, solution=solution)
            if why is not None:
                unscored[i] = why
        answers = None
        if self.config.answer_weight > 0:
            to_check = [i for i in range(len(completions)) if i not in missing]
            checked = self._answers([problems[i] for i in to_check], [completions[i] for i in to_check], [references[i] for i in to_check])
            answers = dict(zip(to_check, checked, strict=True))
        return [
            self._reward(i, steps[i], scores.get(i), unscored.get(i), None if answers is None else answers.get(i), missing.get(i))
            for i in range(len(completions))
        ]

    def _reward(
        self, i: int, steps: list[str], step_scores: list[float | None] | None, unscored: str | None, answer: Verdict | None,
        no_reference: str | None,
    ) -> Reward:  # fmt: skip
        if not steps:
            return Reward(None, reason=f"{EMPTY}: no step to score", reason_kind=EMPTY)
        process = aggregate(step_scores, self.config.aggregate)
        reward = Reward(None, process=process, step_scores=step_scores)
        if process is None:
            count = sum(not is_score(score) for score in step_scores)
            reward.reason = f"{count} of {len(steps)} steps unscored: {unscored}"
            reward.reason_kind = unscored_kind(unscored)
            return reward
        if no_reference is not None:  # the answer part cannot be measured: never a verdict against "nan"
            reward.reason, reward.reason_kind = no_reference, NO_REFERENCE
            return reward
        if answer is None:
            reward.value = process
            return reward
        if answer in (Verdict.TIMEOUT, Verdict.UNPARSEABLE):
            reward.reason = f"answer check {answer.value}: the final answer could not be compared with the reference"
            reward.reason_kind = CHECK_TIMEOUT if answer == Verdict.TIMEOUT else CHECK_UNPARSEABLE
            return reward
        reward.answer_correct = answer == Verdict.CORRECT
        reward.value = process + self.config.answer_weight * float(reward.answer_correct)
        return reward

    def _answers(self, problems, completions, references) -> list[Verdict]:
        if not completions:
            return []
        with self._checker_lock:
            if self._checker is None:
                from labeler.checking.checker import AnswerChecker

                self._checker = AnswerChecker()
        results = self._checker.check_many(list(zip(completions, references)), list(problems))
        return [result.verdict for result in results]

    def _validate(self, problems, completions, references) -> None:
        if len(problems) != len(completions):
            raise ValueError(f"{len(problems)} problems but {len(completions)} completions: one problem per completion")
        if references is not None and len(references) != len(completions):
            raise ValueError(f"{len(references)} references but {len(completions)} completions: one reference per completion")
        for name, texts in (("problem", problems), ("completion", completions)):
            for i, text in enumerate(texts):
                if not isinstance(text, str):
                    raise ValueError(f"{name} {i}: a string, not {type(text).__name__}")
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError as error:  # a lone surrogate: no tokenizer takes it
                    raise ValueError(f"{name} {i}: not valid Unicode ({error.reason} at character {error.start})") from None
        if self.config.answer_weight > 0:
            if references is None:
                raise ValueError("answer_weight > 0 needs a reference answer per completion")
            for i, reference in enumerate(references):
                number = isinstance(reference, numbers.Real) and not isinstance(reference, bool)
                if not (number or isinstance(reference, str) or missing_reference(reference)):
                    raise ValueError(f"reference {i}: a reference answer is text or a number, not {type(reference).__name__}")

    def close(self) -> None:
        with self._checker_lock:
            if self._checker is not None:
                self._checker.close()
                self._checker = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def missing_reference(reference) -> str | None:
    """Why `reference` is no reference answer (labeler/inputs/missing_answers.py's missing_answer: None, NaN or
    another non-finite number, blank text, the text of a missing value, MISSING_TEXTS, any case); None when it is one.
    The label job reads the same values as no answer (the row is rejected, naming them)."""
    what = missing_answer(reference)
    return None if what is None else f"{NO_REFERENCE} ({what}): the answer part of the reward is not measured"


def unscored_kind(unscored: str | None) -> str:
    """The kind of labeler/prm/solution_scores.py's unscored_reason: past the length limit, a value that is not a
    finite score ("the PRM gave step 2 nan, not a finite score"), else the scorer's render check (its marker in the text)."""
    if unscored == PAST_LENGTH_LIMIT:
        return PAST_LIMIT
    if unscored is not None and unscored.endswith("not a finite score"):
        return NOT_FINITE
    return UNREADABLE

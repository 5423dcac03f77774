"""RLHFlow's PRM format (rlhflow:MODEL, e.g. RLHFlow/Llama3.1-8B-PRM-Deepseek-Data).

The PRM is a chat model trained on conversations in which every step is a user turn (the first
one prefixed by the problem and a space) and the assistant answers each with "+" or "-":

    user: {problem} {step 1}   assistant: +   user: {step 2}   assistant: +   ...

rendered by the model's own chat template. Step i's score is P("+") against "-" at the position
that predicts the assistant's answer to step i. One forward pass over the whole conversation reads
every step: a causal model's prediction there sees only the turns up to step i, the same as a
conversation cut after it (RLHFlow's own example reads the last answer of each cut conversation).
The answer's token is found by rendering the conversation cut after step i with the assistant's
turn opened (the template's generation prompt): that text must be a prefix of the whole
conversation, and the whole conversation's token starting where it ends must be the "+" answer.
Where it is not, the solution gets no scores (with a warning) rather than scores read at a guessed token.
"""

from __future__ import annotations

from labeler.evaluation.solutions import SolutionToScore
from labeler.prm.adapters.loading import context_length, load_causal_lm, model_config, single_token
from labeler.prm.adapters.positions import RenderError, TokenPairScorer
from labeler.prm.devices import Placement
from labeler.prm.model import PRMLoadError

GOOD_TOKEN, BAD_TOKEN = "+", "-"
PROBE = SolutionToScore("probe", "probe", "What is 1 + 1?", ("1 + 1 = 2.", "The answer is 2."))


def conversation(problem: str, steps) -> list[dict]:
    turns = []
    for i, step in enumerate(steps):
        turns.append({"role": "user", "content": f"{problem.strip()} {step.strip()}" if i == 0 else step.strip()})
        turns.append({"role": "assistant", "content": GOOD_TOKEN})
    return turns


class RLHFlowScorer(TokenPairScorer):
    @classmethod
    def load(
        cls, model: str, *, placement: Placement, batch_size: int, trust_remote_code: bool, max_length: int | None, name: str,
        weights: bool = True,
    ):  # fmt: skip
        lm, tokenizer = load_causal_lm(name, "rlhflow", model, placement, trust_remote_code, weights=weights)
        if not getattr(tokenizer, "chat_template", None):
            raise PRMLoadError(f"{name}: the tokenizer has no chat template: not an RLHFlow PRM (a chat of steps answered '+' or '-')")
        scorer = cls(
            lm,
            good_token_id=single_token(name, tokenizer, GOOD_TOKEN, "good-step token"),
            bad_token_id=single_token(name, tokenizer, BAD_TOKEN, "bad-step token"),
            name=name,
            tokenizer=tokenizer,
            placement=placement,
            batch_size=batch_size,
            max_length=context_length(lm.config if lm is not None else model_config(name, model, trust_remote_code), tokenizer, max_length),
        )
        if not getattr(tokenizer, "is_fast", False):
            raise PRMLoadError(f"{name}: a slow (Python) tokenizer; the rlhflow adapter needs a fast one for token offsets")
        try:
            scorer.render(PROBE)
        except RenderError as error:
            raise PRMLoadError(
                f"{name}: its chat template does not show the assistant's '+' answers as RLHFlow's format does ({error})"
            ) from error
        return scorer

    def _text(self, turns: list[dict], open_assistant_turn: bool) -> str:
        return self.tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=open_assistant_turn)

    def render(self, solution: SolutionToScore) -> tuple[list[int], list[int]]:
        turns = conversation(solution.problem, solution.steps)
        text = self._text(turns, open_assistant_turn=False)
        encoded = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids, starts = encoded["input_ids"], {start: i for i, (start, end) in enumerate(encoded["offset_mapping"]) if end > start}
        positions = []
        for i in range(len(solution.steps)):
            prefix = self._text(turns[: 2 * i + 1], open_assistant_turn=True)
            answer = starts.get(len(prefix)) if text.startswith(prefix) else None
            if not answer or ids[answer] != self.token_ids[0]:
                raise RenderError(f"the assistant's '+' answer to step {i} is not a token of its own after the opened assistant turn")
            positions.append(answer - 1)  # the token whose next-token logits give the answer to step i
        return ids, positions

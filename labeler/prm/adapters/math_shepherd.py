"""Math-Shepherd's PRM format (math-shepherd:MODEL, e.g. peiyi9979/math-shepherd-mistral-7b-prm).

The PRM is a causal LM trained to follow each step's tag with "+" (right) or "-" (wrong). The
solution is shown as it was in training, encoded in one piece (a BOS first when the tokenizer adds one):

    {problem} Step 1: {step 1} ки\\nStep 2: {step 2} ки\\n...Step k: {step k} ки

and step i's score is P("+") against "-" from the next-token logits at its "ки" tag, with the token
ids taken as the model card takes them (`card_token_ids`). A step that already opens with "Step N:"
keeps only our numbering; a "ки" tag standing alone in a step's text (a Math-Shepherd-formatted input; the
splitter's KI_TAGS) is dropped, so the tags are exactly the ones we put. The letters "ки" inside a word ("У Ники",
Russian, or touching a digit or a stress mark) are text, kept as they are: where the tokenizer writes them as the
tag's token, the solution cannot be shown with one tag per step, and it is unscored with that reason
(positions.py), never scored at a word.
"""

from __future__ import annotations

import re

from labeler.evaluation.solutions import SolutionToScore
from labeler.inputs.splitting import KI_TAGS  # the tag as the splitter reads it
from labeler.prm.adapters.loading import context_length, load_causal_lm, model_config
from labeler.prm.adapters.positions import RenderError, TokenPairScorer
from labeler.prm.devices import Placement
from labeler.prm.model import PRMLoadError

STEP_TAG = "ки"
GOOD_TOKEN, BAD_TOKEN = "+", "-"
_OWN_NUMBERING = re.compile(r"^\s*Step\s*\d+\s*[:.]\s*", re.IGNORECASE)
PROBE = SolutionToScore("probe", "probe", "What is 1 + 1?", ("1 + 1 = 2.", "The answer is 2."))


def shown_step(step: str) -> str:
    """A step as the format shows it: without its own "Step N:" and without a tag standing alone."""
    return _OWN_NUMBERING.sub("", KI_TAGS.sub("", step)).strip()


def render_text(problem: str, steps) -> str:
    lines = [f"Step {i}: {shown_step(step)} {STEP_TAG}" for i, step in enumerate(steps, 1)]
    return f"{problem.strip()} " + "\n".join(lines)


def card_token_ids(name: str, tokenizer) -> tuple[int, int, int]:
    """(good, bad, step tag) ids as the model card reads them, which is what the PRM was trained on:

        candidate_tokens = tokenizer.encode(f"{good_token} {bad_token}")[1:]  # [648, 387]
        step_tag_id = tokenizer.encode(f"{step_tag}")[-1]  # 12902

    The "-" of "+ -" is the token of " -" where the tokenizer has one (not the "-" that opens a text),
    and the tag's last token, after the BOS and any lone prefix space. PRMLoadError unless each writes
    its text alone: a tokenizer of another format."""
    tag_ids = tokenizer.encode(STEP_TAG)
    if tokenizer.decode(tag_ids[-1:]).strip() != STEP_TAG:
        pieces = len(tokenizer(STEP_TAG, add_special_tokens=False)["input_ids"])
        raise PRMLoadError(f"{name}: the tokenizer writes the step tag {STEP_TAG!r} as {pieces} tokens, not one: not a PRM of this format")
    pair = tokenizer.encode(f"{GOOD_TOKEN} {BAD_TOKEN}")
    if pair[:1] == [tokenizer.bos_token_id]:  # the card's [1:]: its tokenizer puts a BOS first
        pair = pair[1:]
    if len(pair) != 2 or [tokenizer.decode([token]).strip() for token in pair] != [GOOD_TOKEN, BAD_TOKEN]:
        raise PRMLoadError(
            f"{name}: the tokenizer writes {GOOD_TOKEN + ' ' + BAD_TOKEN!r} as {tokenizer.convert_ids_to_tokens(pair)}, "
            "not one token each: not a PRM of this format"
        )
    return pair[0], pair[1], tag_ids[-1]


class MathShepherdScorer(TokenPairScorer):
    markers = (STEP_TAG,)

    def __init__(self, lm, *, tag_id: int, **settings):
        super().__init__(lm, **settings)
        self.tag_id = tag_id

    @classmethod
    def load(
        cls, model: str, *, placement: Placement, batch_size: int, trust_remote_code: bool, max_length: int | None, name: str,
        weights: bool = True,
    ):  # fmt: skip
        lm, tokenizer = load_causal_lm(name, "math-shepherd", model, placement, trust_remote_code, weights=weights)
        good, bad, tag = card_token_ids(name, tokenizer)
        scorer = cls(
            lm,
            tag_id=tag,
            good_token_id=good,
            bad_token_id=bad,
            name=name,
            tokenizer=tokenizer,
            placement=placement,
            batch_size=batch_size,
            max_length=context_length(lm.config if lm is not None else model_config(name, model, trust_remote_code), tokenizer, max_length),
        )
        try:
            scorer.render(PROBE)
        except RenderError as error:
            raise PRMLoadError(
                f"{name}: the tokenizer does not keep the step tag {STEP_TAG!r} one token in a solution ({error})"
            ) from error
        return scorer

    def shown_step(self, step: str) -> str:
        return shown_step(step)

    def render(self, solution: SolutionToScore) -> tuple[list[int], list[int]]:
        ids = self.tokenizer(render_text(solution.problem, solution.steps))["input_ids"]
        positions = [i for i, token in enumerate(ids) if token == self.tag_id]
        if len(positions) != len(solution.steps):
            raise RenderError(f"{len(positions)} step tags {STEP_TAG!r} found in the encoded solution for {len(solution.steps)} steps")
        return ids, positions

"""What every adapter does the same way: render a solution to token ids with one score position per
step, run the network over length-sorted batches, read one probability at each position.

An adapter supplies `render` (its format), `features` (the per-token output of its network) and
`probabilities` (how that output at a score position becomes P(step is right)). A solution longer
than the PRM's `max_length` is cut; its steps whose position falls beyond the cut get None. A
solution whose rendering does not give one position per step gets None for every step, with a
warning naming it and why (`render_problem`): never a score read at the wrong token. The usual
cause is text that holds the format's own marker (`markers`: Qwen's "<extra_0>", Math-Shepherd's
"ки", which Russian words contain), said as such, so that nobody raises --max-length for it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch

from labeler.evaluation.solutions import SolutionToScore
from labeler.prm.data import pad
from labeler.prm.devices import Placement

log = logging.getLogger("labeler.score")


class RenderError(ValueError):
    """A solution cannot be rendered with one score position per step; the message says why."""


class PositionScorer:
    name: str
    markers: tuple[str, ...] = ()  # the format's own marker texts, where it reads a step's score

    def __init__(self, *, name: str, tokenizer, placement: Placement, batch_size: int, max_length: int):
        self.name = name
        self.tokenizer = tokenizer
        self.placement = placement
        self.batch_size = batch_size
        self.max_length = max_length

    # --- what an adapter defines ------------------------------------------------------------

    def render(self, solution: SolutionToScore) -> tuple[list[int], list[int]]:
        """Token ids of the whole solution and one score position per step, in step order."""
        raise NotImplementedError

    def shown_step(self, step: str) -> str:
        """A step's text as the format shows it (an adapter may drop its marker from a step)."""
        return step

    def features(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The network's output per token, [batch, length, dim]."""
        raise NotImplementedError

    def probabilities(self, features: torch.Tensor) -> torch.Tensor:
        """P(step is right) from the features at score positions: [n, dim] -> [n]."""
        raise NotImplementedError

    # --- shared -------------------------------------------------------------------------------

    @property
    def pad_token_id(self) -> int:
        for token_id in (self.tokenizer.pad_token_id, self.tokenizer.eos_token_id):
            if token_id is not None:
                return token_id
        return 0  # padded positions are masked out

    def checked_render(self, solution: SolutionToScore) -> tuple[list[int], list[int]]:
        """`render`, with exactly one score position per step; RenderError naming why not, the marker
        in the text first: the render check every caller's reason comes from."""
        try:
            ids, positions = self.render(solution)
            if len(positions) != len(solution.steps):
                raise RenderError(f"{len(positions)} score positions for {len(solution.steps)} steps")
        except RenderError as error:
            cause = self.marker_in_text(solution)
            if cause is None:
                raise
            raise RenderError(cause) from error
        return ids, positions

    def marker_in_text(self, solution: SolutionToScore) -> str | None:
        """Which text of the solution holds one of the format's markers (None: none does)."""
        for marker in self.markers:
            where = ["the problem"] if marker in solution.problem else []
            where += [f"step {i}" for i, step in enumerate(solution.steps) if marker in self.shown_step(step)]
            if where:
                return f"{' and '.join(where[:3])} contain{'s' if len(where) == 1 else ''} the PRM's step marker {marker!r}, which its format reads as a step's end"
        return None

    def render_problem(self, solution: SolutionToScore) -> str | None:
        """Why the solution cannot be shown to this PRM with one score position per step (None: it can)."""
        try:
            self.checked_render(solution)
        except RenderError as error:
            return str(error)
        return None

    def sequences(self, solutions: Sequence[SolutionToScore]) -> list[tuple[list[int], list[int], int]]:
        """(input_ids cut to max_length, the positions that fit, steps) per solution."""
        out = []
        for solution in solutions:
            try:
                ids, positions = self.checked_render(solution)
            except RenderError as error:
                log.warning("solution %s: %s; its steps get no score from %s", solution.solution_id, error, self.name)
                out.append(([], [], len(solution.steps)))
                continue
            kept = [p for p in positions if p < self.max_length]
            out.append((ids[: self.max_length], kept, len(solution.steps)))
        return out

    @torch.no_grad()
    def step_scores(self, solutions: Sequence[SolutionToScore]) -> list[list[float | None]]:
        sequences = self.sequences(solutions)
        results: list[list[float | None]] = [[None] * steps for _, _, steps in sequences]
        order = sorted((i for i, s in enumerate(sequences) if s[1]), key=lambda i: len(sequences[i][0]))
        device = self.placement.device
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            input_ids, attention_mask = pad([sequences[i][0] for i in chunk], self.pad_token_id)
            with self.placement.autocast():
                features = self.features(input_ids.to(device), attention_mask.to(device))
            rows = torch.tensor([row for row, i in enumerate(chunk) for _ in sequences[i][1]], device=device)
            columns = torch.tensor([p for i in chunk for p in sequences[i][1]], device=device)
            probabilities = self.probabilities(features[rows, columns].float()).cpu().tolist()
            offset = 0
            for i in chunk:
                kept = len(sequences[i][1])
                results[i][:kept] = probabilities[offset : offset + kept]
                offset += kept
        return results


class TokenPairScorer(PositionScorer):
    """A causal LM that answers a step with a good or a bad token: P(good) against bad, from the
    next-token logits at the score position (Math-Shepherd's and RLHFlow's formats)."""

    def __init__(self, lm, *, good_token_id: int, bad_token_id: int, **settings):
        super().__init__(**settings)
        self.lm = lm
        self.token_ids = [good_token_id, bad_token_id]

    def features(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        # The decoder's last hidden states; the output layer runs only at score positions (probabilities).
        return self.lm.base_model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state

    def probabilities(self, features: torch.Tensor) -> torch.Tensor:
        output_layer = self.lm.get_output_embeddings()
        logits = output_layer(features.to(output_layer.weight.dtype))[:, self.token_ids]
        return torch.softmax(logits.float(), dim=-1)[:, 0]

"""Settings of `labeler bon` and `labeler search`, each declared once (flags come from them).

The candidates are sampled by a labeling job (labeler/decoding/candidates.py), so the sampling,
input and engine settings are LabelConfig's; these are the settings of best-of-N and of the search.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from labeler.labeling.config import check_choices, check_numbers, setting
from labeler.prm.solution_scores import AGGREGATES

BEST_OF_N, SEARCH, PRM = "best-of-N", "beam search", "PRM"
PRM_SPEC_HELP = "a checkpoint folder of labeler train (or its run folder, for best/) or an adapter spec of a public PRM"


@dataclass(frozen=True)
class BestOfNConfig:
    prm: tuple[str, ...] = setting(
        (), help=f"a PRM that scores the candidates (repeatable): {PRM_SPEC_HELP}", metavar="SPEC", group=PRM,
        default_text="none: majority vote, pass@N and random only",
    )  # fmt: skip
    candidates: int = setting(
        16,
        at_least=1,
        help="solutions sampled per problem-only row: the pool that best-of-N draws its N from (rows that carry a solution "
        "are candidates as they are, several rows per problem)",
        group=BEST_OF_N,
    )
    subsets: int = setting(
        1000,
        at_least=1,
        help="subsets of a problem's pool that estimate its votes at each N: all of them when there are at most this many, "
        "else this many random ones, seeded by --seed",
        group=BEST_OF_N,
    )
    prm_batch_size: int = setting(8, at_least=1, help="solutions per PRM forward pass", group=PRM)
    rescore: bool = setting(False, help="score the candidates again even where bon/scores/ holds a PRM's scores of them", group=PRM)

    def __post_init__(self):
        check_numbers(self)
        if len(set(self.prm)) != len(self.prm):
            raise ValueError("--prm: each PRM once")


@dataclass(frozen=True)
class SearchConfig:
    prm: str = setting(help=f"the PRM that ranks the beams: {PRM_SPEC_HELP}", metavar="SPEC", group=PRM)
    beams: int = setting(4, at_least=1, help="beams kept after each step (B)", group=SEARCH)
    proposals: int = setting(
        4, at_least=1, help="next steps sampled from each kept beam (K); the first step: B x K samples from the problem", group=SEARCH
    )
    max_steps: int = setting(12, at_least=1, help="steps per solution; a beam still open after them ends there, unanswered", group=SEARCH)
    step_max_new_tokens: int = setting(256, at_least=1, help="token budget of one step", group=SEARCH)
    step_separator: str = setting(
        "\\n\\n", help="text that ends a step (a stop string; steps are joined by it), with backslash escapes: \\n is a newline",
        group=SEARCH,
    )
    aggregate: str = setting(
        "min",
        choices=AGGREGATES,
        help="how a partial solution's step scores rank it: min (its least trusted step, as best-of-N selects by default), "
        "last (the newest step's score), product or mean; equal ones by the newest step's score",
        group=SEARCH,
    )
    best_of_n: bool = setting(
        True,
        flag="--no-best-of-n",
        help="skip best-of-N at equal generated tokens (its --candidates are sampled into --output as labeler bon samples them)",
        group=SEARCH,
    )

    def __post_init__(self):
        check_choices(self)
        check_numbers(self)
        if not self.separator:
            raise ValueError("--step-separator must not be empty")

    @property
    def separator(self) -> str:
        """The step separator as text: its backslash escapes (\\n, \\t, \\u0020) decoded."""
        try:
            return self.step_separator.encode("latin-1", "backslashreplace").decode("unicode_escape")
        except UnicodeDecodeError as error:
            raise ValueError(f"--step-separator {self.step_separator!r}: a bad backslash escape ({error.reason})") from None

    def to_dict(self) -> dict:
        return asdict(self)

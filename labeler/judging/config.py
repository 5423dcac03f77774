"""The settings of a judge job (`labeler judge`), declared like labeling's (labeler/labeling/config.py):
one field each, with its help and range, from which the CLI makes the flags. How rows are read and
the engine settings are labeling's own fields, taken from LabelConfig (`settings_view`), not declared twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from labeler.ids import stable_id
from labeler.judging.prompts import DEFAULT_TEMPLATE, PLACEHOLDERS, check_template
from labeler.labeling.config import (
    INPUT_OUTPUT,
    SEED_RANGE,
    TEMPERATURE_RANGE,
    JobSettings,
    LabelConfig,
    check_choices,
    check_numbers,
    names_with,
    setting,
    settings_view,
)
from labeler.labeling.generation import SamplingSettings

JUDGE = "judge"

# labeling's settings that mean the same to a judge: how rows are read, and the engine
FORMAT_AND_ENGINE = (
    "preset",
    "limit",
    "split_rule",
    "max_steps",
    "max_row_chars",
    "max_rejected_share",
    "columns",
    "trust_remote_code",
    "dtype",
    "max_model_len",
    "tensor_parallel_size",
    "gpu_memory_utilization",
)
_FormatAndEngine = settings_view("JudgeFormatAndEngine", LabelConfig, FORMAT_AND_ENGINE)

# What ends a critique besides the model's end of turn: text that opens another turn.
CRITIQUE_STOP = ("<|im_start|>", "<|endoftext|>")


@dataclass(frozen=True, kw_only=True)
class JudgeConfig(_FormatAndEngine, JobSettings):
    input: str = setting(
        help="solutions to judge: a `labeler label` output (its directory, a folder of labels shards, or one shard), "
        "or any input `labeler label` reads (jsonl, json, parquet, hf:NAME[:CONFIG][@SPLIT]; rows need steps, not an answer)",
        group=INPUT_OUTPUT,
    )
    output: str = setting(help="output directory (judgments/, rejected/, manifest.json)", group=INPUT_OUTPUT, may_change_on_resume=True)
    model: str = setting(
        help="judge model: hub id or local folder",
        group=JUDGE,
        cli_default=None,
        default_text="the embedded SmolLM2-135M-Instruct, far too weak to judge: for trying the command only",
    )
    votes: int = setting(1, at_least=1, help="critiques sampled per solution (K); the verdict is their majority, a tie going to the earliest error", group=JUDGE)
    critique_retries: int = setting(
        2,
        at_least=0,
        help="samples drawn again, each with another seed, for a critique that states no verdict (or contradicts itself) "
        "or was cut by its token budget; a solution whose critique still cannot be read goes to rejected/ with the reason",
        group=JUDGE,
    )
    template: str = setting(
        DEFAULT_TEMPLATE,
        flag="--prompt-template",
        metavar="FILE",
        cli_default=None,
        default_text="the built-in template",
        help="a text file whose text replaces the built-in critique prompt; in it "
        + "; ".join(f"{name} becomes {meaning}" for name, meaning in PLACEHOLDERS.items())
        + " ({problem} and {paragraphs} are required; nothing else is special)",
        group=JUDGE,
    )
    temperature: float = setting(
        0.7, **TEMPERATURE_RANGE, help="sampling temperature of the critiques (0: greedy, and resamples draw the same text)", group=JUDGE
    )
    top_p: float = setting(1.0, above=0, at_most=1, help="nucleus sampling of the critiques", group=JUDGE)
    max_new_tokens: int = setting(1024, at_least=1, help="token budget of each critique", group=JUDGE)
    seed: int = setting(
        0, **SEED_RANGE, help="base seed; each critique's seed derives from it, the prompt's text, the vote and the resample", group=JUDGE
    )
    shard_size: int = setting(64, at_least=1, help="solutions per work unit (one shard, one commit)", group=JUDGE)

    def __post_init__(self) -> None:
        check_choices(self)
        check_numbers(self)
        check_template(self.template)  # a TemplateError (a ValueError) names what it lacks

    @property
    def template_hash(self) -> str:
        return stable_id(self.template)

    @property
    def sampling(self) -> SamplingSettings:
        return SamplingSettings(temperature=self.temperature, top_p=self.top_p, max_new_tokens=self.max_new_tokens, stop=CRITIQUE_STOP)


JudgeConfig.ENGINE_ONLY = names_with(JudgeConfig, "may_change_on_resume")
JudgeConfig.GUARDS = names_with(JudgeConfig, "guard")

"""The settings of a labeling job, and which of them change its output (and so its config hash).

Each setting is declared once, as a dataclass field made by `setting(...)`: its default, its help
text, its choices and how its command-line flag is spelt live in the field's metadata, and the
CLI generates its flags from them (labeler/cli/flags.py). `StrategySettings` (what a strategy
reads) is a view of some LabelConfig fields (`settings_view`), not a second declaration.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import MISSING, asdict, dataclass, field

from labeler.ids import stable_id
from labeler.labeling.bounds import Bounds
from labeler.inputs.presets import COLUMN_FIELDS, PRESET_NAMES
from labeler.inputs.splitting import DEFAULT_MAX_STEPS, SPLIT_RULES
from labeler.labeling.generation import SamplingSettings

FINAL_STEP_MODES = ("check", "rollouts")
FINAL_ANSWER = "final-answer"  # the strategy that samples no rollouts: it checks each solution's stated answer
POSTERIOR = "posterior"  # the search that spends rollouts by doubt (labeler/labeling/strategies/posterior.py)
MONTE_CARLO_STRATEGIES = ("exhaustive", "first-error", "adaptive", POSTERIOR)  # the ones that sample rollouts from step prefixes
STRATEGIES = (*MONTE_CARLO_STRATEGIES, FINAL_ANSWER)
AFTER_FIRST_ERROR = ("negative", "unlabelled")
# The settings only some strategies read, and those strategies: `labeler label` refuses one given for another strategy
# (it would be ignored, silently).
READ_ONLY_BY = {
    "round_size": ("adaptive", POSTERIOR),
    "stop_risk": (POSTERIOR,),
    "ci_width": ("adaptive",),
    "after_first_error": ("first-error", POSTERIOR),
}
TRUNCATED_POLICIES = ("excluded", "incorrect")


def setting(
    default=MISSING,
    *,
    help: str,
    default_factory=MISSING,
    choices: tuple | None = None,
    flag: str | None = None,
    metavar: str | None = None,
    group: str | None = None,
    cli: bool = True,
    cli_default=MISSING,
    default_text: str | None = None,
    keys: tuple[str, ...] | None = None,
    may_change_on_resume: bool = False,
    guard: bool = False,
    at_least: float | None = None,
    above: float | None = None,
    at_most: float | None = None,
    below: float | None = None,
):
    """A settings field with what its command-line flag needs, all in one place.

    help: what it means (plain text, no argparse %-escapes); choices: the allowed values;
    flag: the flag's spelling when it is not `--name-with-dashes` (`--no-name` for a bool that
    defaults to True); group: the --help section; cli=False: no flag; cli_default: the flag's
    default when the field has none (or another one), e.g. None for "--model not given";
    default_text: how the default reads in --help (needed when it is None or empty); keys: for a
    dict field, one flag per key, spelt by `flag` with {key} in it; may_change_on_resume: a rerun
    of the same job or run may give another value (engine settings, the output location); guard: a
    check that may stop a job before it starts but never changes what it writes (outside the config
    hash, and not an engine setting either); at_least/above (the low end, closed/open) and
    at_most/below (the high end): the range of a number, held by `check_numbers`, shown in --help.
    """
    metadata = {
        "help": help,
        "choices": choices,
        "flag": flag,
        "metavar": metavar,
        "group": group,
        "cli": cli,
        "cli_default": cli_default,
        "default_text": default_text,
        "keys": keys,
        "may_change_on_resume": may_change_on_resume,
        "guard": guard,
        "bounds": Bounds.of(at_least=at_least, above=above, at_most=at_most, below=below),
    }
    return field(default=default, default_factory=default_factory, metadata=metadata)


def same_setting(source, name: str):
    """The setting `name` of the settings class `source`, for another class that takes it too: one
    declaration (default, help, range, flag) for both."""
    declared = {f.name: f for f in dataclasses.fields(source)}[name]
    return field(default=declared.default, default_factory=declared.default_factory, metadata=declared.metadata)


def names_with(cls, key: str) -> tuple[str, ...]:
    """The names of the fields of `cls` whose metadata sets `key`, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get(key))


def check_choices(config) -> None:
    """ValueError for the first field of `config` whose value is not among its declared choices."""
    for f in dataclasses.fields(config):
        choices = f.metadata.get("choices")
        if choices and getattr(config, f.name) not in choices:
            raise ValueError(f"{_flag(f)} must be one of {', '.join(choices)}")


def check_numbers(config) -> None:
    """ValueError for the first number of `config` that is not finite or not in its declared range."""
    for f in dataclasses.fields(config):
        check_number(f, getattr(config, f.name))


def check_number(f: dataclasses.Field, value) -> None:
    """ValueError, naming the flag, the value and the range, when `value` does not suit the setting `f`.
    A float flag parses "nan" and "inf", so this is where they are refused."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return  # None (not given), text, switches
    if not math.isfinite(value):
        raise ValueError(f"{_flag(f)} must be a finite number, got {value}")
    bounds = f.metadata.get("bounds")
    if bounds is not None and value not in bounds:
        raise ValueError(f"{_flag(f)} must be {bounds}, got {value}")


def _flag(f: dataclasses.Field) -> str:
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def settings_view(name: str, source, names: tuple[str, ...], **derived: type):
    """A frozen, keyword-only dataclass of some fields of `source` (their types, defaults and help
    declared there, not here) plus `derived` fields; `View.of(config)` reads them all from a
    `source` instance (derived ones from its attribute of the same name)."""
    by_name = {f.name: f for f in dataclasses.fields(source)}
    specs = [(n, kind, field(default=MISSING)) for n, kind in derived.items()]
    specs += [(n, by_name[n].type, _same_field(by_name[n])) for n in names]

    def of(cls, config):
        return cls(**{n: getattr(config, n) for n in (*derived, *names)})

    view = dataclasses.make_dataclass(name, specs, frozen=True, kw_only=True, namespace={"of": classmethod(of)})
    view.__doc__ = f"A view of {source.__name__}: {', '.join(names)}, and {', '.join(derived)} derived from it."
    return view


def _same_field(f: dataclasses.Field):
    """A field declared as `f` is: its default (or default factory) and its metadata."""
    return field(default=f.default, default_factory=f.default_factory, metadata=f.metadata)


# Ranges that the libraries would enforce only later, once a model is loaded (and after the output's manifest is written):
# the engine seeds numpy's global generator with --seed (np.random.seed takes [0, 2**32)), and vLLM refuses a
# temperature above 2. `setting(..., **SEED_RANGE)` for every seed of the project.
SEED_RANGE = {"at_least": 0, "at_most": 2**32 - 1}
TEMPERATURE_RANGE = {"at_least": 0, "at_most": 2}
# vLLM samples greedily below this temperature (its _SAMPLING_EPS), and then refuses a request for more than one
# completion ("n must be 1 when using greedy sampling"), once the model is loaded: LabelConfig refuses it first.
GREEDY_BELOW = 1e-5

INPUT_OUTPUT, ROLLOUTS, ENGINE = "input and output", "rollouts", "engine"
CLUSTER = "Ray cluster (without --workers the job runs in this process)"


class JobSettings:
    """What the job machinery (labeler/labeling/job.py) reads of a job's settings dataclass, whatever
    the job does (LabelConfig here, JudgeConfig in labeler/judging/config.py): which settings decide
    what it writes (`output_settings`, hashed into `config_hash`) and which are the engine's.

    A subclass sets ENGINE_ONLY (its `may_change_on_resume` fields: the output location and the engine
    settings) and GUARDS (its `guard` fields) after its declaration, with `names_with`."""

    ENGINE_ONLY: tuple[str, ...] = ()
    GUARDS: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return asdict(self)

    def output_settings(self) -> dict:
        """The settings that decide what the job writes; a rerun must match them to resume."""
        return {key: value for key, value in self.to_dict().items() if key not in self.ENGINE_ONLY + self.GUARDS}

    def config_hash(self) -> str:
        return stable_id(json.dumps(self.output_settings(), sort_keys=True))

    def engine_settings(self) -> dict:
        """The engine settings as asked for (what the engines resolved them to is in the engine records)."""
        return {key: getattr(self, key) for key in self.ENGINE_ONLY if key != "output"}

    def answers_file(self) -> str | None:
        """The file of reference answers the job reads beside its input (LabelConfig's --answers), if it has one."""
        return getattr(self, "answers", None)


@dataclass(frozen=True)
class LabelConfig(JobSettings):
    input: str = setting(
        help="jsonl, json (array), parquet, a folder of such files (one kind), or hf:NAME[:CONFIG][@SPLIT]",
        group=INPUT_OUTPUT,
        cli_default=None,
        default_text="the shipped sample problems",
    )
    output: str = setting(
        help="output directory (labels/, rollouts/, rejected/, manifest.json)", group=INPUT_OUTPUT, may_change_on_resume=True
    )
    model: str = setting(
        help="completer model: hub id or local folder", group=ROLLOUTS, cli_default=None, default_text="the embedded SmolLM2-135M-Instruct"
    )
    preset: str | None = setting(
        None, help=f"input format, one of {', '.join(PRESET_NAMES)}", group=INPUT_OUTPUT, default_text="auto-detected when unambiguous"
    )
    limit: int | None = setting(
        None, at_least=1, help="take only the first K rows", metavar="K", group=INPUT_OUTPUT, default_text="all rows"
    )
    split_rule: str = setting("auto", flag="--split", choices=SPLIT_RULES, help="how solution text is cut into steps", group=INPUT_OUTPUT)
    max_steps: int = setting(
        DEFAULT_MAX_STEPS,
        at_least=1,
        metavar="K",
        help="thinking split rule (a trace's thinking, or --split thinking): merge paragraphs into at most K steps "
        "of about equal length in characters",
        group=INPUT_OUTPUT,
    )
    max_row_chars: int = setting(50_000, at_least=1, help="rows longer than this are rejected", group=INPUT_OUTPUT)
    max_rejected_share: float = setting(
        0.5,
        at_least=0,
        at_most=1,
        guard=True,
        help="refuse the input (exit 2, with the commonest reason) when more than this share of its rows are rejected, "
        "judged over the first 100 rows (all rows when fewer); 1: never refuse for rejected rows. An input with no rows "
        "is always refused",
        group=INPUT_OUTPUT,
    )
    columns: dict[str, str] = setting(
        default_factory=dict,
        keys=COLUMN_FIELDS,
        flag="--{key}-column",
        metavar="COLUMN",
        help="column holding the {key}, for a format no preset knows or to override the preset",
        group=INPUT_OUTPUT,
        default_text="the preset's column",
    )
    answers: str | None = setting(
        None,
        metavar="FILE",
        help="reference answers joined by problem text (whitespace normalised), for rows that carry none, such as "
        "Math-Shepherd rows whose final step is tagged '-': a jsonl, json or parquet file of GSM8K rows, MATH rows or "
        "{problem, answer} rows; a row still without an answer is rejected",
        group=INPUT_OUTPUT,
        default_text="none",
    )
    sample_solutions: bool = setting(
        False,
        help="sample new solutions instead of labelling the input's own: read each row, whatever its --preset, as "
        "its problem and reference answer only (the answer where the preset finds it: GSM8K's after '####', "
        "math's answer or last \\boxed{}), leave out its solution or steps, and sample --solutions-per-problem "
        "solutions for it to label (as rows without a solution always are)",
        group=INPUT_OUTPUT,
    )
    rollouts: int = setting(8, at_least=1, help="completions sampled per step prefix (N)", group=ROLLOUTS)
    temperature: float = setting(
        0.7, **TEMPERATURE_RANGE, help="sampling temperature of rollouts and sampled solutions (0: greedy)", group=ROLLOUTS
    )
    top_p: float = setting(
        1.0,
        above=0,
        at_most=1,
        help="nucleus sampling: sample from the smallest set of tokens whose probability reaches this",
        group=ROLLOUTS,
    )
    max_new_tokens: int = setting(256, at_least=1, help="token budget of each completion", group=ROLLOUTS)
    min_rollout_tokens: int = setting(
        16,
        at_least=1,
        help="a prefix so deep in a long trace that the model's context leaves fewer tokens than this for its "
        "rollouts is not sampled: it and the longer prefixes are unlabelled, with the reason (above it, the budget "
        "shrinks to what the context leaves, recorded in each rollout's token_budget)",
        group=ROLLOUTS,
    )
    seed: int = setting(
        0,
        **SEED_RANGE,
        help="base seed; each request's seed derives from it and the prompt's text (problem, reference, steps so far)",
        group=ROLLOUTS,
    )
    shard_size: int = setting(64, at_least=1, help="solutions per work unit (one shard, one commit)", group=ROLLOUTS)
    solutions_per_problem: int = setting(4, at_least=1, help="solutions sampled for rows that carry only a problem, and for every row with --sample-solutions (M)", group=ROLLOUTS)
    solution_max_new_tokens: int = setting(512, at_least=1, help="token budget of each sampled solution", group=ROLLOUTS)
    final_step: str = setting(
        "check",
        choices=FINAL_STEP_MODES,
        help="label the last step by checking its stated answer (one rollout) or by rollouts",
        group=ROLLOUTS,
    )
    truncated: str = setting(
        "excluded",
        choices=TRUNCATED_POLICIES,
        help="a rollout cut by its token budget, or one from inside a trace's thinking that ends before closing it: "
        "excluded (verdict truncated, soft = correct / finished rollouts; a step with every rollout cut is unlabelled) "
        "or incorrect (checked as it stands, as Math-Shepherd did; one still thinking is counted wrong unchecked)",
        group=ROLLOUTS,
    )
    min_counted_rollouts: int = setting(
        1,
        at_least=1,
        help="a step none of whose rollouts is correct is hard 0 only when at least this many of its rollouts were "
        "counted (not cut, not still thinking, not timed out); with fewer it is unlabelled with the reason, and no label "
        "is inferred from it (adaptive and posterior sample on until this many counted, or N were sampled); at most --rollouts. Whatever this says, "
        "such a step most of whose rollouts timed out is unlabelled",
        group=ROLLOUTS,
    )
    max_timeout_share: float = setting(
        0.05,
        at_least=0,
        at_most=1,
        help="reject a work unit (with the reason) whose answer checks still time out after a retry on more than "
        "this share of its checks (and at least 8): a sick checker must not write a unit of unknowns. Below it, a "
        "timed-out check is left out of the label (counted in n_timeouts), never a wrong answer",
        group=ROLLOUTS,
    )
    stop_after_answer: bool = setting(
        True,
        help='let completions run on after the line that states "The answer is: ..." (by default they end with it; '
        "a rollout from inside a trace's thinking, with that line of its response)",
        group=ROLLOUTS,
    )
    stop: tuple[str, ...] = setting(
        (), help="extra stop string (repeatable)", metavar="TEXT", group=ROLLOUTS, default_text="only text that opens a new turn or problem"
    )
    strategy: str = setting(
        "exhaustive",
        choices=STRATEGIES,
        help="exhaustive: N rollouts from every prefix; first-error: binary search for the first error (hard labels); "
        "adaptive: rollouts in rounds until each prefix's label is settled; posterior: first-error's search, each probe "
        "in rounds, stopped at its first correct rollout or once a Beta-Binomial prior fitted to the job's counts makes "
        "a success in its remaining rollouts unlikely (--stop-risk); final-answer: no rollouts, only the last step "
        "by its stated answer (outcome labels; the candidates of labeler bon)",
        group=ROLLOUTS,
    )
    after_first_error: str = setting(
        "negative", choices=AFTER_FIRST_ERROR, help="first-error and posterior: label of the unsampled steps after the first error", group=ROLLOUTS
    )
    round_size: int = setting(2, at_least=1, help="adaptive and posterior: rollouts per prefix per round", group=ROLLOUTS)
    stop_risk: float = setting(
        0.05,
        above=0,
        below=1,
        help="posterior: stop a prefix with no correct rollout as negative once the chance that its remaining rollouts up "
        "to N would reach the answer (under the prior fitted to the batch's counts) is below this; and pass a prefix, "
        "unprobed, on rollouts of a shorter one that wrote it word for word only when the chance that its own N "
        "rollouts would all fail (under a uniform prior and those rollouts' counts) is below this",
        group=ROLLOUTS,
    )
    ci_width: float = setting(
        0.5, above=0, at_most=1, help="adaptive: stop a prefix once its 95% Wilson interval is narrower", group=ROLLOUTS
    )
    write_rollouts: bool = setting(True, flag="--no-rollouts", help="do not write the rollouts/ table", group=INPUT_OUTPUT)
    trust_remote_code: bool = setting(False, help="allow model/dataset repositories to run their own code", group=ENGINE)
    # Engine settings, outside the config hash. dtype and max_model_len can change samples, but what
    # matters is what the engine resolves them to (auto is another dtype on another machine): that
    # is in the job's engine record (labeling/engine_record.py), compared on resume instead.
    dtype: str = setting(
        "auto",
        help="weight dtype passed to vLLM; auto: vLLM's choice from the checkpoint on a GPU, "
        "on a CPU bfloat16 where it is native, else float32",
        group=ENGINE,
        may_change_on_resume=True,
    )
    max_model_len: int | None = setting(
        None,
        at_least=1,
        help="context length of the engine (prompt and completion)",
        group=ENGINE,
        default_text="the model's own",
        may_change_on_resume=True,
    )
    tensor_parallel_size: int = setting(1, at_least=1, help="GPUs per engine", group=ENGINE, may_change_on_resume=True)
    gpu_memory_utilization: float = setting(
        0.9,
        above=0,
        at_most=1,
        help="share of each GPU's memory vLLM may take for weights and KV cache",
        group=ENGINE,
        may_change_on_resume=True,
    )

    def __post_init__(self) -> None:
        check_choices(self)
        check_numbers(self)
        if "" in self.stop:  # vLLM refuses it, once the model is loaded
            raise ValueError("--stop must not be empty")
        if self.strategy == "final-answer" and self.final_step != "check":
            raise ValueError("--strategy final-answer labels the last step by checking its answer: it needs --final-step check")
        if self.greedy and self.strategy in MONTE_CARLO_STRATEGIES and self.rollouts > 1:
            raise ValueError(
                f"--temperature {self.temperature:g} is greedy sampling: every rollout of a prefix would be the same "
                f"completion (vLLM refuses to draw more than one), so --rollouts {self.rollouts} would label nothing; "
                "use a temperature above 0 for N rollouts, or --rollouts 1"
            )
        if self.greedy and self.sample_solutions and self.solutions_per_problem > 1:
            raise ValueError(self.greedy_solutions_error("--sample-solutions samples them for every row"))
        if self.min_counted_rollouts > self.rollouts:  # no step could ever be hard 0: every wrong step unlabelled
            raise ValueError(
                f"--min-counted-rollouts {self.min_counted_rollouts} is more than --rollouts {self.rollouts}: no step could ever be labelled 0"
            )

    @property
    def greedy(self) -> bool:
        """Whether the engine samples greedily at this temperature (one completion per prompt, always the same)."""
        return self.temperature < GREEDY_BELOW

    def greedy_solutions_error(self, why: str) -> str:
        """The refusal of --solutions-per-problem above 1 under greedy sampling, `why` solutions are sampled."""
        return (
            f"--temperature {self.temperature:g} is greedy sampling: the {self.solutions_per_problem} solutions sampled per "
            f"problem (--solutions-per-problem {self.solutions_per_problem}; labeler bon's --candidates) would all be the "
            f"same one (vLLM refuses to draw more than one), and {why}; use a temperature above 0, or one solution per problem"
        )

    @property
    def sampling(self) -> SamplingSettings:
        return self._sampling(self.max_new_tokens)

    @property
    def solution_sampling(self) -> SamplingSettings:
        return self._sampling(self.solution_max_new_tokens)

    @property
    def strategy_settings(self):
        """What the strategy reads of this config (labeler/labeling/strategies: StrategySettings)."""
        from labeler.labeling.strategies import StrategySettings

        return StrategySettings.of(self)

    def _sampling(self, budget: int) -> SamplingSettings:
        from labeler.labeling.prompts import ANSWER_MARKER, DEFAULT_STOP

        return SamplingSettings(
            temperature=self.temperature,
            top_p=self.top_p,
            max_new_tokens=budget,
            min_budget=min(self.min_rollout_tokens, budget),
            stop=DEFAULT_STOP + tuple(self.stop),
            answer_marker=ANSWER_MARKER if self.stop_after_answer else None,
        )

    def output_settings(self) -> dict:
        """The settings that decide what the job writes; a rerun must match them to resume."""
        settings = super().output_settings()
        if settings["answers"] is None:  # added after jobs were started: without it they keep their config hash and resume
            del settings["answers"]
        if settings["min_counted_rollouts"] == 1:  # likewise: at its default, jobs started before it resume
            del settings["min_counted_rollouts"]
        if not settings["sample_solutions"]:  # likewise
            del settings["sample_solutions"]
        if settings["strategy"] != POSTERIOR:  # it means nothing to the others (and jobs started before it resume)
            del settings["stop_risk"]
        return settings


# The output location and the engine settings: a resumed job may change them (the dtype and context
# length as long as the engine resolves them as before: labeler/store/manifest.py, check_same_engine).
LabelConfig.ENGINE_ONLY = names_with(LabelConfig, "may_change_on_resume")
# Checks of the input that can only stop a job before it starts: a rerun may change them, and
# neither the config hash nor the manifest's engine settings hold them.
LabelConfig.GUARDS = names_with(LabelConfig, "guard")


@dataclass(frozen=True)
class ClusterSettings:
    """How a labeling job runs on Ray (workers/ray_executor.py). Declared here, beside the job's
    settings, so that the CLI builds its flags without importing ray."""

    workers: int = setting(
        at_least=1,
        help="Ray workers, one vLLM engine each", group=CLUSTER, cli_default=None, default_text="none, the job runs in this process"
    )
    address: str | None = setting(
        None,
        flag="--ray-address",
        help="cluster to join: auto, ray://HOST:10001",
        group=CLUSTER,
        default_text="RAY_ADDRESS, else a new local Ray",
    )
    gpus_per_worker: int | None = setting(
        None,
        at_least=0,
        help="GPUs each worker reserves = its engine's tensor parallel size",
        group=CLUSTER,
        default_text="--tensor-parallel-size where the cluster has GPUs, else 0",
    )
    # How fast the answers are checked, not what the labels are: outside the config hash like all of these.
    checker_processes: int | None = setting(
        None,
        at_least=1,
        help="answer-checker processes per machine, shared by the workers there (at least one each)",
        group=CLUSTER,
        default_text="the machine's CPU count in Ray",
    )
    worker_start_timeout: float = setting(
        1800.0,
        above=0,
        help="seconds a Ray worker may take to start (wait for room on a node, load its engine) before it is given up; "
        "a job left with no worker then stops instead of waiting forever",
        group=CLUSTER,
    )
    engine_log_level: str = setting("ERROR", cli=False, help="vLLM's log level in the workers (INFO with --verbose)")

    def __post_init__(self) -> None:
        check_numbers(self)

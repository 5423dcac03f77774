"""Presets: how the rows of a known dataset format become SourceRows.

- gsm8k: problem `question`; steps = the lines of `answer` before `####`, calculator
  annotations `<<...>>` removed; reference = the text after `####`, commas removed.
- math (alias math-500): `problem`; steps = `solution` split by the split rule, or None (the
  job samples solutions) when there is no solution; reference = `answer`, else the last
  \\boxed{} of the solution.
- processbench: `problem`, `steps` (a list), `answer` (the hub's rows have none: --answers FILE).
- math-shepherd: `input` = problem + "Step 1: ... ки\nStep 2: ... ки"; the problem is the text
  before "Step 1:", the steps are split on `ки`. No answer column: the reference is the
  "The answer is: X" of the final step when `label` tags that step `+`, else the answer that
  --answers FILE gives the problem (labeler/inputs/answers.py).
- prm800k: `question.problem`, `question.ground_truth_answer`; per `label.steps[i]` the chosen
  completion, else the human completion, else the first completion, which ends the solution.
- columns: --problem-column, --answer-column, and --steps-column (a list) or
  --solution-column (text to split), else no steps.
- trace: a reasoning model's trajectory and response (labeler/inputs/traces.py): the problem in
  `problem`/`question`/`prompt`, the reference in `answer`/`reference_answer`/`ground_truth`, the
  response in `response`/`output`/`completion`/`generation`/`content` (--solution-column), either as
  `<think>...</think>response` or beside a reasoning field `reasoning`/`reasoning_content`/`thinking`
  (--reasoning-column). Steps: the thinking split by the `thinking` rule (into at most --max-steps
  chunks; another --split rule when given), then the whole response as one final step.

Sampling new solutions (PresetOptions.sample_solutions, from --sample-solutions): whatever the preset,
a row is read as its problem and reference answer only, each found where the preset finds it
(GSM8K's after `####`, math's `answer` or the last \\boxed{} of its solution, the `+` final step of a
math-shepherd row), and its steps are left out (None): the job samples solutions for it as for a
problem-only row. The row's solution is then neither split nor checked (a prm800k row's completions,
a trace's thinking), except where the preset reads the answer from it.

`math-500` is an alias of `math`. Column flags (PresetOptions.*_column) override a preset's
columns; given without a preset they select `columns`. With an answer book (PresetOptions.answers,
from --answers FILE), a math-shepherd, processbench, math or columns row that carries no reference
answer of its own gets the one the book gives its problem. A reference answer that is a missing value
(labeler/inputs/missing_answers.py's missing_answer: null, NaN, inf, blank, or the text "nan", "None", "null",
"<NA>" in any case, as pandas and CSV exports write one) is no answer, wherever it was read: the preset's
other sources and the book are tried as for an absent one, and a row left with none is rejected naming the
value; the reward paths read references by the same rule. A bad row raises RowError naming the
field; a bad configuration raises InputError.
"""

from __future__ import annotations

import math as _math
import re
from dataclasses import dataclass, fields, replace
from functools import lru_cache, partial
from typing import TYPE_CHECKING

from labeler.inputs.missing_answers import missing_answer
from labeler.ids import stable_id
from labeler.inputs.readers import InputError
from labeler.records import RowError, SourceRow
from labeler.inputs.splitting import DEFAULT_MAX_STEPS, KI_TAG, KI_TAGS, SPLIT_RULES, STRAY_KI, split_steps
from labeler.inputs.traces import THINK_CLOSE, has_think_tags, parse_trace

if TYPE_CHECKING:
    from labeler.inputs.answers import AnswerBook

PRESET_NAMES = ("gsm8k", "math", "math-500", "processbench", "math-shepherd", "prm800k", "trace", "columns")
_ALIASES = {"math-500": "math"}

_CALCULATOR = re.compile(r"<<[^<>]*>>")  # GSM8K's calculator annotations: 9*2=$<<9*2=18>>18
_FIRST_STEP = re.compile(r"Step 1\s*:")
_LAST_ANSWER_IS = re.compile(r".*The answer is:?\s*(.*)", re.DOTALL)


@dataclass(frozen=True)
class PresetOptions:
    split_rule: str = "auto"
    max_row_chars: int = 50_000
    problem_column: str | None = None
    answer_column: str | None = None
    solution_column: str | None = None
    steps_column: str | None = None
    id_column: str | None = None
    answers: AnswerBook | None = None  # --answers FILE: reference answers by problem text, for rows without one
    reasoning_column: str | None = None
    max_steps: int = DEFAULT_MAX_STEPS  # the thinking split rule's bound
    sample_solutions: bool = False  # --sample-solutions: problem and reference answer only, the row's solution left out

    @classmethod
    def from_columns(
        cls,
        split_rule: str,
        max_row_chars: int,
        columns: dict[str, str],
        answers: AnswerBook | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        sample_solutions: bool = False,
    ) -> PresetOptions:
        """From a {field: column} mapping of the explicit column flags (fields as in COLUMN_FIELDS)."""
        given = {f"{name}_column": columns.get(name) for name in COLUMN_FIELDS}
        return cls(
            split_rule=split_rule, max_row_chars=max_row_chars, answers=answers, max_steps=max_steps, sample_solutions=sample_solutions, **given
        )


COLUMN_FIELDS = ("problem", "answer", "solution", "steps", "id", "reasoning")  # the --FIELD-column flags


@dataclass(frozen=True)
class _Columns:
    """Where a preset finds each field; None: the preset does not read it."""

    problem: str | None = None
    answer: str | None = None
    solution: str | None = None  # text to split into steps
    steps: str | None = None  # a list of step texts
    id: str = "id"
    reasoning: str | None = None  # a trace's thinking, beside its response (trace preset)


_DEFAULT_COLUMNS = {
    "gsm8k": _Columns(problem="question", solution="answer"),
    "math": _Columns(problem="problem", solution="solution", answer="answer"),
    "processbench": _Columns(problem="problem", steps="steps", answer="answer"),
    "math-shepherd": _Columns(solution="input"),
    "prm800k": _Columns(),
    "trace": _Columns(),  # each field from the first of its candidate columns the row has (TRACE_COLUMNS)
    "columns": _Columns(),
}
_ALL_FLAGS = frozenset(f.name for f in fields(_Columns))
_ACCEPTED_FLAGS = {
    "gsm8k": frozenset({"problem", "answer", "solution", "id"}),
    "math-shepherd": frozenset({"solution", "answer", "id"}),
    "prm800k": frozenset({"id"}),  # its fields are nested objects
    "trace": frozenset({"problem", "answer", "solution", "reasoning", "id"}),
}
TRACE_COLUMNS = {  # where the trace preset looks for each field, in order, unless a column flag names it
    "problem": ("problem", "question", "prompt"),
    "answer": ("answer", "reference_answer", "ground_truth"),
    "solution": ("response", "output", "completion", "generation", "content"),
    "reasoning": ("reasoning", "reasoning_content", "thinking"),
}


def detect_preset(row: dict) -> str:
    """The one preset whose columns the row has; InputError when none or several match."""
    keys = set(row)
    candidates = []
    if isinstance(row.get("question"), str) and "answer" in keys:
        candidates.append("gsm8k")
    if "problem" in keys and "steps" not in keys and keys & {"solution", "answer"}:
        candidates.append("math")
    if {"problem", "steps"} <= keys:  # the hub's ProcessBench has no answer: rows say so one by one
        candidates.append("processbench")
    if isinstance(row.get("input"), str) and isinstance(row.get("label"), str):
        candidates.append("math-shepherd")
    if isinstance(row.get("question"), dict) and isinstance(row.get("label"), dict):
        candidates.append("prm800k")
    if _looks_like_trace(row):  # more telling than a problem and an answer: math and gsm8k give way
        candidates = [name for name in candidates if name not in ("math", "gsm8k")] + ["trace"]
    if len(candidates) == 1:
        return candidates[0]
    if candidates:
        raise InputError(f"the first row fits several presets ({', '.join(candidates)}): pass --preset")
    raise InputError(f"no preset matched the first row's columns ({', '.join(sorted(map(str, keys)))}): pass --preset or column flags")


def resolve_preset(name: str | None, first_row: dict | None, options: PresetOptions) -> str:
    """The canonical preset to read the input with, checked against the column flags.

    `first_row` is the first readable row, used only when `name` is None.
    """
    if name is None:
        if options.reasoning_column:
            name = "trace"
        elif _given_flags(options):
            name = "columns"
        elif first_row is None:
            raise InputError("no readable row to detect the preset from: pass --preset")
        else:
            name = detect_preset(first_row)
    if name not in PRESET_NAMES:
        raise InputError(f"unknown preset {name!r}; valid presets: {', '.join(PRESET_NAMES)}")
    preset = _ALIASES.get(name, name)
    _columns(preset, options)
    return preset


def to_source_row(preset: str, row_index: int, row: dict, options: PresetOptions) -> SourceRow:
    """Read one input row with `preset`; RowError (naming the field) when the row is unusable."""
    preset = _ALIASES.get(preset, preset)
    columns = _columns(preset, options)
    problem, answer, steps, *trace = _READERS[preset](row, columns, options)
    thinking_steps, finished = trace or (0, True)  # only the trace reader tells them
    if options.sample_solutions:  # problem and reference only: the job samples the solutions
        steps, thinking_steps, finished = None, 0, True
    if (what := missing_answer(answer)) is not None:  # read from a solution, a step or --answers: the same rule as a column
        raise RowError("answer", f"no reference answer: the answer read from the row is {what}")
    total = len(problem) + len(answer) + sum(map(len, steps or ()))
    if total > options.max_row_chars:
        raise RowError("row", f"{total} characters of text, over max_row_chars={options.max_row_chars}")
    return SourceRow(
        row_index=row_index,
        problem_id=_problem_id(row, columns, options, problem),
        problem=problem,
        reference_answer=answer,
        steps=None if steps is None else tuple(steps),
        source=preset,
        complete=finished and (steps is None or _ends_with_answer(preset, row)),
        thinking_steps=thinking_steps,
    )


def _ends_with_answer(preset: str, row: dict) -> bool:
    """PRM800K says how a trajectory ended: only "solution" reached a final answer."""
    if preset != "prm800k":
        return True
    return row["label"].get("finish_reason", "solution") == "solution"


def last_boxed(text: str) -> str | None:
    """Content of the last complete \\boxed{...} in `text`, nested braces included."""
    start = text.rfind("\\boxed{")
    while start != -1:
        content = _braced(text, start + len("\\boxed{"))
        if content is not None:
            return content.strip()
        start = text.rfind("\\boxed{", 0, start)
    return None


# --- configuration ------------------------------------------------------------------------


def _looks_like_trace(row: dict) -> bool:
    """A reasoning field, or a response field holding think tags."""
    return any(isinstance(row.get(name), str) for name in TRACE_COLUMNS["reasoning"]) or any(
        has_think_tags(row.get(name)) for name in TRACE_COLUMNS["solution"]
    )


def _given_flags(options: PresetOptions) -> dict[str, str]:
    return {name: getattr(options, f"{name}_column") for name in _ALL_FLAGS if getattr(options, f"{name}_column")}


@lru_cache(maxsize=64)
def _columns(preset: str, options: PresetOptions) -> _Columns:
    if preset not in _DEFAULT_COLUMNS:
        raise InputError(f"unknown preset {preset!r}; valid presets: {', '.join(PRESET_NAMES)}")
    if options.split_rule not in SPLIT_RULES:
        raise InputError(f"unknown split rule {options.split_rule!r}; valid rules: {', '.join(SPLIT_RULES)}")
    flags = _given_flags(options)
    refused = sorted(set(flags) - _ACCEPTED_FLAGS.get(preset, _ALL_FLAGS - {"reasoning"}))
    if refused:
        raise InputError(f"preset {preset} does not take {', '.join(f'--{n}-column' for n in refused)}")
    if "steps" in flags and "solution" in flags:
        raise InputError("pass --steps-column or --solution-column, not both")
    columns = _DEFAULT_COLUMNS[preset]
    if "steps" in flags:
        columns = replace(columns, solution=None)
    if "solution" in flags and preset != "gsm8k":
        columns = replace(columns, steps=None)
    columns = replace(columns, **flags)
    if preset == "columns" and not (columns.problem and columns.answer):
        raise InputError(
            "the columns preset needs --problem-column and --answer-column (or pass --preset to override some columns of a known format)"
        )
    return columns


# --- readers: row -> (problem, reference answer, steps or None) ----------------------------


def _read_gsm8k(row: dict, columns: _Columns, options: PresetOptions):
    problem = _required(row, columns.problem, "problem")
    if columns.answer and options.sample_solutions:  # the answer from its own column: the solution is not read
        return problem, _required(row, columns.answer, "answer", numbers=True), None
    text = _required(row, columns.solution, "answer")
    body, marker, final = text.rpartition("####")
    if columns.answer:
        answer = _required(row, columns.answer, "answer", numbers=True)
    elif not marker:
        raise RowError("answer", f"no '####' line in column '{columns.solution}' to read the answer from")
    else:
        answer = final.strip().replace(",", "")
        if not answer:
            raise RowError("answer", "nothing after '####'")
    if options.sample_solutions:
        return problem, answer, None
    rule = "newline" if options.split_rule == "auto" else options.split_rule
    steps = _split(_CALCULATOR.sub("", body if marker else text), rule, "steps", options)
    return problem, answer, steps


def _read_flat(row: dict, columns: _Columns, options: PresetOptions, *, boxed_answer: bool, needs_steps: bool):
    """Formats with one column per field: math, processbench, columns."""
    problem = _required(row, columns.problem, "problem")
    answer = _text(row, columns.answer, "answer", numbers=True) if columns.answer else None
    # sampling new solutions reads the row's solution only for a \boxed{} answer its answer column lacks
    reads_solution = columns.solution and not (options.sample_solutions and answer)
    solution = _text(row, columns.solution, "solution") if reads_solution else None
    steps = None
    if options.sample_solutions:
        pass
    elif columns.steps and (needs_steps or row.get(columns.steps) is not None):
        steps = _step_list(row, columns.steps)
    elif solution is not None:
        steps = _split(solution, options.split_rule, "solution", options)
    elif needs_steps:
        raise RowError("solution", _why_absent(row, columns.solution))

    if not answer and boxed_answer and solution:
        answer = last_boxed(solution)
    if not answer:
        reason = _why_absent(row, columns.answer) if columns.answer else "no answer column"
        if boxed_answer:
            reason += " and no \\boxed{} in the solution"
        if options.answers is None:
            raise RowError("answer", reason)
        answer = options.answers.answer_for(problem, reason)
    return problem, answer, steps


def _read_math_shepherd(row: dict, columns: _Columns, options: PresetOptions):
    text = _required(row, columns.solution, "problem")
    first_step = _FIRST_STEP.search(text)
    if not first_step:
        raise RowError("steps", f"no 'Step 1:' in column '{columns.solution}' to separate problem and steps")
    problem = text[: first_step.start()].strip()
    if not problem:
        raise RowError("problem", f"column '{columns.solution}' starts with 'Step 1:', no problem before it")
    if not KI_TAGS.search(text):
        raise RowError("steps", f"no '{KI_TAG}' step tags in column '{columns.solution}'")
    if KI_TAGS.search(problem):  # its labels would be read one step off (the label column tags every 'ки' of the input)
        raise RowError("problem", f"holds a step tag '{KI_TAG}' before 'Step 1:' in column '{columns.solution}'")
    solution = text[first_step.start() :]
    if tail := solution[[*KI_TAGS.finditer(solution)][-1].end() :].strip():
        raise RowError("steps", f"text after the last step tag '{KI_TAG}' (a step without its tag): {tail[:40]!r}")
    steps = _split(solution, "ki", "steps", options)
    for index, step in enumerate(steps):
        if stray := STRAY_KI.search(step):  # a tag that ends no step ("8 ки."): two steps would be read as one
            excerpt = step[max(stray.start() - 20, 0) : stray.end() + 20]
            raise RowError("steps", f"step {index} holds '{KI_TAG}' where no step ends (a tag ends its line or stands alone): {excerpt!r}")
    if columns.answer:
        return problem, _required(row, columns.answer, "answer", numbers=True), steps
    answer, why_not = _math_shepherd_answer(row, steps[-1])
    if answer is not None:
        return problem, answer, steps
    if options.answers is not None:
        return problem, options.answers.answer_for(problem, why_not), steps
    raise RowError("answer", f"no reference answer: {why_not}; pass --answers FILE or --answer-column")


def _math_shepherd_answer(row: dict, final_step: str) -> tuple[str | None, str]:
    """Math-Shepherd has no answer column: a final step tagged `+` states a correct answer.
    (the answer, "") or (None, why there is none)."""
    label = row.get("label")
    if isinstance(label, list) and label:  # OpenRLHF's process reward rows: the reward tokens, the final step's last
        tag = str(label[-1])
    elif not isinstance(label, str) or not label.strip():
        return None, "no 'label' column to derive it from"
    else:
        tag = label.rstrip()[-1]
    if tag != "+":
        return None, f"'label' tags the final step {tag!r}, not '+'"
    stated = _LAST_ANSWER_IS.match(final_step)
    if not stated or not stated[1].strip():
        return None, "the final step, tagged '+', has no 'The answer is: X'"
    if what := missing_answer(stated[1]):
        return None, f"the final step, tagged '+', states {what}"
    return stated[1].strip(), ""


def _read_prm800k(row: dict, columns: _Columns, options: PresetOptions):
    question = row.get("question")
    if not isinstance(question, dict):
        raise RowError("problem", "column 'question' is not an object")
    problem = _required(question, "problem", "problem", where="question.")
    answer = _required(question, "ground_truth_answer", "answer", numbers=True, where="question.")
    if options.sample_solutions:
        return problem, answer, None
    label = row.get("label")
    if not isinstance(label, dict) or not isinstance(label.get("steps"), list):
        raise RowError("steps", "column 'label' has no 'steps' list")
    steps = []
    for i, step in enumerate(label["steps"]):
        text, is_last = _prm800k_step(i, step)
        steps.append(text)
        if is_last:
            break
    return problem, answer, _checked_steps(steps)


def _prm800k_step(i: int, step) -> tuple[object, bool]:
    """The step's text, and whether the trajectory ends here (no completion was chosen)."""
    if not isinstance(step, dict):
        raise RowError("steps", f"label.steps[{i}] is not an object")
    completions = step.get("completions") or []
    chosen = step.get("chosen_completion")
    if chosen is not None:
        if not isinstance(chosen, int) or not 0 <= chosen < len(completions):
            raise RowError("steps", f"label.steps[{i}].chosen_completion={chosen!r} is not a completion index")
        return _completion_text(completions[chosen]), False
    if step.get("human_completion"):
        return _completion_text(step["human_completion"]), False
    if completions:
        return _completion_text(completions[0]), True
    raise RowError("steps", f"label.steps[{i}] has no completion")


def _completion_text(completion) -> object:
    return completion.get("text") if isinstance(completion, dict) else completion


def _read_trace(row: dict, columns: _Columns, options: PresetOptions):
    """Problem, reference, the thinking's steps then the response as one step, how many steps are
    thinking, and whether the trace got to its response."""
    column = lambda field: getattr(columns, field) or next((c for c in TRACE_COLUMNS[field] if c in row), TRACE_COLUMNS[field][0])
    problem = _required(row, column("problem"), "problem")
    answer = _required(row, column("answer"), "answer", numbers=True)
    if THINK_CLOSE in answer:
        raise RowError("answer", f"column '{column('answer')}' holds a thinking trace, not a reference answer: pass --solution-column and --answer-column")
    if options.sample_solutions:
        return problem, answer, None
    response_column, reasoning_column = column("solution"), column("reasoning")
    text = _text(row, response_column, "response") or ""
    reasoning = _text(row, reasoning_column, "reasoning")
    try:
        parsed = parse_trace(text)
    except ValueError as error:
        raise RowError("response", f"column '{response_column}': {error}") from None
    if reasoning is not None:
        if parsed.thinking is not None:
            raise RowError("reasoning", f"thinking twice: column '{reasoning_column}' and a {THINK_CLOSE} block in column '{response_column}'")
        thinking, response = reasoning, parsed.response
    elif parsed.thinking is None:
        looked = ", ".join(f"'{c}'" for c in ((columns.reasoning,) if columns.reasoning else TRACE_COLUMNS["reasoning"]))
        if not text:
            raise RowError("response", _why_absent(row, response_column))
        raise RowError("reasoning", f"no thinking: no {THINK_CLOSE} in column '{response_column}' and no reasoning column ({looked})")
    else:
        thinking, response = parsed.thinking, parsed.response
    rule = "thinking" if options.split_rule == "auto" else options.split_rule
    thinking_steps = _split(thinking, rule, "reasoning", options) if thinking else []
    if not thinking_steps and not response:
        raise RowError("response", f"empty thinking and no response in column '{response_column}'")
    # No response (thinking cut off, or closed with nothing after it): the last step is thinking, no final answer
    return problem, answer, thinking_steps + ([response] if response else []), len(thinking_steps), bool(response)


_READERS = {
    "gsm8k": _read_gsm8k,
    "math": partial(_read_flat, boxed_answer=True, needs_steps=False),
    "processbench": partial(_read_flat, boxed_answer=False, needs_steps=True),
    "columns": partial(_read_flat, boxed_answer=False, needs_steps=False),
    "math-shepherd": _read_math_shepherd,
    "prm800k": _read_prm800k,
    "trace": _read_trace,
}


# --- field helpers ----------------------------------------------------------------------------


def _text(row: dict, column: str, field: str, *, numbers: bool = False, where: str = "") -> str | None:
    """The stripped text in `column` ("" when blank), None when absent or null; for the answer field, None too
    when it is no answer (missing_answer: inf, the text "nan", "None", "null", "<NA>")."""
    value = row.get(column)
    if _is_null(value) or field == "answer" and missing_answer(value):
        return None
    if numbers and isinstance(value, int | float) and not isinstance(value, bool):
        value = str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
    if not isinstance(value, str):
        raise RowError(field, f"column '{where}{column}' holds {type(value).__name__}, expected text")
    return value.strip()


def _required(row: dict, column: str, field: str, *, numbers: bool = False, where: str = "") -> str:
    value = _text(row, column, field, numbers=numbers, where=where)
    if not value:
        raise RowError(field, _why_absent(row, column, where))
    return value


def _why_absent(row: dict, column: str, where: str = "") -> str:
    if column not in row:
        return f"missing column '{where}{column}'"
    value = row[column]
    if _is_null(value) or isinstance(value, str) and not value.strip():
        return f"column '{where}{column}' is {'null' if _is_null(value) else 'empty'}"
    what = missing_answer(value)  # an answer column's missing value ("nan", "None", inf)
    return f"column '{where}{column}' holds {what}: read as no answer" if what else f"column '{where}{column}' is empty"


def _is_null(value) -> bool:
    return value is None or (isinstance(value, float) and _math.isnan(value))  # NaN: pandas' null


def _step_list(row: dict, column: str) -> list[str]:
    value = row.get(column)
    if value is None:
        raise RowError("steps", _why_absent(row, column))
    if not isinstance(value, list | tuple):
        raise RowError(
            "steps",
            f"column '{column}' holds {type(value).__name__}, expected a list of step texts",
        )
    return _checked_steps(list(value))


def _checked_steps(steps: list) -> list[str]:
    if not steps:
        raise RowError("steps", "no steps")
    for i, step in enumerate(steps):
        if not isinstance(step, str):
            raise RowError("steps", f"step {i} holds {type(step).__name__}, expected text")
        if not step.strip():
            raise RowError("steps", f"step {i} is empty")
    return [step.strip() for step in steps]


def _split(text: str, rule: str, field: str, options: PresetOptions) -> list[str]:
    if len(text) > options.max_row_chars:  # refuse before splitting a huge text
        raise RowError(
            "row",
            f"{len(text)} characters of solution text, over max_row_chars={options.max_row_chars}",
        )
    steps = split_steps(text, rule, options.max_steps)
    if not steps:
        raise RowError(field, f"the text splits into no steps (split rule {rule})")
    return steps


def _problem_id(row: dict, columns: _Columns, options: PresetOptions, problem: str) -> str:
    """The row's own id when it has one, else an id derived from the problem text."""
    value = row.get(columns.id)
    if isinstance(value, str):
        value = value.strip()
    if _is_null(value) or value == "":
        if options.id_column:
            raise RowError("id", _why_absent(row, columns.id))
        return stable_id(problem)
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise RowError("id", f"column '{columns.id}' holds {type(value).__name__}, expected text or an integer")
    return str(value)


def _braced(text: str, start: int) -> str | None:
    """Text from `start` up to the brace closing an already-open one; None when unclosed."""
    depth, i = 1, start
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2  # an escaped \{ or \} does not nest
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[start:i]
        i += 1
    return None

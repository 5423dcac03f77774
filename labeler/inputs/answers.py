"""Reference answers joined from another file by problem text (`--answers FILE`).

Math-Shepherd has no answer column: only a final step tagged `+` states a right answer, so rows
whose final step is tagged `-` need the reference from elsewhere, the dataset the problems came
from (GSM8K, MATH). The answers file is any input `labeler label` reads that carries a problem and
an answer: GSM8K rows (`question`, `answer` ending in `#### N`), MATH rows (`problem`, `answer` or a
`\\boxed{}` solution), or plain {problem, answer} rows. It is read through the presets like any
input (auto-detected), and keyed by the problem text with its whitespace normalised (runs of
spaces, tabs and newlines are one space; ends stripped).

A problem that the file gives two different answers is ambiguous: its rows are rejected, naming
it, rather than labelled against a guess. Rows of the file that cannot be read are counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from labeler.inputs.presets import PresetOptions, resolve_preset, to_source_row
from labeler.inputs.readers import InputError, read_rows
from labeler.records import RowError


def normalise_problem(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: PresetOptions holds one and is a cache key
class AnswerBook:
    source: str  # the file, for messages
    answers: Mapping[str, str]  # normalised problem -> reference answer
    ambiguous: frozenset[str]  # normalised problems the file gives several answers
    rows_unreadable: int

    def answer_for(self, problem: str, why_needed: str) -> str:
        """The reference answer of `problem`; RowError("answer") when the file has none or several."""
        key = normalise_problem(problem)
        if key in self.ambiguous:
            raise RowError("answer", f"no reference answer: {why_needed}, and --answers {self.source} gives this problem several different answers")
        answer = self.answers.get(key)
        if answer is None:
            raise RowError("answer", f"no reference answer: {why_needed}, and the problem is not in --answers {self.source}")
        return answer


def read_answer_book(spec: str, trust_remote_code: bool = False) -> AnswerBook:
    """The answers of the file `spec`; InputError when it cannot be read or holds no usable row."""
    options = PresetOptions()
    answers: dict[str, str] = {}
    ambiguous: set[str] = set()
    preset, unreadable, reasons = None, 0, {}
    try:
        for raw in read_rows(spec, trust_remote_code=trust_remote_code):
            try:
                if raw.error is not None:
                    raise raw.error
                if preset is None:
                    preset = resolve_preset(None, raw.data, options)
                source = to_source_row(preset, raw.row_index, raw.data, options)
            except RowError as error:
                unreadable += 1
                reasons.setdefault(f"{error.field}: {error.reason}", raw.row_index)
                continue
            key = normalise_problem(source.problem)
            if answers.setdefault(key, source.reference_answer) != source.reference_answer:
                ambiguous.add(key)
    except InputError as error:
        raise InputError(f"--answers {error}") from error
    if not answers:
        example = next(iter(reasons.items()), None)
        why = f"; e.g. row {example[1]}: {example[0]}" if example else ""
        raise InputError(f"--answers {spec}: no row with a problem and an answer{why}")
    for key in ambiguous:
        answers.pop(key)
    return AnswerBook(spec, MappingProxyType(answers), frozenset(ambiguous), unreadable)

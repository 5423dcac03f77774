"""Reading the verdict of a critique: the 0-based index of the earliest wrong paragraph, or -1 for none.

The prompt (labeler/judging/prompts.py) asks the judge to finish with one last line that gives the index
in \\boxed{}; ProcessBench's evaluation reads the critique's last \\boxed{}. A number elsewhere in a
critique (a box around a computed total, "paragraph 1 is correct", a first guess) is not its verdict,
and with up to 64 paragraphs most stray numbers are valid indices; so a critique is read only where it
states its verdict, in one of two places:

- its answer line, the format asked for: the critique ends with its last \\boxed{} (nothing after it
  but punctuation, tags such as </answer>, "I hope it is correct", or a reason that states the same
  verdict: "(paragraph 2)", "since no paragraph contains an error"), with nothing before it on its line
  but words that lead to a verdict ("Final answer:", "so the earliest error is in paragraph", "$", "**")
  or a reason that states the same verdict ("Since all paragraphs are correct,"); words of the
  problem's answer ("the correct answer is", "the result is", "should be") do not lead to one. Or,
  without any box, a last line that is an answer alone ("3", "Paragraph 3", "Answer: -1", "No error.");
- its closing verdict: the last statement of the earliest error in its closing (its last line, and
  the line before when the last is the answer line or a "Final Answer" heading): "the earliest error
  is in paragraph 2", "paragraph 2 is the first incorrect one", "the error is in paragraph 2", or of
  none: "all paragraphs are correct", "there are no errors". A hedged statement ("seems", "if",
  "would", "I thought") or a question is no verdict; a "no errors" within a sentence ("no mistakes in
  the arithmetic") is none either. A negation makes a statement unread only where it negates the
  verdict ("I don't think the earliest error is ..."; not "..., since 6 x 4 is not 20"). A later
  statement of a verdict that is hedged, negated or a question makes the critique unread: the earlier
  statement is never read in its place. A verdict whose own clause names several paragraphs ("in
  paragraph 1 and paragraph 3"), or that the same sentence contradicts ("paragraphs 0 through 2 are
  correct, and the earliest error is in paragraph 2", "paragraph 1 is wrong" before a verdict of 3),
  makes the critique unread; another paragraph named elsewhere in the sentence ("where it uses the
  result of paragraph 1") does not.

The critique is refused (None, with the reason) when its last \\boxed{} holds no index (an integer,
optionally wrapped as "paragraph 3", "\\text{3}", "$3$"; "none" or "no error" read as -1), when its
last box, answer line and closing verdict name different indices (it contradicts itself), when it has
a box that neither its answer line nor its closing verdict states, when the index its box or answer
line gives is a value its closing computes ("= 8", "+ 7", "should be 8") and no verdict names it, or
when it states no verdict.
Numbers are read in the prompt's numbering, from 0: "step 4" is index 4. An index that is not a
paragraph of the solution (nor -1) is refused, and so is "step N" where the solution's own steps
are headed "Step k:" (its numbers may be meant). The judge samples a refused critique again with another
seed, then rejects the solution with the reason (labeler/judging/unit.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from schemas.judgments import NO_ERROR

_BOXED = "\\boxed"
_WRAPPERS = re.compile(r"\\(?:text|textbf|mathrm|mathbf|mbox)\s*\{([^{}]*)\}")
_NAMED = re.compile(r"^(?:paragraph|step)?\s*(?:_|#|no\.?|number)?\s*([-+]?\d+)$")
_NONE_WORDS = r"(?:none|no errors?|no mistakes?|not found|n/?a)"

# Text normalised for reading (_plain): lower case, tags and markup gone, "paragraph_3" as "paragraph 3".
_TAG = re.compile(r"</?\s*(paragraph|step)[\s_]*(\d+)\s*>|\b(paragraph|step)_\{?(\d+)\}?")
_MARKUP = re.compile(r"\\[\[\]()]|[*`#>$]")
_NUMBER = r"([-+]?\d+)(?![\d.]*\d)"
_NAMED_NUMBER = rf"(?:paragraph|step)\s*(?:#|no\.?|number)?\s*{_NUMBER}"
_FIRST = r"(?:earliest|first|very\s+first)"
_FAULT = r"(?:errors?|mistakes?|incorrect|wrong|erroneous|flawed|faulty|invalid)"
_WORD = r"(?!(?:is|was|that|because|since|but|and)\b)[a-z'-]+"  # a word of a verdict's subject
_VERB = (
    r"(?:(?:is|was|can\s+be)\s+(?:found|located|made|seen|introduced)|is|was|occurs|occurred|appears|lies|happens|arises|"
    r"comes|starts|begins)"
)
_ADVERB = r"(?:actually|really|indeed|clearly|first)"
_ERROR_VERDICTS = tuple(
    re.compile(pattern)
    for pattern in (
        # the earliest error is in paragraph 2; the first paragraph with a mistake is paragraph 2
        rf"\b{_FIRST}(?:\s+{_WORD}){{0,4}}?\s+{_FAULT}(?:\s+{_WORD}){{0,4}}?\s*"
        rf"(?:\s{_VERB}(?:\s+{_ADVERB})?(?:\s+(?:in|at|on|within))?|[:=])\s*(?:the\s+)?{_NAMED_NUMBER}",
        # a sentence that is a verdict alone: "first error at paragraph 1."
        rf"^(?:the\s+)?{_FIRST}\s+{_FAULT}\s+(?:is\s+)?(?:at|in)\s+(?:the\s+)?(?:{_NAMED_NUMBER}|index\s+{_NUMBER})\s*[.!]?$",
        # a bare number, where the subject is the earliest error or its paragraph and the number ends the clause:
        # the earliest error is 2; the index of the first paragraph containing an error is 2 (not "the first wrong value is 8")
        rf"\b{_FIRST}\s+(?:(?:incorrect|wrong|erroneous)\s+(?:paragraph|step)|(?:paragraph|step)\s+"
        rf"(?:with|containing|that\s+contains|where)\s+(?:an?\s+)?(?:error|mistake)(?:\s+occurs)?|error|mistake)(?:\s+(?:index|number))?"
        rf"\s*(?:\s(?:is|was)|[:=])\s*{_NUMBER}(?=\s*(?:[.,;:!)]|$))",
        # paragraph 2 is the first incorrect one; paragraph 2 contains the earliest error
        rf"\b{_NAMED_NUMBER}\s+(?:is|was|contains|has|holds|introduces|makes)\s+(?:where\s+|when\s+)?(?:the\s+)?{_FIRST}"
        rf"(?:\s+{_WORD}){{0,4}}?(?:\s+(?:that|which)\s+(?:is|was))?\s+{_FAULT}",
        # paragraph 2 is where the mistake first appears
        rf"\b{_NAMED_NUMBER}\s+is\s+where\s+the\s+(?:error|mistake)\s+first\s+(?:appears|occurs|happens|arises)",
        # the error is in paragraph 2
        rf"\bthe\s+(?:only\s+|main\s+)?(?:error|mistake)\s+(?:first\s+)?(?:is|lies|occurs|appears|was\s+made)\s+(?:in|at|within)\s+"
        rf"(?:the\s+)?{_NAMED_NUMBER}",
    )
)
_VERDICT_WORDS = re.compile(
    rf"\b{_FIRST}\b.*\b{_FAULT}|\b{_FAULT}.*\b{_FIRST}\b|\bthe\s+(?:only\s+)?(?:error|mistake)\s+(?:is|lies|occurs)"
)
# "none" as a whole sentence, after a connective ("so", "overall"): a "no errors" inside a sentence may be about one part
_CONNECTIVE = (
    r"^(?:(?:so|thus|hence|therefore|overall|in\s+conclusion|in\s+summary|finally),?\s+)?"
    r"(?:after\s+(?:checking|reviewing|verifying|examining)\s+(?:each|every|all|the)\s+(?:of\s+the\s+)?(?:paragraphs?|steps?),?\s+)?"
)
_CONCLUSION = r"(?:\s*,?\s*(?:so|thus|hence|therefore)\b.*)?$"
_NO_ERROR_VERDICTS = re.compile(
    rf"{_CONNECTIVE}(?:there\s+(?:is|are|were)\s+|i\s+found\s+|we\s+found\s+|(?:the\s+)?solution\s+(?:contains|has)\s+)?no\s+"
    r"(?:errors?|mistakes?|(?:incorrect|wrong|erroneous)"
    r"\s+(?:paragraphs?|steps?))(?:\s+(?:were\s+|was\s+)?(?:found|detected))?(?:\s+(?:in|within)\s+(?:the|this|any)\s+(?:of\s+the\s+)?"
    rf"(?:solution|paragraphs?|steps?|reasoning))?(?:\s+(?:were\s+|was\s+)?(?:found|detected))?{_CONCLUSION}"
    rf"|{_CONNECTIVE}(?:all|every|each)\s+(?:of\s+the\s+|the\s+)?(?:paragraphs?|steps?)(?:\s+(?:of|in)\s+the\s+solution)?\s+(?:is|are)\s+"
    rf"(?:(?!not\b)\w+\s+)?(?:correct|right|valid|fine|accurate){_CONCLUSION}"
    rf"|{_CONNECTIVE}no\s+(?:paragraph|step)\s+(?:contains|has|is|makes)\s+(?:an?\s+)?{_FAULT}{_CONCLUSION}"
    rf"|{_CONNECTIVE}none\s+of\s+the\s+(?:paragraphs|steps)\s+(?:contains?|has|have|is|are)\s+(?:an?\s+|any\s+)?{_FAULT}{_CONCLUSION}"
    rf"|{_CONNECTIVE}(?:i|we)\s+(?:did\s+not|didn't|could\s+not|couldn't)\s+find\s+any\s+(?:errors?|mistakes?)"
    r"(?:\s+(?:in|within)\s+(?:the|this|any)\s+(?:of\s+the\s+)?(?:solution|paragraphs?|steps?|reasoning))?"
    rf"{_CONCLUSION}"
    rf"|{_CONNECTIVE}(?:the\s+)?(?:whole\s+|entire\s+)?solution\s+is\s+(?:entirely\s+|fully\s+|completely\s+)?(?:correct|right)"
    rf"{_CONCLUSION}"
)
# no verdict: a hedge, a condition, a negation ("not all paragraphs are correct")
_HEDGED = re.compile(
    r"\b(?:if|would|could|might|seems?|seemingly|looks?|appears\s+to|suspect|maybe|perhaps|possibly|probably|unless|whether|"
    r"unsure|suppose|assume|let's|let\s+me|thought|initially|at\s+first)\b"
)
_NEGATION = re.compile(r"\b(?:not|never|no)\b|n't\b")
_CLAUSE_START = re.compile(r"[,:;(]|\b(?:so|thus|hence|therefore|but|and|because|since|however|whereas)\b")
# "paragraphs 0 and 1 are correct": a mention of a paragraph that is not a verdict's
_LIST = r"\d+(?:\s*(?:,\s*and|,|and|to|through|-)\s*(?:(?:paragraphs?|steps?)\s*)?\d+)*"
_FOUND_CORRECT = re.compile(
    rf"\b(?:paragraphs?|steps?)\s*({_LIST})\s+(?:is|are|was|were)\s+(?:all\s+|also\s+|both\s+)?"
    r"(?:correct|right|fine|ok|okay|valid|accurate)\b"
)
# "paragraphs 1 and 3 are wrong", "paragraph 1 already contains an error": one before the verdict's contradicts it
_FOUND_WRONG = re.compile(
    rf"\b(?:paragraphs?|steps?)\s*({_LIST})\s+(?:(?:is|are|was|were)\s+(?:all\s+|also\s+|both\s+)?{_FAULT}|"
    rf"(?:also\s+|already\s+)?(?:contains?|has|have)\s+(?:an?\s+)?(?:errors?|mistakes?))\b"
)
# the verdict's clause naming more than one: "in paragraph 1 and paragraph 3", "paragraph 1, 3"
_MORE_NAMED = re.compile(
    r"^(?:\s*,\s*|\s+)(?:and|or|&)\s+(?:the\s+)?(?:(?:paragraph|step)s?\s*)?\d|^\s*[,/]\s*(?:(?:paragraph|step)s?\s*)?\d+(?!\s*[-+*/=x])"
)
_NAMED_BEFORE = re.compile(r"(?:paragraph|step)s?\s*\d+\s*(?:,|and|or|&)\s*(?:the\s+)?$")
# the problem's answer, not an index: a box led in by these words is not on the answer line
_VALUE_WORDS = re.compile(r"\b(?:correct|actual|right|true|expected|should|total|sum|value|result)\b")
_STEP_HEADER = re.compile(r"^\s*[*#_]*\s*step\s*\d+\s*[*_]*\s*[:.)]", re.IGNORECASE)
_STEP_NAMED = re.compile(r"\bsteps?[\s_]*(?:#|no\.?|number)?\s*[-+]?\d", re.IGNORECASE)
_TAGS = re.compile(r"</?\s*(?!paragraph|step)[a-z_]+\s*>")
_MENTIONS = re.compile(rf"\b(?:paragraph|step)s?\s*(?:#|no\.?|number)?\s*{_NUMBER}")
# an answer alone on the last line: "3", "Paragraph 3", "Answer: -1", "**Final answer: 2**", "No error."
_BARE = re.compile(
    r"^(?:(?:so|thus|hence|therefore)\s*,?\s*)?(?:the\s+)?(?:final\s+)?(?:answer|index|verdict|earliest\s+error)?"
    rf"(?:\s+is)?\s*[:=]?\s*(?:(?:paragraph|step)\s*(?:#|no\.?|number)?\s*)?(?:{_NUMBER}|({_NONE_WORDS}))$"
)
# what may come before the box on the answer line ("Final answer:", "so the earliest error is in paragraph")
_LEAD_IN = re.compile(
    r"^(?:.*\b(?:answer|verdict|index|conclusion|result|error|mistake|paragraph|step|so|thus|hence|therefore|finally))?"
    r"[\s:=,.()-]*(?:(?:is|would\s+be|occurs\s+in|lies\s+in|appears\s+in|is\s+in|is\s+at|in|at)[\s:=,()-]*)?$"
)
_AFTER_ANSWER = re.compile(r"^[^a-z0-9]*(?:i\s+hope\s+(?:it|this)\s+is\s+correct|i\s+hope\s+this\s+helps)?[^a-z0-9]*$")
_HEADING = re.compile(r"^(?:final\s+answer|answer|conclusion|verdict|summary|result)\s*:?$")


_UNREAD = object()  # a statement of a verdict that must not be read (negated, or hedged after a verdict)


@dataclass(frozen=True)
class ParsedCritique:
    index: int | None  # the earliest wrong paragraph, -1 for none; None: the critique could not be read
    problem: str | None = None  # why it could not be read

    @property
    def parsed(self) -> bool:
        return self.index is not None


def parse_critique(text: str, n_steps: int, steps: Sequence[str] | None = None) -> ParsedCritique:
    """The index a critique of a solution of `n_steps` steps states as its verdict (rules in the module's docstring).
    `steps`, where known, are the solution's steps: if they are headed "Step k:", a critique naming "step N" is refused."""
    if not text.strip():
        return ParsedCritique(None, "the critique is empty")
    boxes = _boxes(text)
    box = None
    if boxes:
        box = _index_in_box(boxes[-1][0])
        if box is None:
            return ParsedCritique(None, f"its last \\boxed{{}} holds {_shown(boxes[-1][0])}, not a paragraph index")
    # lines with words or numbers ("</answer>" and "---" after the answer line are none)
    lines = [line for line in text.splitlines() if re.search(r"[a-z0-9]", _untagged(line))] or [text.strip()]
    answer = _answer_line(text, lines, boxes)
    closing = lines[-1:]
    if answer is not None or _HEADING.match(_plain(lines[-1]).strip(" .!:")):
        closing = [line for line in lines[:-1] if not _HEADING.match(_plain(line).strip(" .!:"))][-1:] + closing
    verdict = _closing_verdict(_with_boxes_opened(" \n ".join(closing)))
    if verdict is _UNREAD:
        return ParsedCritique(None, "its closing hedges, negates or questions a statement of its verdict")
    if isinstance(verdict, set):
        return ParsedCritique(None, f"its closing verdict names several paragraphs ({', '.join(map(str, sorted(verdict)))})")
    said = []  # (index, where the critique states it); with a box, the answer line is the box
    if box is not None:
        said.append((box, f"its last \\boxed{{}} holds {box}"))
    elif answer is not None:
        said.append((answer, f"its answer line names {_named(answer)}"))
    if verdict is not None:
        said.append((verdict, f"its closing verdict names {_named(verdict)}"))
    if len({index for index, _ in said}) > 1:
        return ParsedCritique(None, "it contradicts itself: " + " and ".join(where for _, where in said))
    if box is not None and answer is None and verdict is None:
        return ParsedCritique(
            None,
            f"its last \\boxed{{}} ({box}) is not on the answer line the prompt asks for (the last, nothing after it), "
            "and its closing states no verdict",
        )
    if not said:
        return ParsedCritique(None, f"no \\boxed{{}}, and its last line states no verdict: {_shown(lines[-1])}")
    index = said[0][0]
    if verdict is None and _computes(_without_answer(" \n ".join(closing), box is not None), index):
        # "the correct total should be 8. Final answer: \\boxed{8}": the problem's answer, not an index
        return ParsedCritique(None, f"its closing computes {index} as a value, and no verdict of it names paragraph {index}")
    if not NO_ERROR <= index < n_steps:
        return ParsedCritique(None, f"it names paragraph {index}, and the solution's paragraphs are 0 to {n_steps - 1}")
    if steps and any(_STEP_HEADER.match(step) for step in steps) and _STEP_NAMED.search(_with_boxes_opened(" \n ".join(closing))):
        return ParsedCritique(
            None, "it names a 'step N', and the solution's own steps are headed 'Step k:': which paragraph it means is unclear"
        )
    return ParsedCritique(index)


def boxed_contents(text: str) -> list[str]:
    """What each \\boxed{...} of `text` holds, in order (nested braces kept; an unclosed box is left out)."""
    return [content for content, _, _ in _boxes(text)]


def _boxes(text: str) -> list[tuple[str, int, int]]:
    """Each closed \\boxed{...} of `text`: (what it holds, where it starts, where it ends)."""
    closing, open_braces = {}, []  # each brace's closing brace, in one pass
    for position, char in enumerate(text):
        if char == "{":
            open_braces.append(position)
        elif char == "}" and open_braces:
            closing[open_braces.pop()] = position
    found, start = [], text.find(_BOXED)
    while start >= 0:
        position = start + len(_BOXED)
        while position < len(text) and text[position] == " ":
            position += 1
        end = closing.get(position) if position < len(text) and text[position] == "{" else None
        if end is not None:
            found.append((text[position + 1 : end], start, end + 1))
        start = text.find(_BOXED, position)
    return found


def _index_in_box(content: str) -> int | None:
    value = _WRAPPERS.sub(r"\1", content)
    value = value.replace("$", "").replace("\\", " ").strip().strip(".").strip().lower()
    value = re.sub(r"\s+", " ", value)
    if re.fullmatch(_NONE_WORDS, value):
        return NO_ERROR
    match = _NAMED.match(value)
    return int(match.group(1)) if match else None


def _answer_line(text: str, lines: list[str], boxes: list[tuple[str, int, int]]) -> int | None:
    """The index the answer line gives: the last box where the critique ends with it, led in by words
    that lead to a verdict; without a box, a last line that is an answer alone. None: no answer line."""
    if boxes:
        content, start, end = boxes[-1]
        index = _index_in_box(content)
        line_start = text.rfind("\n", 0, start) + 1
        lead_in = re.split(r"[.!?;](?:\s|$)", _untagged(text[line_start:start]))[-1].strip()
        after = _untagged(text[end:]).strip()
        led_in = (_LEAD_IN.match(lead_in) and not _VALUE_WORDS.search(lead_in)) or _states(lead_in, index)
        ends = _AFTER_ANSWER.match(after) or _states(after, index)
        return index if led_in and ends else None
    match = _BARE.match(_plain(lines[-1]).strip(" .!:"))
    if match is None:
        return None
    return NO_ERROR if match.group(2) else int(match.group(1))


def _states(text: str, index: int | None) -> bool:
    """Whether a reason given with the box, before or after it, states the box's index itself:
    "since all paragraphs are correct, \\boxed{-1}", "\\boxed{2} (paragraph 2)"."""
    text = re.sub(r"^(?:since|because|as|as\s+)?\s*|[\s,:.()!]+$", "", text.strip(" ()"))
    if not text or index is None:
        return False
    bare = _BARE.match(text)
    if bare:
        return (NO_ERROR if bare.group(2) else int(bare.group(1))) == index
    return _statement(text) == index


def _closing_verdict(closing: str) -> int | set[int] | object | None:
    """The index the closing's last verdict statement names (-1: none), the paragraphs of an ambiguous
    one, _UNREAD where a later statement hedges, negates or questions it, or None when it states none."""
    verdict = None
    for sentence in re.split(r"(?<=[.!?;])\s+|\n", _plain(closing)):
        sentence = sentence.strip()
        if not sentence:
            continue
        unsure = sentence.endswith("?") or _HEDGED.search(sentence)
        found = None if unsure else _statement(sentence)
        if found is not None:
            verdict = found
        elif verdict is not None and _VERDICT_WORDS.search(sentence) and (_MENTIONS.search(sentence) or unsure):
            verdict = _UNREAD  # never fall back to the earlier statement
    return verdict


def _statement(sentence: str) -> int | set[int] | object | None:
    """The index a sentence states as the earliest error (-1: none); the paragraphs where it names
    several; _UNREAD where it negates its verdict ("I don't think the earliest error is ...")."""
    matches = [match for pattern in _ERROR_VERDICTS for match in pattern.finditer(sentence)]
    if matches:
        named = set()
        for match in matches:
            clause = _CLAUSE_START.split(sentence[: match.start()])[-1]
            if _NEGATION.search(clause) or _NEGATION.search(match.group(0)):
                return _UNREAD
            named.add(int(next(group for group in match.groups() if group is not None)))
            if _MORE_NAMED.match(sentence[match.end() :]) or _NAMED_BEFORE.search(sentence[: match.start()]):
                named |= {int(number) for number in re.findall(r"\d+", sentence[match.start() : match.end() + 40])[:3]}
        index = min(named)
        # a paragraph also said to be correct, or wrong before it, in the same sentence: it contradicts itself
        named |= {k for found in _FOUND_CORRECT.finditer(sentence) for k in _listed(found.group(1)) if k in named}
        named |= {k for found in _FOUND_WRONG.finditer(sentence) for k in _listed(found.group(1)) if k < index}
        correct = {k for found in _FOUND_CORRECT.finditer(sentence) for k in _listed(found.group(1))}
        return index if len(named) == 1 and index not in correct else named | {index}
    mentioned = {int(number) for number in _MENTIONS.findall(_FOUND_CORRECT.sub(" ", sentence))}
    if _NO_ERROR_VERDICTS.match(sentence.rstrip(" .!")) and not mentioned:
        return NO_ERROR
    return None


def _listed(numbers: str) -> set[int]:
    """The paragraphs a list names: "0, 1 and 3", "0 through 2", "0-2"."""
    found = set()
    for first, last, single in re.findall(r"(\d+)\s*(?:to|through|-)\s*(?:(?:paragraphs?|steps?)\s*)?(\d+)|(\d+)", numbers):
        if single:
            found.add(int(single))
        elif int(last) - int(first) <= 256:
            found |= set(range(int(first), int(last) + 1))
    return found


def _computes(text: str, value: int) -> bool:
    """Whether `text` computes `value` ("= 8", "+ 7", "is 8", "should be 8"): a value, not an index."""
    return re.search(
        r"(?:[=+*/×÷]|(?<!\bthe answer )(?<!final answer )(?<!index )(?<!verdict )"
        r"\b(?:is|was|be|are|equals?|gives?|gets?|got|makes?|totals?|yields?)\b)"
        rf"\s*{re.escape(str(value))}(?![\d.]*\d)",
        _plain(text),
    ) is not None


def _without_answer(closing: str, boxed: bool) -> str:
    """The closing without what states its answer: its last box, or its answer line."""
    boxes = _boxes(closing) if boxed else []
    if boxes:
        content, start, end = boxes[-1]
        return _with_boxes_opened(closing[:start] + " " + closing[end:])
    if boxed:  # the box sits above the closing (a reason after it ran over lines): the closing holds no answer
        return _with_boxes_opened(closing)
    return closing.rsplit("\n", 1)[0] if "\n" in closing else ""


def _plain(text: str) -> str:
    text = _TAG.sub(lambda m: f" {m.group(1) or m.group(3)} {m.group(2) or m.group(4)} ", text.lower())
    return re.sub(r"[ \t]+", " ", _MARKUP.sub(" ", text))


def _untagged(text: str) -> str:
    """`text` as _plain reads it, without tags such as <answer> (a paragraph's tag is kept)."""
    return _plain(_TAGS.sub(" ", text.lower()))


def _with_boxes_opened(text: str) -> str:
    """`text` with each box replaced by what it holds ("paragraph \\boxed{3}" reads "paragraph 3")."""
    for content, start, end in reversed(_boxes(text)):
        text = text[:start] + " " + _WRAPPERS.sub(r"\1", content) + " " + text[end:]
    return text


def _named(index: int) -> str:
    return "no error" if index == NO_ERROR else f"paragraph {index}"


def _shown(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")

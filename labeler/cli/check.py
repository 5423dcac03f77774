"""`labeler check`: verdicts of the answer checker from the command line.

    labeler check --gold G --pred P          prints the verdict (correct|incorrect|unparseable|timeout)
    labeler check --gold G --pred P --explain
                                             and why: the answers extracted (and by which rule), what the
                                             question says (--question), the rule that decided, the
                                             normal forms compared, the symbolic task when there is one
    labeler check --pairs FILE.jsonl         one JSON line per input line: {"verdict", "extracted", "rule"}
                                             (and "id" when the input line has one), in input order;
                                             with --explain also "explanation"

`--pairs -` reads standard input. Lines carry `gold` and `pred` (pred may be a whole solution), and
optionally `question`: the problem, which says whether a list is ordered and which quantity a count
noun must name. Messages go to stderr, results to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Iterator, TextIO

from labeler.checking.checker import AnswerChecker, CheckResult, Explanation, Verdict, positive_seconds
from labeler.cli.common import add_command, usage_error

COMMAND = "check"

# Pairs are checked in chunks so that large files stream and memory stays flat.
CHUNK = 4096


def register(subparsers) -> None:
    parser = add_command(
        subparsers,
        COMMAND,
        help="check predicted answers against reference answers",
        description=__doc__,
        usage_errors="bad usage or an unreadable file",
        failure='some input lines were malformed (each gets an "unparseable" line with an "error" field), or an unexpected failure',
    )
    parser.add_argument("--gold", help="reference answer")
    parser.add_argument("--pred", help="predicted answer or whole solution text")
    parser.add_argument("--pairs", metavar="FILE.jsonl", help="JSON lines with 'gold' and 'pred' ('-' for stdin)")
    parser.add_argument("--question", help="the problem asked (optional, with --gold/--pred): ordered or not, the quantity asked")
    parser.add_argument("--explain", action="store_true", help="also print why: extracted answers, the deciding rule, the normal forms compared")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds per symbolic check (default: 5.0)")
    parser.add_argument("--workers", type=int, default=None, help="worker processes for --pairs (default: all cores)")
    parser.set_defaults(handler=run)


def _usage_error(message: str) -> int:
    return usage_error(COMMAND, message)


def run(args: argparse.Namespace) -> int:
    gold = getattr(args, "gold", None)
    pred = getattr(args, "pred", None)
    pairs = getattr(args, "pairs", None)
    timeout = getattr(args, "timeout", 5.0)
    workers = getattr(args, "workers", None)
    question = getattr(args, "question", None)
    explain = bool(getattr(args, "explain", False))
    if pairs is not None and (gold is not None or pred is not None):
        return _usage_error("use either --pairs or --gold/--pred, not both")
    if pairs is not None and question is not None:
        return _usage_error("--question goes with --gold/--pred; in --pairs files each line may carry a 'question'")
    if pairs is None and (gold is None or pred is None):
        return _usage_error("give --gold and --pred, or --pairs FILE.jsonl")
    try:
        timeout = positive_seconds(timeout)
    except ValueError as error:
        return _usage_error(f"--timeout: {error}")
    if workers is not None and workers < 1:
        return _usage_error("--workers must be at least 1")

    if pairs is None:
        with AnswerChecker(timeout_s=timeout, workers=workers or 1) as checker:
            if explain:
                explanation = checker.explain(pred, gold, question)
                print(explanation.verdict.value)
                for line in _explanation_lines(explanation):
                    print(line)
            else:
                print(checker.check(pred, gold, question).verdict.value)
        return 0

    try:
        stream: TextIO = sys.stdin if pairs == "-" else open(pairs, encoding="utf-8")
    except OSError as exc:
        return _usage_error(f"cannot read {pairs}: {exc.strerror or exc}")
    malformed = 0
    try:
        with AnswerChecker(timeout_s=timeout, workers=workers) as checker:
            for chunk in _chunks(stream, pairs):
                good = [(p, g) for _, p, g, _, _, err in chunk if err is None]
                questions = [q for _, _, _, q, _, err in chunk if err is None]
                results = iter(checker.check_many(good, questions)) if good else iter(())
                for lineno, p, g, q, row_id, err in chunk:
                    if err is not None:
                        malformed += 1
                        print(f"labeler {COMMAND}: error: {pairs} line {lineno}: {err}", file=sys.stderr)  # a file's line, from 1
                        out = {"verdict": Verdict.UNPARSEABLE.value, "extracted": None, "error": err}
                    else:
                        out = _as_json(next(results))
                        if explain:
                            out["explanation"] = checker.explain(p, g, q).as_dict()
                    if row_id is not None:
                        out = {"id": row_id, **out}
                    print(json.dumps(out, ensure_ascii=False))
                sys.stdout.flush()
    except BrokenPipeError:
        # the reader went away (`... | head`): stop quietly
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except (OSError, UnicodeDecodeError) as exc:
        return _usage_error(f"cannot read {pairs}: {exc}")
    finally:
        if stream is not sys.stdin:
            stream.close()
    return 1 if malformed else 0


def _as_json(result: CheckResult) -> dict:
    return {"verdict": result.verdict.value, "extracted": result.extracted, "rule": result.rule}


def _explanation_lines(e: Explanation) -> list[str]:
    lines = [
        f"  prediction's answer: {e.prediction_answer!r} (found by: {e.extraction_rule})",
        f"  reference answer:    {e.reference_answer!r}",
    ]
    if e.question is not None:
        lines.append("  question says:       " + ", ".join(f"{k}={v}" for k, v in e.question.items()))
    lines.append(f"  rule:                {e.rule}")
    if e.prediction_form or e.reference_form:
        lines.append(f"  compared:            {e.prediction_form}  vs  {e.reference_form}")
    if e.symbolic_task is not None:
        lines.append(f"  symbolic task:       {json.dumps(e.as_dict()['symbolic_task'], ensure_ascii=False)}")
    for note in e.notes:
        lines.append(f"  note:                {note}")
    return lines


Row = tuple[int, str, str, "str | None", object, "str | None"]  # line number, pred, gold, question, id, error


def _chunks(stream: TextIO, name: str) -> Iterator[list[Row]]:
    """(line number, pred, gold, question, id, error) per non-blank line, CHUNK lines at a time."""
    chunk: list[Row] = []
    for lineno, line in enumerate(stream, start=1):
        if not line.strip():
            continue
        chunk.append((lineno, *_parse_line(line)))
        if len(chunk) >= CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _parse_line(line: str) -> tuple[str, str, "str | None", object, "str | None"]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        return "", "", None, None, f"not JSON ({exc.msg})"
    if not isinstance(obj, dict):
        return "", "", None, None, "not a JSON object"
    row_id = obj.get("id")
    gold, pred = obj.get("gold"), obj.get("pred")
    if not isinstance(gold, str) or not isinstance(pred, str):
        # numbers are common in hand-written files: accept them as their text
        if isinstance(gold, (int, float)) and not isinstance(gold, bool):
            gold = json.dumps(gold)
        if isinstance(pred, (int, float)) and not isinstance(pred, bool):
            pred = json.dumps(pred)
    if not isinstance(gold, str) or not isinstance(pred, str):
        return "", "", None, row_id, "needs string fields 'gold' and 'pred'"
    question = obj.get("question")
    if question is not None and not isinstance(question, str):
        return "", "", None, row_id, "'question' must be a string"
    return pred, gold, question, row_id, None

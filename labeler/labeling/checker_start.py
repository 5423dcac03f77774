"""Starting the answer checker before the engine: its worker pool (processes that import sympy and math-verify,
then a self-test) starts once, before the model loads, rather than at the first check beside a generating engine."""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def start_checker(checker) -> None:
    """`checker.start()` when it has one (AnswerChecker); a user's own checker or None is left alone. A start that
    fails is only logged: the first check starts the pool again and raises there what a failing pool raises
    (CheckerUnavailable), where a job handles it."""
    start = getattr(checker, "start", None)
    if start is None:
        return
    try:
        start()
    except Exception as error:  # noqa: BLE001 - the first check reports it
        logger.warning("answer checker: its worker pool did not start before the engine (%s); the first check starts it again", error)

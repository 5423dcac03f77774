"""The review app (`labeler view`): a FastAPI app of plain HTML pages, rendered on the server with Jinja2;
no build step, nothing fetched from the network. A little script loads a step's rollouts and a check's
explanation on click; every page also works without it.

Pages: / (the table of solutions), /solution/OUTPUT/ID (one solution; corrections are posted to it),
/solution/OUTPUT/ID/step/I (a step's rollouts), /explain/OUTPUT/ID/I/R (`labeler check --explain` of
one rollout), /health. An unknown solution is a 404 page, a bad filter a 400 page, anything else a 500
page that says what failed (the traceback goes to the server's log).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.exceptions import HTTPException

from labeler.store.corrections import CorrectionError, new_correction, steps_hash, write_correction
from labeler.review.index import FIRST_ERROR_CHOICES, JUDGE_CHOICES, SORTS, Query, QueryError, SolutionIndex
from labeler.review.solution import solution_view, step_rollouts
from labeler.review.sources import Sources
from schemas.corrections import ACTIONS, NO_ERROR
from schemas.tables import LABEL_METHODS

log = logging.getLogger("labeler.view")
TEMPLATES = Path(__file__).parent / "templates"


@dataclass(frozen=True)
class ReviewSettings:
    reviewer: str
    checker_timeout: float = 5.0


def create_app(sources: Sources, settings: ReviewSettings) -> FastAPI:
    index = SolutionIndex(sources)
    index.table()  # read the shards once before the first page
    templates = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"]))
    templates.globals.update(urlencode=urlencode, zip=zip, actions=ACTIONS, reviewer=settings.reviewer)
    checker = _Checker(settings.checker_timeout)
    app = FastAPI(title="labeler view", docs_url=None, redoc_url=None, openapi_url=None)
    app.router.on_shutdown.append(checker.close)

    def page(name: str, status: int = 200, **context) -> HTMLResponse:
        return HTMLResponse(templates.get_template(name).render(**context), status_code=status)

    def problem(status: int, title: str, message: str) -> HTMLResponse:
        return page("problem.html", status, title=title, message=message)

    def find(output: int, solution_id: str):
        located = index.locate(output, solution_id)
        if located is None:
            raise HTTPException(404, f"no solution {solution_id!r} in output #{output}")
        return located

    @app.exception_handler(HTTPException)
    async def http_problem(request: Request, error: HTTPException):
        titles = {404: "Not found", 400: "Bad request", 403: "Read-only", 409: "Changed", 405: "Not allowed"}
        return problem(error.status_code, titles.get(error.status_code, "Error"), str(error.detail))

    @app.exception_handler(Exception)
    async def failure(request: Request, error: Exception):
        log.exception("%s %s failed", request.method, request.url.path)
        return problem(500, "Something failed", f"{type(error).__name__}: {error}")

    @app.get("/health")
    def health():
        table = index.table()
        return JSONResponse({"status": "ok", "solutions": table.num_rows})

    @app.get("/", response_class=HTMLResponse)
    def solutions(request: Request):
        try:
            query = Query.from_params(dict(request.query_params))
            result = index.query(query)
        except QueryError as error:
            raise HTTPException(400, str(error)) from None
        bad = [(o, bad) for o in sources.labels for bad in (index.corrections.get(o.number).bad if o.number in index.corrections else [])]
        return page(
            "table.html",
            query=query, result=result, sources=sources, bad_corrections=bad,
            label_sources=index.label_sources(), verdicts=index.verdicts(), methods=LABEL_METHODS,
            first_error_choices=FIRST_ERROR_CHOICES, judge_choices=JUDGE_CHOICES, sorts=SORTS,
        )  # fmt: skip

    @app.get("/solution/{output}/{solution_id}", response_class=HTMLResponse)
    def solution(output: int, solution_id: str, saved: str = ""):
        located = find(output, solution_id)
        view = solution_view(index, located)
        return page("solution.html", view=view, output=located.output, saved=saved)

    @app.get("/solution/{output}/{solution_id}/step/{step}", response_class=HTMLResponse)
    def rollouts(output: int, solution_id: str, step: int, fragment: int = 0):
        located = find(output, solution_id)
        found = step_rollouts(located, solution_id, step)
        return page("rollouts.html", rollouts=found, output=output, solution_id=solution_id, step=step, fragment=bool(fragment))

    @app.get("/explain/{output}/{solution_id}/{step}/{rollout}", response_class=HTMLResponse)
    def explain(output: int, solution_id: str, step: int, rollout: int, fragment: int = 0):
        located = find(output, solution_id)
        found = [r for r in step_rollouts(located, solution_id, step) or [] if r["rollout_index"] == rollout]
        if not found:
            raise HTTPException(404, f"no rollout {rollout} of step {step} of solution {solution_id!r}")
        row = located.output.shards.read(located.file).slice(located.row, 1).to_pylist()[0]
        explanation = checker.explain(found[0]["text"], row["reference_answer"], row["problem"])
        return page("explain.html", rollout=found[0], explanation=explanation, fragment=bool(fragment))

    @app.post("/solution/{output}/{solution_id}/correct")
    async def correct(request: Request, output: int, solution_id: str):
        _same_origin(request)
        located = find(output, solution_id)
        if not located.output.writable:
            raise HTTPException(403, f"{located.output.given} is read-only here: {located.output.why_read_only}")
        form = await request.form()
        row = located.output.shards.read(located.file, ["problem_id", "steps"]).slice(located.row, 1).to_pylist()[0]
        if form.get("steps_hash") != steps_hash(row["steps"]):
            raise HTTPException(409, "this solution's steps changed since the page was loaded: reload it and correct again")
        action = str(form.get("action", ""))
        try:
            step = None if action == NO_ERROR or form.get("step_index") in (None, "") else int(form["step_index"])
            correction = new_correction(solution_id, row["problem_id"], row["steps"], action, step, str(form.get("note", "")), settings.reviewer)
        except CorrectionError as error:
            raise HTTPException(400, f"the correction cannot be saved: {error}") from None
        except ValueError:
            raise HTTPException(400, f"step_index: {form.get('step_index')!r} is not a number") from None
        name = write_correction(located.output.corrections, correction)
        log.info("%s: %s saved by %s", located.output.given, name, settings.reviewer)
        anchor = f"#step-{step}" if step is not None else ""
        return RedirectResponse(f"/solution/{output}/{solution_id}?saved={action}{anchor}", status_code=303)

    return app


def _same_origin(request: Request) -> None:
    """A form posted from another site's page is refused (the app has no login; this is its only guard)."""
    origin = request.headers.get("origin") or request.headers.get("referer")
    if origin and urlsplit(origin).netloc != request.headers.get("host"):
        raise HTTPException(403, "a correction must be posted from this app's own pages")


class _Checker:
    """The answer checker, started on the first explanation and shared by the requests (one at a time)."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self._checker = None
        self._lock = threading.Lock()

    def explain(self, prediction: str, reference: str, question: str):
        from labeler.checking.checker import AnswerChecker

        with self._lock:
            if self._checker is None:
                self._checker = AnswerChecker(timeout_s=self.timeout, workers=1)
            return self._checker.explain(prediction, reference, question)

    def close(self) -> None:
        if self._checker is not None:
            self._checker.close()


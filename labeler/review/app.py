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
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlencode, urlsplit

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.exceptions import HTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware

from labeler.store.corrections import CorrectionError, new_correction, steps_hash, write_correction
from labeler.review.config import EVERY_INTERFACE
from labeler.review.index import FIRST_ERROR_CHOICES, JUDGE_CHOICES, SORTS, Query, QueryError, SolutionIndex
from labeler.review.solution import solution_view, step_rollouts
from labeler.review.sources import Sources
from schemas.corrections import ACTIONS, NO_ERROR
from schemas.tables import LABEL_METHODS

log = logging.getLogger("labeler.view")
TEMPLATES = Path(__file__).parent / "templates"


LOCAL_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")
_NUMBER = re.compile(r"[0-9]{1,9}")  # an output's, a step's or a rollout's number in a path
_STEP_PATH = re.compile(r"(.+)/step/([^/]*)")  # SOLUTION_ID/step/I


@dataclass(frozen=True)
class ReviewSettings:
    reviewer: str
    checker_timeout: float = 5.0
    host: str = "127.0.0.1"  # the address bound: pages are served under it (or a local name) only
    allowed_hosts_given: tuple[str, ...] = ()  # --allowed-host: the other names the pages are served under

    def allowed_hosts(self) -> list[str]:
        """The Host headers served: a page of another site that resolves its own name to this address (DNS
        rebinding, which sends a matching Origin too) is refused. Bound to every interface, the address is
        no name: only the local names and those given (ViewConfig refuses that bind without any)."""
        given = [*self.allowed_hosts_given] + ([self.host] if self.host not in EVERY_INTERFACE else [])
        # matched as TrustedHostMiddleware reads the Host header: without its port, in lower case, IPv6 in brackets
        names = {*LOCAL_NAMES, *(f"[{h}]" if ":" in h and not h.startswith("[") else h for h in map(str.lower, given))}
        return sorted(names)


def create_app(sources: Sources, settings: ReviewSettings) -> FastAPI:
    index = SolutionIndex(sources)
    index.table()  # read the shards once before the first page
    templates = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"]))
    templates.globals.update(urlencode=urlencode, zip=zip, actions=ACTIONS, reviewer=settings.reviewer)
    templates.filters["path"] = lambda value: quote(str(value), safe="")  # a solution id in a URL path
    checker = _Checker(settings.checker_timeout)
    app = FastAPI(title="labeler view", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=settings.allowed_hosts())
    app.router.on_shutdown.append(checker.close)

    def page(name: str, status: int = 200, **context) -> HTMLResponse:
        return HTMLResponse(templates.get_template(name).render(**context), status_code=status)

    def problem(status: int, title: str, message: str) -> HTMLResponse:
        return page("problem.html", status, title=title, message=message)

    def number(text: str, what: str) -> int:
        if not _NUMBER.fullmatch(text):
            raise HTTPException(404, f"{what} {text!r} is not a number")
        return int(text)

    def find(output: str, solution_id: str, columns: list[str] | None = None):
        """The solution's place and labels row; a 404 page when no output has it."""
        found = index.solution_row(number(output, "output"), solution_id, columns)
        if found is None:
            raise HTTPException(404, f"no solution {solution_id!r} in output #{output}")
        return found

    def step_of(located, row, step: str) -> int:
        index_ = number(step, "step")
        if index_ >= len(row["steps"]):
            raise HTTPException(404, f"no step {index_} in solution {row['solution_id']!r} ({len(row['steps'])} steps)")
        return index_

    @app.exception_handler(HTTPException)
    async def http_problem(request: Request, error: HTTPException):
        titles = {404: "Not found", 400: "Bad request", 403: "Read-only", 409: "Changed", 405: "Not allowed"}
        return problem(error.status_code, titles.get(error.status_code, "Error"), str(error.detail))

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, error: RequestValidationError):
        where = "; ".join(f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg')}" for e in error.errors())
        return problem(400, "Bad request", where)

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

    def rollouts(output: str, solution_id: str, step: str, fragment: int):
        located, row = find(output, solution_id, ["steps"])
        step_index = step_of(located, row, step)
        found = step_rollouts(located, solution_id, step_index)
        return page("rollouts.html", rollouts=found, output=located.output.number, solution_id=solution_id, step=step_index, fragment=bool(fragment))

    @app.get("/explain/{output}/{solution_id:path}/{step}/{rollout}", response_class=HTMLResponse)
    def explain(output: str, solution_id: str, step: str, rollout: str, fragment: int = 0):
        located, row = find(output, solution_id, ["steps", "reference_answer", "problem"])
        step_index, rollout_index = step_of(located, row, step), number(rollout, "rollout")
        found = [r for r in step_rollouts(located, solution_id, step_index) or [] if r["rollout_index"] == rollout_index]
        if not found:
            raise HTTPException(404, f"no rollout {rollout_index} of step {step_index} of solution {solution_id!r}")
        explanation = checker.explain(found[0]["text"], row["reference_answer"], row["problem"])
        return page("explain.html", rollout=found[0], explanation=explanation, fragment=bool(fragment))

    @app.post("/solution/{output}/{solution_id:path}/correct")
    async def correct(request: Request, output: str, solution_id: str):
        _same_origin(request)
        located, row = find(output, solution_id, ["problem_id", "steps"])
        if not located.output.writable:
            raise HTTPException(403, f"{located.output.given} is read-only here: {located.output.why_read_only}")
        form = await request.form()
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
        return RedirectResponse(f"/solution/{located.output.number}/{quote(solution_id, safe='')}?saved={quote(action)}{anchor}", status_code=303)

    # A solution id may hold "/" (an imported dataset's), even ".../step/1": the whole path is tried as an
    # id first, then as an id and a step's rollouts
    @app.get("/solution/{output}/{path:path}", response_class=HTMLResponse)
    def solution_or_rollouts(output: str, path: str, saved: str = "", fragment: int = 0):
        whole = index.solution_row(number(output, "output"), path)
        step = _STEP_PATH.fullmatch(path)
        if whole is None and step is not None:
            return rollouts(output, step.group(1), step.group(2), fragment)
        located, row = whole or find(output, path)
        view = solution_view(index, located, row)
        return page("solution.html", view=view, output=located.output, saved=saved if saved in ACTIONS else "")

    return app


def _same_origin(request: Request) -> None:
    """A form posted from another site's page is refused (the app has no login; this is its only guard)."""
    origin = request.headers.get("origin") or request.headers.get("referer")
    if origin == "null" or (origin and urlsplit(origin).netloc != request.headers.get("host")):
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


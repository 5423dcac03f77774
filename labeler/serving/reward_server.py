"""A PRM as an HTTP reward server: OpenRLHF's remote reward model protocol, a per-step endpoint, health.

    POST /get_reward   OpenRLHF (--reward.remote_url, formerly --remote_rm_url, http://HOST:PORT/get_reward):
                       {"query": [prompt + response, ...], "prompts": [prompt, ...], "labels": [reference, ...]}
                       -> {"rewards": [float, ...], "scores": [reward / (1 + W), ...] (in [0, 1], as OpenRLHF's
                       dynamic filtering reads them), "extra_logs": {"prm_process": [...], "prm_unmeasured": [...]}}
                       The response is what follows the prompt in the query, cut into steps, in each form
                       OpenRLHF sends (response_of_query): the query starts with its prompt (0.8.0 on), or
                       with pad tokens and then the prompt (0.5.9-0.7 left-padded batches), or, its prompt
                       cut from the left to fit (0.9.1 on), with the prompt's end; pad and end tokens
                       around the response are dropped. Any other query (0.8.3-0.9.0 cut long prompts from
                       the right) is refused (400), never guessed.
                       The problem the PRM reads is the prompt's last user turn (ChatML, Llama 3 chats),
                       else the prompt, without special tokens (<|...|>). labels are the references when
                       --answer-weight > 0 (text or numbers; other JSON refused then, ignored without it).
                       Empty lists (OpenRLHF sends them to all but one of several URLs) get empty lists.
    POST /rewards      {"problems": [...], "completions": [...], "references": [...] (optional)}
                       -> {"rewards": [{"value", "process", "answer_correct", "step_scores", "reason",
                       "reason_kind"}, ...]}: every step's score (null past the PRM's length limit) and, for a
                       reward that could not be measured, value null, the reason ("1 of 3 steps unscored: past
                       the PRM's length limit") and its kind, without counts or values (labeler/rewards/
                       process_reward.py's REASON_KINDS: "steps unscored: past the PRM's length limit").
    GET  /health       {"status": "ok", "prm": SPEC, "pending": N, "batches": N, "scored": N, "abandoned": N,
                        "discarded": N, "retries_joined": N, "unmeasured": N, "unmeasured_by_reason": {REASON_KIND: N}}

A reward /get_reward cannot measure (an empty response, a step past the PRM's length limit, a missing label:
null, the NaN literal, blank or the text of a missing value, an answer check that timed out) is that sample's
alone: it gets --unmeasured-score (0.0 by default, a failing reward no higher than any measured one), flagged
in extra_logs.prm_unmeasured, logged with its reason and counted in /health by the reason's kind (one key
per cause, whatever the step counts); the other samples of the request get their rewards. But when the first
32 samples the server scores (SETUP_WINDOW, over one request or several) all have no reward for the same kind
of reason (labels never sent, or a --max-length below every response), that is the setup's fault, not a gap:
the request is refused (400) with the reason, and so is every later request whose samples all have no reward,
until one request has a measured sample (the setup fixed, say the labels now sent: no restart needed); from
then on, or once one of the first 32 is measured, every gap is per sample (labeler/rewards/setup_check.py). Malformed requests get 4xx with the reason (413: more completions
than --max-pending); a full queue 503; a request not answered in --request-timeout-s 504: its completions
are dropped unscored if still queued (counted as abandoned), or, when their batch is being scored already
(a PRM batch cannot be stopped), scored and their rewards discarded (counted as discarded, logged); the
same completions asked again meanwhile (a client's retry) take over that job, scored once; a PRM
that fails on a batch 500 with the error in one line. Splitting is linear in the text and the PRM's work
leaves the event loop free, so /health and the timeouts answer while a batch is scored. SIGTERM or
Ctrl-C: no new requests, each one in flight is answered (or times out), then it exits.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from labeler.rewards.process_reward import NO_REFERENCE, PAST_LIMIT, ProcessReward, Reward
from labeler.rewards.setup_check import FirstSamples, kind_of
from labeler.serving.batcher import Batcher, Busy, TooLarge
from labeler.serving.config import ServeConfig

# special tokens of the common chat templates: <|...|> (ChatML, Llama 3, Phi), <｜...｜> (DeepSeek, full-width bars),
# Gemma's <bos> <eos> <start_of_turn> <end_of_turn>, Llama 2 and Mistral's <s> </s> [INST] [/INST]
log = logging.getLogger("labeler.serve")
_SPECIAL_TOKEN = re.compile(r"<\|[^|<>]{1,64}\|>|<｜[^｜<>]{1,64}｜>|</?s>|<(?:bos|eos|pad|start_of_turn|end_of_turn)>|\[/?INST\]")
# the start of a chat turn and its role: ChatML <|im_start|>user, Llama 3 <|start_header_id|>user<|end_header_id|>,
# Gemma <start_of_turn>user, DeepSeek <｜User｜> / <｜Assistant｜>, Phi <|user|> / <|assistant|> / <|system|>
_LEADING_SPECIAL = re.compile(rf"^(?:\s*(?:{_SPECIAL_TOKEN.pattern}))+")
_TURN = re.compile(
    r"<\|(?:im_start|start_header_id)\|>\s*(\w+)\s*(?:<\|end_header_id\|>)?|<start_of_turn>(\w+)|<｜(User|Assistant)｜>"
    r"|<\|(user|assistant|system)\|>"
)


# A prompt cut from the left (OpenRLHF 0.9.1 on, to fit max_len) is found by its last characters, and may start
# at a token that decodes a little differently alone (a leading space, a partial UTF-8 character as U+FFFD): its
# first few characters (never a line break) may differ from the whole prompt's.
PROMPT_TAIL_CHARS = 64
CUT_TOKEN_CHARS = 3


def response_of_query(query: str, prompt: str) -> str | None:
    """The response in an OpenRLHF query (its decoded prompt and response) given the prompt, or None when the
    query holds no recognisable form of its prompt, or more than one: the query starts with the prompt; or with
    pad tokens (special tokens only) and then the prompt; or with the prompt's end (the prompt cut from the left):
    the query up to an occurrence of the prompt's last PROMPT_TAIL_CHARS characters, leading special tokens
    dropped, is the end of the prompt but for at most CUT_TOKEN_CHARS characters of a cut first token. When
    several occurrences qualify (a kept prompt that repeats itself), where the prompt ends is ambiguous: None."""
    if query.startswith(prompt):
        return query[len(prompt) :]
    at = query.find(prompt)
    if at > 0 and not _SPECIAL_TOKEN.sub("", query[:at]).strip():
        return query[at + len(prompt) :]
    tail = prompt[-PROMPT_TAIL_CHARS:]
    ends, start = [], 0
    while tail and (at := query.find(tail, start)) >= 0:
        end = at + len(tail)
        head = _LEADING_SPECIAL.sub("", query[:end])
        if len(head) > len(prompt) + CUT_TOKEN_CHARS:
            break
        skips = range(min(CUT_TOKEN_CHARS, len(head) - len(tail)) + 1)
        if any(prompt.endswith(head[skip:]) and "\n" not in head[:skip] for skip in skips):
            ends.append(end)
        start = at + 1
    return query[ends[0] :] if len(ends) == 1 else None


def problem_from_prompt(prompt: str) -> str:
    """The problem a PRM reads: the prompt's last user turn when it is a ChatML or Llama 3 chat, else the
    prompt; without special tokens either way."""
    turns = list(_TURN.finditer(prompt))
    role = lambda m: next(g for g in m.groups() if g).lower()  # noqa: E731
    users = [(m.end(), turns[i + 1].start() if i + 1 < len(turns) else len(prompt)) for i, m in enumerate(turns) if role(m) == "user"]
    text = prompt[users[-1][0] : users[-1][1]] if users else prompt
    return _SPECIAL_TOKEN.sub("\n", text).strip()


class OpenRLHFRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    query: list[str]
    prompts: list[str] | None = None
    labels: list[Any] | None = None  # the dataset's label as it is: text, numbers, or other JSON (read only with an answer weight)


class RewardsRequest(BaseModel):
    problems: list[str]
    completions: list[str]
    references: list[str | int | float | None] | None = None


def create_app(reward: ProcessReward, config: ServeConfig) -> FastAPI:
    batcher = Batcher(_scorer(reward), config.max_batch, config.max_wait_ms / 1000, config.max_pending)

    @asynccontextmanager
    async def lifespan(app):
        batcher.start()
        yield
        await batcher.drain()  # uvicorn stopped taking requests; those in flight are answered first
        reward.close()

    app = FastAPI(title="prm-labeler reward server", lifespan=lifespan)
    unmeasured: dict[str, int] = {}  # /get_reward's samples scored --unmeasured-score, by kind of reason (Reward.reason_kind)
    first_samples = FirstSamples()  # /get_reward's first SETUP_WINDOW samples: all unmeasured for one reason is refused

    async def rewards_of(problems: list[str], completions: list[str], references) -> list[Reward]:
        items = [(p, c, None if references is None else references[i]) for i, (p, c) in enumerate(zip(problems, completions))]
        if not items:
            return []
        try:
            return await asyncio.wait_for(batcher.submit(items), config.request_timeout_s)
        except TooLarge as error:
            raise HTTPException(413, str(error)) from None
        except Busy as busy:
            raise HTTPException(503, f"busy: {busy}; retry later", headers={"Retry-After": "1"}) from None
        except TimeoutError:
            raise HTTPException(
                504,
                f"no rewards within --request-timeout-s {config.request_timeout_s}: the completions are dropped unscored if "
                "still queued, else scored and their rewards discarded (/health counts abandoned and discarded)",
            ) from None
        except ValueError as error:  # a bad item, named by ProcessReward
            raise HTTPException(400, str(error)) from None
        except Exception as error:  # the PRM failed on this batch: one line here and in the answer, the server goes on
            log.error("scoring failed: %s: %s", type(error).__name__, error)
            raise HTTPException(500, f"scoring failed: {type(error).__name__}: {error}") from None

    @app.get("/health")
    async def health():
        return {
            "status": "ok", "prm": reward.config.prm, "pending": batcher.pending, "batches": batcher.batches,
            "scored": batcher.scored, "abandoned": batcher.abandoned, "discarded": batcher.discarded,
            "retries_joined": batcher.retries_joined, "unmeasured": sum(unmeasured.values()), "unmeasured_by_reason": dict(unmeasured),
        }  # fmt: skip

    @app.post("/rewards")
    async def rewards(request: RewardsRequest):
        _same_length(completions=request.completions, problems=request.problems, references=request.references)
        results = await rewards_of(request.problems, request.completions, request.references)
        return {"rewards": [r.to_dict() for r in results]}

    @app.post("/get_reward")
    async def get_reward(request: OpenRLHFRequest):
        if request.prompts is None:
            raise HTTPException(400, "prompts: needed beside query, to tell the prompt from the response (OpenRLHF sends both)")
        _same_length(query=request.query, prompts=request.prompts, labels=request.labels)
        if not request.query:  # OpenRLHF splits its samples over several URLs: the others get empty lists
            return JSONResponse({"rewards": [], "scores": [], "extra_logs": {"prm_process": [], "prm_unmeasured": []}})
        responses = []
        for i, (query, prompt) in enumerate(zip(request.query, request.prompts)):
            response = response_of_query(query, prompt)
            if response is None:
                raise HTTPException(
                    400,
                    f"query {i} does not start with its prompt, nor with pad tokens and then it, nor with its end (a prompt "
                    "cut from the left): cannot tell the response from it",
                )
            responses.append(_SPECIAL_TOKEN.sub("", response))
        problems = [problem_from_prompt(prompt) for prompt in request.prompts]
        references = None
        if reward.config.answer_weight > 0:
            if request.labels is None:
                raise HTTPException(400, "labels: the reference answers, needed with --answer-weight > 0")
            odd = next((i for i, label in enumerate(request.labels) if isinstance(label, bool) or not isinstance(label, str | int | float | type(None))), None)
            if odd is not None:
                raise HTTPException(400, f"labels[{odd}]: a {type(request.labels[odd]).__name__} is not a reference answer (text or a number)")
            references = request.labels
        results = await rewards_of(problems, responses, references)
        if (setup := first_samples.add(results)) is not None:
            log.error("the first %d samples this server scored all had no reward, for the same reason: %s", first_samples.size, setup)
            raise HTTPException(
                400,
                f"the first {first_samples.size} samples this server scored all had no reward, for the same reason: {setup}; "
                f"that is the setup{SETUP_HINTS.get(next(iter(first_samples.reasons)), '')}, not an occasional gap, and training would go on "
                "at a constant --unmeasured-score: fix it (no restart needed: the first request with a measured sample "
                "ends these refusals)",
            )
        for i, r in enumerate(results):
            if r.value is None:  # a number for every sample (OpenRLHF needs one), its reason logged and counted
                kind = kind_of(r)  # the reason without its counts: one key per cause in /health
                unmeasured[kind] = unmeasured.get(kind, 0) + 1
                log.warning(
                    "sample %d of %d: no reward (%s): scored %s (--unmeasured-score; %d unmeasured since start)", i, len(results), r.reason,
                    config.unmeasured_score, sum(unmeasured.values()),
                )  # fmt: skip
        values = [r.value if r.value is not None else config.unmeasured_score for r in results]
        # OpenRLHF reads scores as values in [0, 1] (its dynamic filtering): the reward over its largest value, 1 + W
        scale = 1.0 + reward.config.answer_weight
        # the same keys in every response (older OpenRLHF concatenates them across requests) and numbers only (JSON
        # has no NaN): an unmeasured sample's process reward is logged as the score it was given, flagged by prm_unmeasured
        extra = {
            "prm_process": [r.process if r.value is not None else config.unmeasured_score for r in results],
            "prm_unmeasured": [float(r.value is None) for r in results],
        }
        return JSONResponse({"rewards": values, "scores": [value / scale for value in values], "extra_logs": extra})

    return app


# where a setup whose first samples all had no reward most often goes wrong, by kind of reason
SETUP_HINTS = {NO_REFERENCE: " (labels not sent: OpenRLHF's --label_key)", PAST_LIMIT: " (a --max-length below every response)"}


def _scorer(reward: ProcessReward):
    def score(items: list[tuple[str, str, str | None]]) -> list[Reward]:
        problems, completions, references = zip(*items)
        return reward.rewards(list(problems), list(completions), list(references))  # references read only with an answer weight

    return score


def _same_length(**lists) -> None:
    given = {name: len(values) for name, values in lists.items() if values is not None}
    if len(set(given.values())) > 1:
        raise HTTPException(400, "lists of different lengths: " + ", ".join(f"{name} {n}" for name, n in given.items()))

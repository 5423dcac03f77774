"""Step scores from a PRM that `vllm serve` runs elsewhere: verl's reward loop serves reward models so,
behind its router, and hands the reward function the router's address.

    vllm serve runs/prm/best --runner pooling --pooler-config '{"task": "token_classify", "tok_pooling_type": "ALL"}'

The solutions are rendered to token ids here exactly as `labeler score` renders them for its own vLLM
engine (labeler/prm/pooling.py: the same PRM folder or public PRM, read without weights), sent to the
server's `/pooling` endpoint as token ids with `task` token_classify and no activation, and the raw
per-token logits that come back are read at the same positions the same way. So a served PRM gives
the scores the in-process one gives (tests/test_verl_pooling.py: a real `vllm serve` over HTTP).

The server must run the PRM this side renders for: `/v1/models` is read once, and a server whose
model is another folder, or whose context is shorter than the PRM's max length (it would refuse a
long solution mid-run rather than score the steps that fit), is refused at once, with both named. The
rows must be raw logits: at connection one short solution is asked for with use_activation false and
true, and a server that answers both with the same values in [0, 1] (it ignored the flag and gave its
activation's probabilities) is refused; an answer whose every row is a probability distribution (two or
more columns in [0, 1] summing to 1, as another replica behind a router could give) is refused too:
probabilities read as logits would be activated twice. Every item's `index` is checked (an integer, each of
0..n-1 once) and the items are read by it. A request that fails, or an answer of the wrong shape, raises
with the server's reason (behind verl's router, which re-raises, an HTTP 500): a reward computed from a
partial answer is never returned.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import torch

from labeler.evaluation.solutions import SolutionToScore
from labeler.prm.scorers import parse_spec
from labeler.prm.pooling import Reading, pooled_scores, prepare_pooling

TIMEOUT_SECONDS = 600
IGNORED_FLAG_ATOL = 1e-2  # rows with use_activation false and true this close (and in [0, 1]): the server ignores the flag
# how to score without the server when verl passes an address for a reward model of its own
OPT_OUT = " (to score in the reward worker instead, set +custom_reward_function.reward_kwargs.score_locally=true)"


class PoolingServerError(RuntimeError):
    """The server cannot score, or answered something that is not the scores asked for; the message says which."""


class PoolingServerScorer:
    """A StepScorer (labeler/prm/scorers.py) whose PRM runs in a `vllm serve` process at `address` (host:port or a URL)."""

    def __init__(self, spec: str, address: str, *, trust_remote_code: bool = False, max_length: int | None = None):
        kind, model = parse_spec(spec)
        folder, sequences, reading, context, render_problem = prepare_pooling(kind, model, spec, trust_remote_code, max_length)
        self.name = spec
        self.backend = "vllm-server"
        self.url = address.rstrip("/") if "://" in address else f"http://{address.rstrip('/')}"
        self._sequences = sequences
        self.reading: Reading = reading
        self.served_model = self._served_model(folder, context)
        self._check_raw_logits()
        if reading.trajectory_column is not None:  # what score_solutions looks for
            self.step_and_trajectory_scores = self._scores
        if render_problem is not None:
            self.render_problem = render_problem

    def _served_model(self, folder: str, context: int) -> str:
        """The server's model id, after checking it serves `folder` (its `root`, or the id, names the same folder)
        with a context of at least the PRM's max length `context`."""
        models = _request(f"{self.url}/v1/models", None).get("data") or []
        if not isinstance(models, list) or len(models) != 1 or not isinstance(models[0], dict):
            count = len(models) if isinstance(models, list) else "no"
            raise PoolingServerError(f"{self.url} serves {count} models; expected the one PRM {folder}{OPT_OUT}")
        served = models[0]
        names = {str(served.get("root") or ""), str(served.get("id") or "")}
        if not any(name and _same_folder(name, folder) for name in names):
            raise PoolingServerError(
                f"{self.url} serves {served.get('root') or served.get('id')}, not the PRM {folder} whose rendering this reward uses: "
                f"serve that folder (vllm serve FOLDER --runner pooling), or name the served one in reward_kwargs.prm{OPT_OUT}"
            )
        served_context = served.get("max_model_len")
        if isinstance(served_context, int) and served_context < context:
            raise PoolingServerError(
                f"{self.url} serves {folder} with a context of {served_context} tokens, under the PRM's max length of {context}: "
                f"it would refuse longer solutions mid-run; serve it with --max-model-len {context} or more"
            )
        return served["id"]

    def _check_raw_logits(self) -> None:
        """Ask for one short solution's rows with use_activation false and true: a server that answers both the
        same way ignores the flag, and with values in [0, 1] it gave probabilities (vLLM's default activation),
        which read as logits would be activated a second time: refused."""
        probe = SolutionToScore("probe", "probe", "What is 1 + 1?", ("1 + 1 = 2.", "The answer is 2."))
        ids = self._sequences([probe])[0][0]
        if not ids:
            return
        raw, activated = (self._pooling([ids], use_activation=flag)[0] for flag in (False, True))
        # "the same" within IGNORED_FLAG_ATOL: two requests need not give the same rows bit for bit (bf16, batch-dependent
        # kernels; a bf16 step near 1 is 2^-8); raw logits all in [0, 1] and that close to their own activation do not occur
        same = raw.shape == activated.shape and torch.allclose(raw, activated, rtol=0, atol=IGNORED_FLAG_ATOL)
        if same and bool(((raw >= 0) & (raw <= 1)).all()):
            raise PoolingServerError(
                f"{self.url}/pooling answered probabilities where raw logits were asked for: the same rows with use_activation "
                "false as with true (the server ignores the flag and applies its activation); reading them as logits would "
                f"activate them twice: serve with a vLLM whose /pooling honours use_activation{OPT_OUT}"
            )

    def _pooling(self, token_ids: list[list[int]], use_activation: bool = False) -> list[torch.Tensor]:
        """The per-token rows of each token-id list, in order: every item's index checked (each of 0..n-1 once),
        and, where raw logits were asked for, rows that are probability distributions refused."""
        body = {"model": self.served_model, "input": token_ids, "task": "token_classify", "use_activation": use_activation}
        data = _request(f"{self.url}/pooling", body).get("data")
        if isinstance(data, list) and not all(isinstance(item, dict) and isinstance(item.get("data"), list) for item in data):
            raise PoolingServerError(f"{self.url}/pooling answered items without per-token data")
        if not isinstance(data, list) or len(data) != len(token_ids):
            raise PoolingServerError(f"{self.url}/pooling answered {len(data) if isinstance(data, list) else 'no'} outputs for {len(token_ids)} solutions")
        by_index: dict[int, list] = {}
        for k, item in enumerate(data):
            index = item.get("index")
            if not isinstance(index, int) or isinstance(index, bool):
                raise PoolingServerError(f"{self.url}/pooling: item {k} has no integer index ({index!r}): which solution it scores is unknown")
            if not 0 <= index < len(token_ids):
                raise PoolingServerError(f"{self.url}/pooling: item {k} has index {index}, out of 0..{len(token_ids) - 1} for {len(token_ids)} solutions")
            if index in by_index:
                raise PoolingServerError(f"{self.url}/pooling answered index {index} twice (items of {len(token_ids)} solutions): one would go unscored")
            by_index[index] = item["data"]
        try:
            rows = [torch.tensor(by_index[i], dtype=torch.float32) for i in range(len(token_ids))]
        except (TypeError, ValueError) as error:  # ragged or not numbers
            raise PoolingServerError(f"{self.url}/pooling answered per-token data that is not a table of numbers: {error}") from None
        if not use_activation and _probability_rows(rows):
            raise PoolingServerError(
                f"{self.url}/pooling answered probabilities where raw logits were asked for: every row of its {len(rows)} outputs "
                "is a distribution (in [0, 1], summing to 1), as the server's activation gives them; reading them as logits would "
                f"activate them twice: serve with a vLLM whose /pooling honours use_activation (each replica behind a router){OPT_OUT}"
            )
        return rows

    def step_scores(self, solutions: Sequence[SolutionToScore]) -> list[list[float | None]]:
        return [steps for steps, _ in self._scores(solutions)]

    def _scores(self, solutions: Sequence[SolutionToScore]) -> list[tuple[list[float | None], float | None]]:
        shape_error = lambda solution, shape, tokens: PoolingServerError(  # noqa: E731
            f"{self.url}/pooling returned {shape} for the {tokens} tokens of solution {solution} "
            "(expected one row per token: serve with --pooler-config '{\"task\": \"token_classify\", \"tok_pooling_type\": \"ALL\"}')"
        )
        return pooled_scores(solutions, self._sequences(solutions), self.reading, self._pooling, shape_error)

    def close(self) -> None:
        pass  # the server is not ours to stop


def _probability_rows(rows: list[torch.Tensor]) -> bool:
    """Whether every row of every output is a probability distribution over two or more classes (what softmax
    gives): raw logits of a real head over whole solutions never are. One-column rows cannot tell (a sigmoid's
    output is also a logit's value): the check at connection covers them."""
    tables = [r for r in rows if r.dim() == 2 and r.shape[0] > 0]
    if not tables or any(r.shape[1] < 2 for r in tables):
        return False
    return all(bool(((r >= 0) & (r <= 1)).all()) and torch.allclose(r.sum(dim=1), torch.ones(r.shape[0]), atol=1e-4) for r in tables)


def _same_folder(name: str, folder: str) -> bool:
    try:
        return Path(name).resolve() == Path(folder).resolve() or name == folder
    except OSError:
        return name == folder


def _request(url: str, body: dict | None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"}, method="GET" if body is None else "POST")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
            answer = json.loads(response.read())
    except urllib.error.HTTPError as error:
        detail = error.read().decode(errors="replace")[:500]
        raise PoolingServerError(f"{url}: HTTP {error.code}: {detail}") from error
    except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
        raise PoolingServerError(f"{url}: cannot reach the PRM server: {error}{OPT_OUT}") from error
    except (ValueError, http.client.HTTPException) as error:  # not JSON, or cut off (IncompleteRead)
        raise PoolingServerError(f"{url}: no readable answer: {error}") from error
    if not isinstance(answer, dict):
        raise PoolingServerError(f"{url}: answered a JSON {type(answer).__name__}, not an object")
    return answer

"""The vLLM pooling client (verl's path, labeler/prm/pooling_client.py) against servers that answer wrongly, over
real HTTP: a small local server whose /v1/models names the PRM and whose /pooling returns crafted bodies.
Rows that are already probabilities where raw logits were asked for (a server that ignored use_activation)
are refused, never activated a second time; every item's index is checked (missing, repeated, out of range
refused) and items are read by it, whatever order they come in."""

from __future__ import annotations

import http.server
import json
import math
import threading

import pytest
import torch

from labeler.evaluation.solutions import SolutionToScore
from labeler.prm.pooling_client import PoolingServerError, PoolingServerScorer
from tests.test_verl_pooling import token_classifier_prm  # noqa: F401 (a fixture: a format-2 PRM with a trajectory head)

SOLUTIONS = [
    SolutionToScore("p", "s0", "What is 2 + 3?", ("2 + 3 = 5.", "The answer is 5.")),
    SolutionToScore("p", "s1", "What is 4 + 4?", ("4 + 4 = 9.", "So 9.", "The answer is 9.")),
]


def raw_rows(token_ids: list[int]) -> list[list[float]]:
    """Two logits per token, spread over both signs as a real head's are."""
    return [[3.0 * math.sin(t + 0.5), 2.0 * math.cos(0.7 * t)] for t in token_ids]


class CraftedPoolingServer:
    """/v1/models serves `root` (context 384); /pooling answers per `self.mode`:
    honest: raw rows, or their softmax when use_activation is true (what vLLM does)
    activated: the softmax rows whatever use_activation says (a server that ignores it)
    sigmoid: each value's sigmoid whatever use_activation says (a multi-label head's activation, ignored flag)
    bf16_sigmoid: the same, rounded to bf16 and one bf16 step apart from one request to the next (batch-dependent
    numerics: the same rows do not come back bit for bit)
    reversed: honest rows, the items in reverse order (their indices say which is which)
    no_index, repeated_index, index_out_of_range, bool_index: honest rows with the items' indices so broken"""

    def __init__(self, root: str):
        self.mode = "honest"
        self.requests: list[dict] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self._send({"data": [{"id": root, "root": root, "max_model_len": 384}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                self._send({"data": outer.items(body)})

            def _send(self, answer):
                payload = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def items(self, body: dict) -> list[dict]:
        mode, activate = self.mode, body.get("use_activation") is not False
        rows = [torch.tensor(raw_rows(ids)) for ids in body["input"]]
        if mode == "activated" or mode == "honest" and activate:
            rows = [torch.softmax(r, dim=-1) for r in rows]
        elif mode == "sigmoid":
            rows = [torch.sigmoid(r) for r in rows]
        elif mode == "bf16_sigmoid":
            step = 2.0**-8 * (len(self.requests) % 2)  # a bf16 step near 1 (2^-8), every other request
            rows = [torch.sigmoid(r).to(torch.bfloat16).float().sub(step).clamp(0, 1) for r in rows]
        items = [{"index": i, "data": r.tolist(), "object": "pooling"} for i, r in enumerate(rows)]
        if mode == "reversed":
            items.reverse()
        elif mode == "no_index":
            del items[-1]["index"]
        elif mode == "repeated_index":
            items[-1]["index"] = 0
        elif mode == "index_out_of_range":
            items[-1]["index"] = len(items)
        elif mode == "bool_index":
            items[0]["index"] = False
        return items

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.server.shutdown()


def expected_scores(scorer: PoolingServerScorer) -> list[list[float]]:
    """The step probabilities the honest server's raw rows give: sigmoid of column 0 at the score positions."""
    out = []
    for (ids, positions, _), solution in zip(scorer._sequences(SOLUTIONS), SOLUTIONS, strict=True):
        steps = torch.sigmoid(torch.tensor(raw_rows(ids))[positions, 0]).tolist()
        out.append(steps + [None] * (len(solution.steps) - len(steps)))
    return out


def test_an_honest_server_gives_the_steps_of_its_raw_logits_read_by_index_in_any_order(token_classifier_prm):  # noqa: F811
    with CraftedPoolingServer(token_classifier_prm) as server:
        scorer = PoolingServerScorer(token_classifier_prm, server.address)
        want = expected_scores(scorer)
        for mode in ("honest", "reversed"):
            server.mode = mode
            for got, expected in zip(scorer.step_scores(SOLUTIONS), want, strict=True):
                assert got == pytest.approx(expected), mode
    scoring = [request for request in server.requests if len(request["input"]) == len(SOLUTIONS)]
    assert len(scoring) == 2 and all(request["use_activation"] is False for request in scoring)  # raw logits asked for


@pytest.mark.parametrize("mode", ["activated", "sigmoid", "bf16_sigmoid"])
def test_a_server_that_ignores_use_activation_is_refused_when_the_client_connects(token_classifier_prm, mode):  # noqa: F811
    with CraftedPoolingServer(token_classifier_prm) as server:
        server.mode = mode
        with pytest.raises(PoolingServerError, match="probabilities where raw logits were asked for.*activate them twice"):
            PoolingServerScorer(token_classifier_prm, server.address)


def test_probabilities_in_an_answer_are_refused_even_after_an_honest_start(token_classifier_prm):  # noqa: F811
    """Behind verl's router another replica may answer: rows that are probability distributions are refused."""
    with CraftedPoolingServer(token_classifier_prm) as server:
        scorer = PoolingServerScorer(token_classifier_prm, server.address)
        server.mode = "activated"
        with pytest.raises(PoolingServerError, match="probabilities where raw logits were asked for"):
            scorer.step_scores(SOLUTIONS)


@pytest.mark.parametrize(
    "mode, says",
    [
        ("no_index", "item 1 has no integer index"),
        ("bool_index", "item 0 has no integer index"),
        ("repeated_index", "index 0 twice"),
        ("index_out_of_range", "item 1 has index 2, out of 0..1 for 2 solutions"),
    ],
)
def test_every_item_index_is_checked(token_classifier_prm, mode, says):  # noqa: F811
    with CraftedPoolingServer(token_classifier_prm) as server:
        scorer = PoolingServerScorer(token_classifier_prm, server.address)
        server.mode = mode
        with pytest.raises(PoolingServerError, match=says):
            scorer.step_scores(SOLUTIONS)

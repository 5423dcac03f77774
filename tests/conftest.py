import gc
import json
import os
from pathlib import Path

import pytest

# The shared data (ProcessBench, GSM8K, MATH-500): ../shared/data beside the checkout, or where this says
SHARED_DATA_DIR = "PRM_LABELER_SHARED_DATA"
SHARED_DATA = Path(os.environ.get(SHARED_DATA_DIR) or Path(__file__).resolve().parents[1].parent / "shared" / "data")
# Set to 1 to run without it: its tests are skipped, each with the reason (pytest -ra lists them); else they fail
NO_SHARED_DATA = "PRM_LABELER_NO_SHARED_DATA"


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny random Llama (head_dim 64) with a locally trained tokenizer: no hub, a few seconds."""
    from tests.tiny_model import build_tiny_llama

    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def tiny_engine(tiny_model_dir):
    """One real vLLM engine (CPU build) shared by every integration test of the session."""
    from workers.vllm_generator import VLLMGenerator

    generator = VLLMGenerator(str(tiny_model_dir), model_name="tiny-llama", dtype="float32", max_model_len=1024)
    yield generator
    # While this engine lives, every other in-process engine a test closes is set aside, and closing this one, the
    # last, shuts them all down (workers/vllm_generator.py: shutdown_engine), each with two full gc.collect() of this
    # process: 63 s of a make test run's last test for its ~60 engines. One collection after them frees the same.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gc, "collect", lambda *args, **kwargs: 0)
        generator.close()
    gc.collect()


class KeptOpen:
    """The session's engine handed to a command: the command's close leaves it open for the next."""

    def __init__(self, engine):
        self.engine = engine

    def close(self) -> None:
        pass

    def __getattr__(self, name):
        return getattr(self.engine, name)


@pytest.fixture
def commands_on_tiny_engine(tiny_engine, monkeypatch):
    """Commands run in this process (labeler.cli.main) get the session's engine instead of starting one (about
    20 s each on 2 cores): give them the tiny model's folder and its settings (--dtype float32 --max-model-len 1024).
    Starting an engine in a fresh `labeler` process is what tests/test_cli_resume.py and test_embedded_defaults.py run."""
    import workers.vllm_generator

    monkeypatch.setattr(workers.vllm_generator, "start_engine", lambda model, config: KeptOpen(tiny_engine))
    return tiny_engine


class ServedOnAThread:
    """A server the CLI built (labeler.cli.view.start_view, labeler.cli.serve.start_serve), run on a thread of
    this process, over real HTTP: its start and its stop each bounded, a start that fails said at once."""

    def __init__(self, server, sock, timeout: float = 60):
        import threading
        import time

        self.server, self.timeout = server, timeout
        self.thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:  # a start that fails ends the thread
            assert self.thread.is_alive() and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=self.timeout)
        assert not self.thread.is_alive(), f"the server did not stop within {self.timeout:.0f} s"


@pytest.fixture(scope="session")
def sample_labels_output(tiny_model_dir, tiny_engine, tmp_path_factory) -> Path:
    """A real labeling output (the packaged sample problems, 8 solutions in shards of 3, rollouts kept),
    made once with the shared engine: copy it before writing into it."""
    from tests.review_support import label_sample_problems

    return label_sample_problems(tiny_model_dir, tiny_engine, tmp_path_factory.mktemp("sample-labels") / "out")


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def write_take_one_rows(path: Path, problems: dict[str, str]) -> Path:
    """`problems` (text -> answer, "What is k minus 1?") as two-step solutions, one row each, in a JSON Lines file."""
    rows = [
        {"id": f"q{k}", "problem": problem, "answer": answer, "steps": [f"Take 1 from {k + 2}.", f"The answer is: {answer}"]}
        for k, (problem, answer) in enumerate(problems.items())
    ]
    return write_jsonl(path, rows)


def status_of(out, capsys) -> tuple[dict, str]:
    """`labeler status OUT` as JSON and as text."""
    from labeler.cli import main

    capsys.readouterr()
    assert main(["status", str(out), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert main(["status", str(out)]) == 0
    return status, capsys.readouterr().out


def shared_data(relative: str) -> Path:
    """The shared data file or folder `relative`; a failure naming it when it is missing (a skip, with the
    reason, where the run says it goes without the shared data): a figure never goes untested unnoticed."""
    path = SHARED_DATA / relative
    if path.exists():
        return path
    why = f"{path} is absent: the shared data folder (../shared/data beside this checkout, or ${SHARED_DATA_DIR}) is missing"
    if os.environ.get(NO_SHARED_DATA) == "1":
        pytest.skip(f"{why}; {NO_SHARED_DATA}=1 runs without it")
    pytest.fail(f"{why}; set {SHARED_DATA_DIR}=DIR to where it is, or {NO_SHARED_DATA}=1 to skip the tests that need it", pytrace=False)


@pytest.fixture
def local_ray():
    """A local Ray instance (2 CPUs), started by the first test that asks for it and kept for the tests that
    follow in a row and ask for it too (about 5 s a start); shut down after the last of them (below)."""
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    return ray


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Ray stops once the next test does not use it (after this test's own teardown, its fixtures' included):
    its processes stay out of the tests that follow."""
    import sys

    yield
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized() and "local_ray" not in getattr(nextitem, "fixturenames", ()):
        ray.shutdown()

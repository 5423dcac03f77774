"""`labeler serve`: a PRM as an HTTP reward server for RL (OpenRLHF's remote reward model, or any client).

    labeler serve --prm runs/prm/best --port 8000
    labeler serve --prm qwen-prm:Qwen/Qwen2.5-Math-PRM-7B --answer-weight 1.0 --unmeasured-score 0.0

Endpoints (labeler/serving/reward_server.py): POST /get_reward (OpenRLHF's protocol: query, prompts,
labels -> rewards, scores, extra_logs), POST /rewards (problems, completions, references -> each
completion's reward, step scores and, where the reward could not be measured, the reason), GET /health.
It binds to 127.0.0.1 unless --host says otherwise; stdout gets one line, the URL it listens on, once
the PRM is loaded; logs go to stderr. SIGTERM or Ctrl-C: each request in flight is answered (or times out
with 504), then it exits 0 with a "stopped" line on stderr (--quiet too); a second signal stops it at once.
SIGTERM while the PRM loads exits 0 too (Ctrl-C then: 130), saying it stopped before it served.
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys

from labeler.cli.common import EXIT_OK, RunOptions, add_command, http_address, log_to_stderr, quiet_transformers, run_until_stopped, usage_error
from labeler.cli.flags import add_flags, flag_values

COMMAND = "serve"
RUN_OPTIONS = ("quiet", "verbose")
log = logging.getLogger("labeler.serve")


def register(subparsers) -> None:
    from labeler.prm.backends import BackendConfig

    from labeler.rewards.config import RewardConfig
    from labeler.serving.config import ServeConfig

    parser = add_command(
        subparsers,
        COMMAND,
        help="serve a PRM as an HTTP reward (OpenRLHF's remote reward model protocol)",
        description=__doc__,
        usage_errors="bad usage, a PRM that cannot load, or an address that cannot be bound",
    )
    add_flags(parser, RewardConfig)
    add_flags(parser, BackendConfig)
    add_flags(parser, ServeConfig)
    add_flags(parser, RunOptions, only=RUN_OPTIONS)
    parser.set_defaults(handler=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    started = start_serve(args)
    if isinstance(started, int):
        return started
    server, sock, url = started
    # a stop asked for exits 0 (Ctrl-C while the PRM loads, before this, is still an interruption: 130); the URL is
    # printed once the stop handler is in place: a signal sent at any moment after it stops the server cleanly
    # the stop is the command's result: said on stderr even with --quiet (whose logs are warnings only)
    if run_until_stopped(server, sock, announce=lambda: print(url, flush=True)):  # a second Ctrl-C or SIGTERM during the stop
        print(f"labeler {COMMAND}: stopped at once (a second signal): requests in flight may be unanswered", file=sys.stderr)
    else:
        print(f"labeler {COMMAND}: stopped; every request in flight was answered", file=sys.stderr)
    return EXIT_OK


def start_serve(args: argparse.Namespace):
    """The server of `args` with its PRM loaded, its bound socket and its address, ready to run; or the
    exit code of a usage error."""
    from labeler.cli.common import backend_config
    from labeler.rewards.config import RewardConfig
    from labeler.serving.config import ServeConfig

    run_options = RunOptions(**flag_values(args, RunOptions, only=RUN_OPTIONS))
    log_to_stderr(run_options.quiet)
    if not run_options.verbose:
        quiet_transformers()
    try:
        reward_config = RewardConfig(**flag_values(args, RewardConfig))
        backend = backend_config(args)
        serve_config = ServeConfig(**flag_values(args, ServeConfig))
    except ValueError as error:
        return usage_error(COMMAND, str(error))
    try:
        sock = socket.create_server((serve_config.host, serve_config.port))
    except OSError as error:
        return usage_error(COMMAND, f"cannot listen on {serve_config.host}:{serve_config.port}: {error.strerror or error}")
    import uvicorn

    from labeler.cli.common import prm_scorer
    from labeler.prm.devices import place
    from labeler.rewards.process_reward import ProcessReward
    from labeler.serving.reward_server import create_app

    try:
        placement = place(reward_config.device, reward_config.precision)
        scorer = prm_scorer(backend, reward_config.prm, placement, reward_config.batch_size, reward_config.trust_remote_code, reward_config.max_length)
        reward = ProcessReward(reward_config, scorer=scorer)
    except ValueError as error:  # PRMLoadError and bad settings: one line
        sock.close()
        return usage_error(COMMAND, str(error).splitlines()[0])
    host, port = sock.getsockname()[:2]
    log.info("PRM %s loaded; serving on %s:%d", reward_config.prm, host, port)
    # a stop waits for every request in flight: each ends within --request-timeout-s (answered, or 504)
    graceful_s = int(serve_config.request_timeout_s) + 5
    server = uvicorn.Server(uvicorn.Config(create_app(reward, serve_config), log_level="warning", timeout_graceful_shutdown=graceful_s))
    return server, sock, http_address(sock)

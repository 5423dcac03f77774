"""After Ctrl-C or SIGTERM each command says what a rerun does, truthfully: only the commands that keep their
progress say "rerun the same command to resume"; the others say they start over; `labeler serve`, whose normal
stop is SIGTERM, exits 0 with a "stopped" line (the outside read's finding 4)."""

import signal
import time

import pytest

from labeler.cli import RESUME_NOTE, main
from labeler.cli import check, export, report, select, serve, status, view, search
from labeler.cli.common import EXIT_INTERRUPTED, EXIT_OK, EXIT_TERMINATED, Terminated
from tests.test_reward_server import Server, qwen_prm  # noqa: F401 (a module fixture)

STARTS_OVER = {
    "select": (select, "run_select", ["select", "--input", "x", "--output", "y", "--prm", "p", "--top", "0.2"]),
    "export": (export, "run_export", ["export", "x", "--output", "y", "--format", "trl"]),
    "report": (report, "run_report", ["report", "x"]),
    "check": (check, "run", ["check"]),
    "status": (status, "run", ["status", "x"]),
    "view": (view, "run_view", ["view", "x"]),
    "search": (search, "run_search", ["search", "--input", "x", "--output", "y", "--prm", "p"]),
}


def raising(error):
    def handler(args):
        raise error

    return handler


@pytest.mark.parametrize("command", sorted(STARTS_OVER))
@pytest.mark.parametrize("signal_error, code, said", [(KeyboardInterrupt(), EXIT_INTERRUPTED, "interrupted"), (Terminated(), EXIT_TERMINATED, "stopped by SIGTERM")])
def test_commands_that_keep_no_progress_do_not_promise_a_resume(command, signal_error, code, said, monkeypatch, capsys):
    module, handler, argv = STARTS_OVER[command]
    monkeypatch.setattr(module, handler, raising(signal_error))
    assert main(argv) == code
    err = capsys.readouterr().err
    assert err.startswith(f"labeler {command}: {said}; ") and RESUME_NOTE not in err and "rerun" in err, err


def test_serve_stopped_by_sigterm_while_its_prm_loads_exits_0_with_a_stopped_line(monkeypatch, capsys):
    monkeypatch.setattr(serve, "start_serve", raising(Terminated()))
    assert main(["serve", "--prm", "p"]) == EXIT_OK
    err = capsys.readouterr().err
    assert err.startswith("labeler serve: stopped") and RESUME_NOTE not in err, err


def test_serve_stopped_by_sigterm_exits_0_with_a_stopped_line_even_quiet(qwen_prm):  # noqa: F811
    served = Server("--prm", qwen_prm, "--quiet")
    code, stderr = served.stop(signal.SIGTERM)
    assert code == EXIT_OK, stderr
    assert "stopped" in stderr and RESUME_NOTE not in stderr and "Traceback" not in stderr, stderr


# --- a stop asked for at any moment of `labeler serve`'s start is never lost (final outside read, finding 1) ---
# uvicorn installs its own handlers only once serve() runs, after the event loop is built: a signal in that gap
# hit a do-nothing handler and the server ran on. Each moment below is hit deterministically, in this process,
# with a real signal; a watchdog stops a server that swallowed it, and the test fails saying so.


async def _app(scope, receive, send):
    """A bare ASGI app: /slow never answers (a request in flight), anything else answers "ok"."""
    import asyncio

    if scope["type"] != "http":
        return
    if scope["path"] == "/slow":
        await asyncio.sleep(300)
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture
def signal_handlers():
    """The test process's SIGTERM and SIGINT handlers, put back after the test whatever it left."""
    kept = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in kept.items():
        signal.signal(sig, handler)


def _bare_server():
    import socket

    import uvicorn

    from labeler.cli.common import http_address

    sock = socket.create_server(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(_app, lifespan="off", log_level="warning", timeout_graceful_shutdown=40))
    return server, sock, http_address(sock)


def _watchdog(server, after_s: float = 30):
    """Stops `server` if it still runs after `after_s` (a swallowed signal); whether it had to."""
    import threading

    fired = threading.Event()

    def watch():
        deadline = time.monotonic() + after_s
        while time.monotonic() < deadline:
            if server.should_exit:  # the signal reached the server
                return
            time.sleep(0.05)
        fired.set()
        server.should_exit = server.force_exit = True

    threading.Thread(target=watch, daemon=True).start()
    return fired


def _signal_at(moment: str, sig, server, url: str, monkeypatch):
    """Arrange for `sig` to reach this process at `moment` of `labeler serve`'s start."""
    import builtins
    import os
    import threading

    if moment == "after the URL":  # the line a client waits for, then its signal at once

        def print_then_signal(*args, **kwargs):
            builtins.print(*args, **kwargs)
            if args == (url,):
                signal.raise_signal(sig)

        monkeypatch.setattr(serve, "print", print_then_signal, raising=False)
    elif moment == "before uvicorn's handlers":  # run() builds its event loop before serve() installs its handlers
        factory = server.config.get_loop_factory

        def signal_then_factory():
            signal.raise_signal(sig)
            return factory()

        monkeypatch.setattr(server.config, "get_loop_factory", signal_then_factory)
    elif moment == "while serving":

        def send_once_started():
            while not server.started:
                time.sleep(0.01)
            os.kill(os.getpid(), sig)

        threading.Thread(target=send_once_started, daemon=True).start()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("moment", ["after the URL", "before uvicorn's handlers", "while serving"])
def test_serve_stops_cleanly_on_a_signal_at_any_moment_after_its_url(moment, sig, monkeypatch, capsys, signal_handlers):
    server, sock, url = _bare_server()
    monkeypatch.setattr(serve, "start_serve", lambda args: (server, sock, url))
    _signal_at(moment, sig, server, url, monkeypatch)
    swallowed = _watchdog(server)
    code = main(["serve", "--prm", "p", "--quiet"])
    out, err = capsys.readouterr()
    assert not swallowed.is_set(), f"the {sig.name} sent {moment} was lost: the server ran on until the test stopped it"
    assert out.splitlines()[0] == url
    assert code == EXIT_OK, err
    assert "labeler serve: stopped; every request in flight was answered" in err and "Traceback" not in err, err


def test_serve_stopped_by_sigterm_while_loading_exits_0_and_by_ctrl_c_130(monkeypatch, capsys, signal_handlers):
    for sig, code, said in [(signal.SIGTERM, EXIT_OK, "stopped before it served"), (signal.SIGINT, EXIT_INTERRUPTED, "interrupted; ")]:
        monkeypatch.setattr(serve, "start_serve", lambda args, sig=sig: signal.raise_signal(sig))
        assert main(["serve", "--prm", "p"]) == code
        out, err = capsys.readouterr()
        assert out == "" and said in err and RESUME_NOTE not in err, err


@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_second_signal_stops_serve_at_once_with_a_request_in_flight(second, monkeypatch, capsys, signal_handlers):
    import os
    import threading

    server, sock, url = _bare_server()
    monkeypatch.setattr(serve, "start_serve", lambda args: (server, sock, url))

    def stop_twice():
        while not server.started:
            time.sleep(0.01)
        import socket

        client = socket.create_connection(sock.getsockname()[:2])  # a request that is never answered
        client.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        while not server.server_state.tasks:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)
        while not server.should_exit:
            time.sleep(0.01)
        time.sleep(0.3)  # uvicorn is now waiting for the request in flight (up to timeout_graceful_shutdown, 40 s)
        os.kill(os.getpid(), second)
        time.sleep(5)
        client.close()

    threading.Thread(target=stop_twice, daemon=True).start()
    started = time.monotonic()
    code = main(["serve", "--prm", "p", "--quiet"])
    took = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == EXIT_OK and "stopped at once (a second signal)" in err, err
    assert took < 20, f"a second {second.name} waited {took:.0f} s for the request in flight"


def test_serve_sigterm_as_soon_as_it_starts_ends_it(qwen_prm):  # noqa: F811
    """A SIGTERM before the URL (as soon as the process starts): the process ends, exit 0 with a stopped line once
    the CLI's handler is in place (Python's own exit by the signal before that), never a server left running."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "labeler.cli", "serve", "--prm", qwen_prm, "--port", "0", "--device", "cpu", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode in (EXIT_OK, -signal.SIGTERM), err
    assert proc.returncode != EXIT_OK or ("labeler serve: stopped" in err and "Traceback" not in err), err

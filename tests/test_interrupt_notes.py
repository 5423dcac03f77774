"""After Ctrl-C or SIGTERM each command says what a rerun does, truthfully: only the commands that keep their
progress say "rerun the same command to resume"; the others say they start over; `labeler serve`, whose normal
stop is SIGTERM, exits 0 with a "stopped" line (the outside read's finding 4)."""

import signal

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

"""Imported by the answer checker's forkserver as it starts (labeler/checking/pool.py: _FORKSERVER_PRELOAD), and
nowhere else: sympy is warmed up there once (symbolic.warm_up), so that each worker forked from it, a new pool's or
the replacement of a worker killed at its deadline, starts in milliseconds rather than a second of CPU."""

import signal

# Ctrl-C reaches the forkserver with the job's process group: during this warm-up (the first seconds
# of a job) it would print a traceback. Python's forkserver ignores SIGINT only after its preload, and
# its workers inherit the handler set here, which is what they want too (labeler/checking/pool.py).
signal.signal(signal.SIGINT, signal.SIG_IGN)

from labeler.checking.symbolic import warm_up  # noqa: E402

warm_up()

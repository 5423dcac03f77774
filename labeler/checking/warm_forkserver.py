"""Imported by the answer checker's forkserver as it starts (labeler/checking/pool.py: _FORKSERVER_PRELOAD), and
nowhere else: sympy is warmed up there once (symbolic.warm_up), so that each worker forked from it, a new pool's or
the replacement of a worker killed at its deadline, starts in milliseconds rather than a second of CPU."""

from labeler.checking.symbolic import warm_up

warm_up()

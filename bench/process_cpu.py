"""CPU seconds of the answer checker's processes, for the benches that count them (overhead.py, cpu_side.py).

The checker's workers are forked by multiprocessing's forkserver, which reaps them: a worker killed
at its deadline (or replaced) leaves its CPU-seconds in the forkserver's children times. So the
checker's CPU is the forkserver's own, its reaped children's and its live workers'. Counting this
process's children instead would drop killed workers (and subtract their CPU from the start's
reading) and would count an engine run in its own process (vLLM's default on GPUs) as checking.
"""

from __future__ import annotations


def checker_processes_cpu() -> float:
    """CPU seconds so far of the forkserver, of every worker it has reaped and of its live workers;
    0.0 before the forkserver runs. With the spawn start method (no forkserver on this platform) the
    workers are this process's children: their CPU is counted while they live."""
    import psutil
    from multiprocessing import forkserver

    pid = getattr(forkserver._forkserver, "_forkserver_pid", None)
    root = psutil.Process(pid) if pid else None
    processes = [root, *root.children(recursive=True)] if root else psutil.Process().children(recursive=True)
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.Error:  # gone since the listing: its CPU now sits in the forkserver's children times
            continue
        total += times.user + times.system + (times.children_user + times.children_system if process is root else 0.0)
    return total

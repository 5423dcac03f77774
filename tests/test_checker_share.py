"""The checker processes of a job's Ray workers on one machine stay within its budget, whatever
number of them Ray places there (workers/checker_share.py)."""

import itertools

import pytest

from workers.checker_share import CheckerShare


@pytest.mark.parametrize(
    ("share", "resources", "processes"),
    [
        (CheckerShare(None, workers=2, num_cpus=1, num_gpus=0), {"CPU": 2}, 1),  # the node's CPUs by default
        (CheckerShare(None, workers=3, num_cpus=1, num_gpus=0), {"CPU": 16}, 5),
        (CheckerShare(4, workers=3, num_cpus=1, num_gpus=0), {"CPU": 16}, 1),  # --checker-processes
        (CheckerShare(None, workers=8, num_cpus=1, num_gpus=1), {"CPU": 8, "GPU": 1}, 8),  # one GPU per node: one worker there
        (CheckerShare(None, workers=16, num_cpus=1, num_gpus=1), {"CPU": 64, "GPU": 8}, 8),  # eight GPUs: eight workers
        (CheckerShare(None, workers=3, num_cpus=1, num_gpus=0), {"CPU": 2}, 1),  # only two of the three fit
        (CheckerShare(1, workers=3, num_cpus=1, num_gpus=0), {"CPU": 16}, 1),  # never below one: a worker must check
        (CheckerShare(None, workers=1, num_cpus=1, num_gpus=0), {"GPU": 1}, 1),  # a node without CPUs in Ray
    ],
)
def test_each_worker_gets_the_budget_over_the_workers_that_fit(share, resources, processes):
    assert share.on(resources) == processes


def test_workers_on_a_node_never_exceed_its_budget():
    for budget, workers, gpus, cpus_on_node, gpus_on_node in itertools.product(
        (None, 1, 3, 8), (1, 2, 3, 5, 16), (0, 1, 2), (1, 2, 7, 32), (0, 1, 4, 8)
    ):
        share = CheckerShare(budget, workers, num_cpus=1, num_gpus=gpus)
        resources = {"CPU": cpus_on_node, "GPU": gpus_on_node}
        fit = min(workers, cpus_on_node, gpus_on_node // gpus if gpus else workers)  # what Ray can place there
        allowed = budget if budget is not None else cpus_on_node
        if 0 < fit <= allowed:
            assert fit * share.on(resources) <= allowed, (budget, workers, gpus, resources)

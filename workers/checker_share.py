"""How many answer-checker processes a Ray worker may start, so that all the job's workers on one
machine (Ray node) start at most its budget of them however many land there.

Each worker sizes its checker's pool once, when it starts, from its own node alone: the budget
(`--checker-processes`, else the node's CPUs) divided by the most workers of this job that Ray can
place on that node (its CPUs and GPUs over what each worker reserves, and no more than `--workers`).
Counting the workers that are actually there would need them all started before any is sized (a
worker that cannot be placed would hold the job up), and a pool sized before its neighbours
arrived, or one of a replacement worker, would overshoot: pools do not shrink. The bound needs no
coordination and holds whatever the placement; it gives smaller pools only when Ray spreads the
workers over more nodes than they need. Below one process per worker it cannot go: a worker
without a checker could not label.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckerShare:
    budget: int | None  # checker processes per node; None: the node's CPUs
    workers: int  # the job's workers (--workers)
    num_cpus: float  # what Ray reserves for each worker
    num_gpus: float

    def on(self, resources: dict[str, float]) -> int:
        """Processes for one worker on a node with these total Ray resources."""
        budget = self.budget if self.budget is not None else int(resources.get("CPU", 0))
        return max(1, budget // self.workers_that_fit(resources))

    def workers_that_fit(self, resources: dict[str, float]) -> int:
        fit = self.workers
        for name, need in (("CPU", self.num_cpus), ("GPU", self.num_gpus)):
            if need:
                fit = min(fit, int(resources.get(name, 0) // need))
        return max(1, fit)

    def here(self) -> int:
        """Processes for a worker on the node this process runs on (call it inside a Ray worker)."""
        import ray

        node_id = ray.get_runtime_context().get_node_id()
        return self.on({node["NodeID"]: node["Resources"] for node in ray.nodes()}[node_id])

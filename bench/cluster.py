"""What the cluster path costs on this machine, with the tiny model: start-up of a Ray head and a node,
of a submitted job and its workers; time per unit with workers on other nodes than the driver vs in
one process; and recovery after a node is lost (its raylet SIGKILLed, or the whole node frozen with
SIGSTOP, as a machine that stops answering).

    flock /tmp/prm-engine.lock .venv/bin/python bench/cluster.py            # about 7 minutes on 2 cores
    flock /tmp/prm-engine.lock .venv/bin/python bench/cluster.py --no-freeze  # without the frozen node (about 1.5 minutes less)

The cluster is the one tests/test_cluster.py starts (tests/ray_cluster.py: `ray start` on ports and a
temp dir of its own, token authentication on), but with a head of 0 CPUs, as in docker/rayjob.yaml:
it runs the driver only, so every worker sits on another node (its own raylet and object store).
Every run labels the same job (--rows solutions, 2 per unit, 4 rollouts of 16 tokens); times come
from the progress lines, stamped as they arrive. "per unit" is the time between the first and the
last commit over the units between them: the steady state, without the engine's start. On 2 cores
the two workers of a run share the CPUs: the figures show what the cluster adds, not how it scales.
"""

from __future__ import annotations

import argparse
import json
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.ray_cluster import RAY, LocalRayCluster  # noqa: E402
from tests.tiny_model import build_tiny_llama  # noqa: E402

READY = re.compile(r"worker ready on node (\w{8}) ")
COMMITTED = re.compile(r"\] units (\d+)/(\d+) ")
FAILED = re.compile(r"worker prm-labeler-worker-\d+ on node (\w{8}) failed")
LOST = re.compile(r"node (\w{8}) \(\S+\) lost \(")


def write_rows(path: Path, rows: int) -> Path:
    with path.open("w") as handle:
        for i in range(rows):
            handle.write(json.dumps({"id": f"r{i}", "problem": f"What is {i} + 5?", "answer": str(i + 5),
                                     "steps": [f"Start from {i}.", f"Add 5: {i + 5}.", f"The answer is: {i + 5}"]}) + "\n")  # fmt: skip
    return path


def label_command(dataset: Path, out: Path, model: Path) -> list[str]:
    return ["labeler", "label", "--input", str(dataset), "--output", str(out), "--model", str(model), "--rollouts", "4",
            "--max-new-tokens", "16", "--shard-size", "2", "--seed", "5", "--dtype", "float32", "--max-model-len", "1024"]  # fmt: skip


def timed_run(command: list[str], env: dict, log_stream: str, on_line=None, limit_s: float = 900) -> dict:
    """Run `command`, stamping each line of its log (`stderr`, or `stdout` for `ray job submit`, which
    streams the job's log there) with seconds since the start; `on_line(seconds, line)` sees each."""
    started = time.monotonic()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    lines: queue.Queue = queue.Queue()
    stream = process.stderr if log_stream == "stderr" else process.stdout
    other = process.stdout if log_stream == "stderr" else process.stderr
    threading.Thread(target=lambda: [lines.put((time.monotonic() - started, line)) for line in stream], daemon=True).start()
    drained = threading.Thread(target=other.read, daemon=True)
    drained.start()
    log = []
    while process.poll() is None or not lines.empty():
        if time.monotonic() - started > limit_s:
            process.kill()
            raise RuntimeError(f"{command[:3]} ran over {limit_s} s:\n" + "".join(line for _, line in log[-30:]))
        try:
            seconds, line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        log.append((seconds, line))
        if on_line:
            on_line(seconds, line)
    if process.returncode != 0:
        raise RuntimeError(f"{command[:3]} failed ({process.returncode}):\n" + "".join(line for _, line in log[-40:]))
    return {"wall_s": time.monotonic() - started, "log": log}


def figures(run: dict) -> dict:
    """Start-up and steady-state figures of one run, from its stamped log."""
    log = run["log"]
    commits = [seconds for seconds, line in log if COMMITTED.search(line)]
    ready = [seconds for seconds, line in log if READY.search(line)]
    found = {
        "wall_s": round(run["wall_s"], 1),
        "first_worker_ready_s": round(ready[0], 1) if ready else None,
        "all_workers_ready_s": round(ready[-1], 1) if ready else None,
        "first_commit_s": round(commits[0], 1),
        "units": len(commits),
        "per_unit_s": round((commits[-1] - commits[0]) / (len(commits) - 1), 3),
    }
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=40, help="solutions per job (2 per unit)")
    parser.add_argument("--no-freeze", dest="freeze", action="store_false", help="skip the frozen-node case (about 90 s)")
    args = parser.parse_args(argv)
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as folder:
        folder = Path(folder)
        model = build_tiny_llama(folder / "tiny")
        dataset = write_rows(folder / "in.jsonl", args.rows)
        cluster = LocalRayCluster()
        try:
            head = cluster.start_head(num_cpus=0)
            nodes = [cluster.add_node(num_cpus=1, name=name) for name in ("second", "third")]
            results["head_start_s"] = round(head.seconds_to_start, 1)
            results["node_start_s"] = round(max(node.seconds_to_start for node in nodes), 1)
            env = cluster.client_env()

            print("one process ...", file=sys.stderr)
            results["one_process"] = figures(timed_run(label_command(dataset, folder / "one", model), env, "stderr"))

            def same_as_one_process(out: Path) -> bool:
                compared = subprocess.run([sys.executable, str(ROOT / "bench/compare_outputs.py"), str(folder / "one"), str(out)], capture_output=True)
                return compared.returncode == 0

            print("ray job submit, 1 worker on another node ...", file=sys.stderr)
            submit = [RAY, "job", "submit", "--address", cluster.dashboard_url, "--"]
            results["submitted_1_worker"] = figures(timed_run([*submit, *label_command(dataset, folder / "w1", model), "--workers", "1"], env, "stdout"))
            results["submitted_1_worker"]["same_as_one_process"] = same_as_one_process(folder / "w1")

            auto = ["--workers", "2", "--ray-address", "auto"]
            print("2 workers on 2 nodes ...", file=sys.stderr)
            results["auto_2_workers"] = figures(timed_run([*label_command(dataset, folder / "w2", model), *auto], env, "stderr"))
            results["auto_2_workers"]["same_as_one_process"] = same_as_one_process(folder / "w2")

            losses = [("node_frozen", "third"), ("raylet_sigkill", "fourth")] if args.freeze else [("raylet_sigkill", "third")]
            for case, victim in losses:
                if victim == "fourth":  # in place of the node lost before
                    cluster.add_node(num_cpus=1, name=victim)
                print(f"2 workers, node {victim} lost ({case}) ...", file=sys.stderr)
                results[case] = node_loss(cluster, victim, case, [*label_command(dataset, folder / case, model), *auto], env)
                results[case]["extra_wall_s"] = round(results[case]["wall_s"] - results["auto_2_workers"]["wall_s"], 1)
                results[case]["same_as_one_process"] = same_as_one_process(folder / case)
        finally:
            left = cluster.stop()
            if left:
                print(f"processes left after stop: {left}", file=sys.stderr)
    print_table(results)
    same = {name: run["same_as_one_process"] for name, run in results.items() if isinstance(run, dict) and "same_as_one_process" in run}
    print("labels and rollouts equal to one process (bench/compare_outputs.py): " + ", ".join(f"{name} {'yes' if ok else 'NO'}" for name, ok in same.items()))
    print(json.dumps(results))
    return 0 if all(same.values()) else 1


def node_loss(cluster: LocalRayCluster, victim: str, case: str, command: list[str], env: dict) -> dict:
    """Run the job; once the victim's worker is ready, lose its node; stamp when the driver notices."""
    node_id = cluster.node(victim).short_id
    events: dict = {}

    def on_line(seconds: float, line: str) -> None:
        if "lost_at" not in events and (found := READY.search(line)) and found.group(1) == node_id:
            if case == "raylet_sigkill":
                cluster.kill_node(victim)
            else:  # every process of the node stops, its sockets stay open: it just no longer answers
                events["frozen"] = cluster.freeze_node(victim)
            events["lost_at"] = seconds
        elif (found := FAILED.search(line)) and found.group(1) == node_id:
            events.setdefault("worker_failed_at", seconds)
        elif (found := LOST.search(line)) and found.group(1) == node_id:
            events.setdefault("node_lost_at", seconds)

    try:
        run = timed_run(command, env, "stderr", on_line)
    finally:
        for process in events.get("frozen", []):  # a frozen node, thawed so that it can be stopped
            try:
                process.send_signal(signal.SIGCONT)
            except psutil.Error:
                pass
    found = figures(run)
    lost_at = events.get("lost_at")
    for name in ("worker_failed_at", "node_lost_at"):
        at = events.get(name)
        found[name.replace("_at", "_after_s")] = round(at - lost_at, 1) if at is not None and lost_at is not None else None
    return found


def print_table(results: dict) -> None:
    print(f"ray start --head: {results['head_start_s']} s; ray start --address (a second node): {results['node_start_s']} s")
    print(f"{'run':<22} {'wall s':>7} {'1st ready s':>11} {'1st commit s':>12} {'per unit s':>10} {'units':>5}  node loss: failure noticed / node lost, s after; extra wall s")
    for name in ("one_process", "submitted_1_worker", "auto_2_workers", "node_frozen", "raylet_sigkill"):
        if name not in results:
            continue
        run = results[name]
        loss = f"  {run.get('worker_failed_after_s')} / {run.get('node_lost_after_s')}; {run.get('extra_wall_s')}" if "extra_wall_s" in run else ""
        ready = run["first_worker_ready_s"] if run["first_worker_ready_s"] is not None else "-"
        print(f"{name:<22} {run['wall_s']:>7} {ready:>11} {run['first_commit_s']:>12} {run['per_unit_s']:>10} {run['units']:>5}{loss}")


if __name__ == "__main__":
    sys.exit(main())

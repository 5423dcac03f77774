"""A Ray cluster on this machine, started with the `ray` CLI as an operator starts one: a head
(`ray start --head`) and more nodes (`ray start --address HEAD`), each with its own raylet and
resources, on ports of their own, under a temp dir of their own, with token authentication on.

Several such clusters (other engineers', other test runs) and plain `ray.init()` instances can run
on one machine at once: nothing here uses Ray's default ports or /tmp/ray. `ray stop` would stop
every Ray on the machine, so `stop()` kills exactly this cluster's processes instead: each node is
started with an environment variable naming the cluster and the node, which every process Ray starts
under it inherits (raylet, GCS, dashboard, workers, vLLM engines, checker pools); Ray's agents then
overwrite their environment with a long process title, so a process holding a file open under the
cluster's temp dir (its logs are there) is the cluster's too.

Used by tests/test_cluster.py and bench/cluster.py.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import psutil

CLUSTER_MARK = "PRM_LABELER_TEST_CLUSTER"  # the cluster's id, in the environment of each of its processes
NODE_MARK = "PRM_LABELER_TEST_NODE"  # the node's name
VENV_BIN = Path(sys.executable).parent
RAY = str(VENV_BIN / "ray")
REPO_ROOT = Path(__file__).resolve().parents[1]
# Each node's object store: the results of units are small; Ray's default is 30% of the machine's memory per node.
OBJECT_STORE_BYTES = 200 * 1024 * 1024
START_TIMEOUT_S = 180


def free_ports(count: int) -> list[int]:
    """Ports no process listens on now (held open together, so they differ)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


@dataclass
class Node:
    name: str
    num_cpus: int
    started: float  # time.monotonic() when `ray start` was run
    head: bool = False
    node_id: str | None = None  # Ray's id, read from its raylet's command line
    seconds_to_start: float = 0.0  # until `ray start` returned and the raylet was there (and, on the head, the dashboard answered)

    @property
    def short_id(self) -> str:
        return (self.node_id or "")[:8]


@dataclass
class LocalRayCluster:
    """Start with `start_head()`, add nodes with `add_node()`, always `stop()` (a fixture's finalizer)."""

    auth_token: str | None = field(default_factory=lambda: secrets.token_hex(32))  # None: RAY_AUTH_MODE=disabled
    cluster_id: str = field(default_factory=lambda: secrets.token_hex(4))
    nodes: list[Node] = field(default_factory=list)

    def __post_init__(self):
        # Short: Ray's unix sockets live below it, and their paths may not exceed 107 bytes.
        self.root = Path(tempfile.mkdtemp(prefix=f"prmray-{self.cluster_id}-", dir="/tmp"))
        self.temp_dir = self.root / "ray"  # also RAY_TMPDIR/ray for clients: `--ray-address auto` finds this head there
        self.gcs_port, self.dashboard_port, self.client_port = free_ports(3)
        self._reaper: subprocess.Popen | None = None
        self._start_reaper()

    # --- addresses and environments

    @property
    def gcs_address(self) -> str:
        return f"127.0.0.1:{self.gcs_port}"

    @property
    def dashboard_url(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    def auth_env(self) -> dict[str, str]:
        """What every process that talks to the cluster needs: nodes, drivers, `ray job submit`."""
        if self.auth_token is None:
            return {"RAY_AUTH_MODE": "disabled"}
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self.auth_token}

    def client_env(self, **extra: str) -> dict[str, str]:
        """The environment of a client on this machine (a driver, `ray job submit`): the token, this
        checkout's code first, and RAY_TMPDIR so that `auto` means this cluster's head."""
        env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
        env.update(self.auth_env())
        env["RAY_TMPDIR"] = str(self.root)
        env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"  # `labeler` and `ray` as installed
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        env.update(extra)
        return env

    def _node_env(self, name: str) -> dict[str, str]:
        # Whatever the job's entrypoint and the workers run inherits this: the README's `labeler` on PATH.
        return self.client_env(**{CLUSTER_MARK: self.cluster_id, NODE_MARK: name})

    # --- nodes

    def start_head(self, num_cpus: int, name: str = "head") -> Node:
        node = self._start(name, num_cpus, ["--head", "--port", str(self.gcs_port), "--dashboard-port", str(self.dashboard_port),
                                            "--ray-client-server-port", str(self.client_port), "--include-dashboard", "true"])  # fmt: skip
        self._wait_for_dashboard()
        node.seconds_to_start = time.monotonic() - node.started
        return node

    def _wait_for_dashboard(self) -> None:
        """`ray job submit` talks to the dashboard's job server, which may come up after `ray start`
        returns, or never: without ray[default] its modules do not load."""
        request = urllib.request.Request(f"{self.dashboard_url}/api/version")
        if self.auth_token:
            request.add_header("Authorization", f"Bearer {self.auth_token}")
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(request, timeout=5) as response:
                    if response.status == 200:
                        return
            except OSError as error:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the dashboard at {self.dashboard_url} does not answer ({error}): is ray[default] installed "
                        f"(pip install '.[cluster]')? Its log: {self.temp_dir}/session_latest/logs/dashboard.log"
                    ) from error
            time.sleep(0.5)

    def add_node(self, num_cpus: int, name: str) -> Node:
        assert self.nodes and self.nodes[0].head, "start the head first"
        return self._start(name, num_cpus, ["--address", self.gcs_address])

    def _start(self, name: str, num_cpus: int, role: list[str]) -> Node:
        node_manager, object_manager, agent_http, agent_grpc, runtime_env, metrics = free_ports(6)
        command = [RAY, "start", *role, "--node-ip-address", "127.0.0.1", "--num-cpus", str(num_cpus), "--num-gpus", "0",
                   "--temp-dir", str(self.temp_dir), "--object-store-memory", str(OBJECT_STORE_BYTES),
                   "--node-manager-port", str(node_manager), "--object-manager-port", str(object_manager),
                   "--dashboard-agent-listen-port", str(agent_http), "--dashboard-agent-grpc-port", str(agent_grpc),
                   "--runtime-env-agent-port", str(runtime_env), "--metrics-export-port", str(metrics),
                   "--min-worker-port", "0", "--max-worker-port", "0",  # any free port, as ray.init() does
                   "--disable-usage-stats", "--log-style", "record"]  # fmt: skip
        started = time.monotonic()
        # The working directory is the entrypoint's and the workers': this checkout, as on a head that has it installed.
        result = subprocess.run(command, env=self._node_env(name), cwd=REPO_ROOT, capture_output=True, text=True, timeout=START_TIMEOUT_S)
        if result.returncode != 0:
            raise RuntimeError(f"`ray start` of node {name} failed ({result.returncode}):\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}")
        node = Node(name, num_cpus, started, head=not self.nodes)
        self.nodes.append(node)
        self._wait_until_registered(node)
        node.seconds_to_start = time.monotonic() - started
        return node

    def _wait_until_registered(self, node: Node) -> None:
        """Learn the node's Ray id from its raylet's command line (and wait for that raylet)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            for process in self.processes(node.name):
                try:
                    if process.name() == "raylet":
                        node.node_id = next(arg.split("=", 1)[1] for arg in process.cmdline() if arg.startswith("--node_id="))
                        return
                except (psutil.Error, StopIteration):
                    continue
            time.sleep(0.2)
        raise RuntimeError(f"node {node.name}: no raylet after {START_TIMEOUT_S} s")

    def node(self, name: str) -> Node:
        return next(node for node in self.nodes if node.name == name)

    def raylet(self, name: str) -> psutil.Process:
        return next(process for process in self.processes(name) if process.name() == "raylet")

    def kill_node(self, name: str) -> None:
        """SIGKILL the node's raylet. Its workers notice within seconds and exit (closing their connections),
        after finishing what they are doing."""
        self.raylet(name).send_signal(signal.SIGKILL)

    def node_processes(self, name: str) -> list[psutil.Process]:
        """Every live process of the node: its raylet, what the raylet started (agents, workers, and what
        those started: engines, checker pools), and what carries the node's mark. (The mark alone misses
        the processes whose title overwrote their environment: Ray's workers and agents.)"""
        raylet = self.raylet(name)
        found = {process.pid: process for process in [raylet, *raylet.children(recursive=True), *self.processes(name)]}
        return list(found.values())

    def freeze_node(self, name: str) -> list[psutil.Process]:
        """Every process of the node stops (SIGSTOP: no connection is closed, nothing answers); returns them."""
        frozen = self.node_processes(name)
        for process in frozen:
            try:
                process.send_signal(signal.SIGSTOP)
            except psutil.Error:
                pass
        return frozen

    def lose_node(self, name: str) -> None:
        """The node goes as a machine does: every process of it stops at once, then its raylet is
        SIGKILLed. Only Ray's health checks can tell. (stop() thaws the rest.)"""
        raylet = self.raylet(name)
        self.freeze_node(name)
        raylet.send_signal(signal.SIGKILL)

    # --- processes and stopping

    def processes(self, node: str | None = None) -> list[psutil.Process]:
        """The live processes of this cluster (of one node: those found by the mark in their environment)."""
        return marked_processes(self.cluster_id, node, root=str(self.root))

    def stop(self, grace_s: float = 10.0) -> list[str]:
        """Stop every process of the cluster (SIGTERM, then SIGKILL after `grace_s`), remove its temp dir;
        the processes that outlived both (should be none), described."""
        left = stop_marked(self.cluster_id, str(self.root), grace_s)
        shutil.rmtree(self.root, ignore_errors=True)
        if self._reaper is not None:
            self._reaper.terminate()
            self._reaper.wait()
        return left

    def _start_reaper(self) -> None:
        """A watchdog that stops the cluster if this process dies without stopping it (a test run
        killed by its timeout, say): it outlives us in a session of its own and carries no mark."""
        env = {key: value for key, value in os.environ.items() if key not in (CLUSTER_MARK, NODE_MARK)}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        self._reaper = subprocess.Popen([sys.executable, "-m", "tests.ray_cluster", str(os.getpid()), self.cluster_id, str(self.root)],
                                        env=env, cwd=REPO_ROOT, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


def marked_processes(cluster_id: str, node: str | None = None, root: str | None = None) -> list[psutil.Process]:
    """The live processes whose environment carries the cluster's mark (of one node: its name too). With
    `root` (the cluster's temp dir), also those holding a file open under it: Ray's agents set a process
    title long enough to overwrite their environment, so only their open log files still tell."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.pid == os.getpid() or process.status() == psutil.STATUS_ZOMBIE:
                continue
            env = process.environ()
            if env.get(CLUSTER_MARK) == cluster_id and (node is None or env.get(NODE_MARK) == node):
                found.append(process)
            elif node is None and root is not None and _holds_a_file_under(process.pid, root):
                found.append(process)
        except (psutil.Error, OSError):  # other users' processes, or gone meanwhile
            continue
    return found


def _holds_a_file_under(pid: int, root: str) -> bool:
    folder = f"/proc/{pid}/fd"
    for fd in os.listdir(folder):
        try:
            if os.readlink(f"{folder}/{fd}").startswith(root + "/"):
                return True
        except OSError:
            continue
    return False


def stop_marked(cluster_id: str, root: str, grace_s: float) -> list[str]:
    processes = marked_processes(cluster_id, root=root)
    for process in processes:
        try:
            process.send_signal(signal.SIGCONT)  # a stopped process (lose_node) would not act on SIGTERM
            process.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(processes, timeout=grace_s)
    for process in alive:
        try:
            process.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=5)
    time.sleep(0.5)  # a process forked during the sweep
    left = []
    for process in marked_processes(cluster_id, root=root):
        try:
            left.append(f"pid {process.pid} {process.name()}")
            process.kill()
        except psutil.Error:
            pass
    return left


if __name__ == "__main__":  # the reaper: python -m tests.ray_cluster OWNER_PID CLUSTER_ID ROOT
    owner, cluster_id, root = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    try:
        psutil.Process(owner).wait()
    except psutil.NoSuchProcess:
        pass
    stop_marked(cluster_id, root, grace_s=5.0)
    shutil.rmtree(root, ignore_errors=True)

"""Shared test set-up.

ROS tests — every test of a file that uses rclpy, the nodes, the messages, the harness that drives
them, the launch files or colcon (:data:`ROS_USE`) — carry the ``ros`` marker: ``make test`` runs the
whole suite on Kilted and ``-m ros`` on Jazzy, since the two environments differ only in ROS.

ROS tests talk over real DDS: each pytest session takes its own random ROS_DOMAIN_ID and stays on
localhost, so parallel runs on one machine never hear each other; under pytest-xdist (`-n N`) worker
k takes the session's domain + k, so the workers never hear each other either. Math libraries run
single-threaded so timings and results do not depend on the machine's load.
"""

import functools
import os
import random
import re
import signal
import subprocess
from pathlib import Path

import pytest

# domains base … base + 31 stay at or below 101, the last one Fast DDS's default ports allow
XDIST_WORKERS_MAX = 32


def _domain_id() -> str:
    """This process's ROS_DOMAIN_ID: the one given, else a random one; a pytest-xdist worker (its
    environment inherited from the controller, which chose the session's) adds its index."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    given = os.environ.get("ROS_DOMAIN_ID")
    if given is None:
        given = str(random.SystemRandom().randint(1, 101 - XDIST_WORKERS_MAX))
    if not worker.startswith("gw"):
        return given
    index = int(worker[2:])
    if index >= XDIST_WORKERS_MAX:
        raise RuntimeError(f"at most {XDIST_WORKERS_MAX} pytest-xdist workers (one ROS domain each)")
    return str((int(given) + index) % 102)


os.environ["ROS_DOMAIN_ID"] = _domain_id()
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")


def _importable(name: str) -> bool:
    try:
        __import__(name)
        return True
    except Exception:  # noqa: BLE001 - any import failure means "not available here"
        return False


HAVE_TORCH = _importable("torch")
HAVE_RCLPY = _importable("rclpy")

if HAVE_TORCH:
    import torch

    torch.set_num_threads(1)


requires_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed (pip install '.[train]')")
requires_rclpy = pytest.mark.skipif(
    not HAVE_RCLPY, reason="rclpy is not importable (pip install '.[ros]' or source ROS 2)"
)


@pytest.fixture(scope="module")
def ctx():
    """An rclpy context of the test module's own (initialised, shut down after the module)."""
    import rclpy

    context = rclpy.Context()
    rclpy.init(args=[], context=context)
    yield context
    rclpy.try_shutdown(context=context)


def stop_process(proc, sig=signal.SIGINT, timeout: float = 10.0) -> str:
    """Send ``sig`` to a node process a test started, wait ``timeout`` s (then kill it); its output."""
    proc.send_signal(sig)
    try:
        out = proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        out = proc.communicate()[0]
    return out if isinstance(out, str) else out.decode(errors="replace")


def sigint_as_in_a_terminal() -> None:
    """``preexec_fn`` of a process a test stops with SIGINT: a runner that started the suite in the
    background (``make test &``, some CI agents) passes SIGINT down as ignored, and Python then installs
    no KeyboardInterrupt handler; a terminal's Ctrl-C is what these tests stand for."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


#: what makes a test file a ROS test (matched against its source)
ROS_USE = re.compile(
    r"rclpy|HAVE_RCLPY|ros_lnn\.nodes|ros_lnn_msgs|_ros_harness|ros_lnn\.harness|ros_lnn\.demos|\bctx\b"
    r"|launch_ros|_launch_stand_in|colcon"
)


@functools.cache
def uses_ros(path: Path) -> bool:
    return bool(ROS_USE.search(path.read_text(encoding="utf-8", errors="replace")))


def pytest_collection_modifyitems(config, items):
    for item in items:
        if uses_ros(Path(item.path)):
            item.add_marker(pytest.mark.ros)

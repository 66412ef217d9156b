"""The respawning supervisor of the restart test and the soak (ros_lnn_lab.harness.supervisor), with real
processes: a process that exits is started again after ``respawn_delay``; ``stop`` ends it for good; and
a supervisor that is itself killed (SIGKILL: no ``stop``) takes its processes with it — an interrupted
test run once left dozens of simulated arms running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from ros_lnn_lab.harness.supervisor import Supervised

SLEEPER = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(120)"]


def _gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # a child of this process stays a zombie until it is reaped
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            pass
        time.sleep(0.05)
    return False


def test_a_killed_process_is_started_again_and_stop_ends_it():
    sup = Supervised(SLEEPER, respawn_delay=0.2, name="sleeper").start()
    try:
        first = sup.pid
        sup.kill()
        deadline = time.monotonic() + 30
        while sup.starts() < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sup.starts() == 2 and sup.pid != first and sup.exits == [-signal.SIGKILL]
    finally:
        sup.stop()
    assert not sup.alive()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_supervisor_killed_without_stop_leaves_no_process_behind():
    script = (
        "import sys, time\n"
        "from ros_lnn_lab.harness.supervisor import Supervised\n"
        f"sup = Supervised({SLEEPER!r}, respawn_delay=0.2).start()\n"
        "print(sup.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        os.kill(child, 0)  # running
        parent.kill()
        parent.wait()
        assert _gone(child, 10.0)
    finally:
        if parent.poll() is None:
            parent.kill()

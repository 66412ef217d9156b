"""A node process kept alive as launch's ``respawn`` keeps it: started with its command line and its
parameters file (as launch_ros passes parameters: ``--params-file``), started again ``respawn_delay``
seconds after it exits, whatever the reason (SIGKILL, a crash), until it is stopped. Lifecycle nodes
bring themselves up through their ``autostart`` parameter, so a respawned one comes back active with
the parameters it started with. Used by the restart tests and ``ros-lnn bench soak``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path


def node_command(
    module: str, name: str, namespace: str, params_file, remaps: dict | None = None
) -> list[str]:
    """The command line launch_ros gives a node: its executable (here ``python -m``), its name and
    namespace, its remappings and its parameters file."""
    args = [sys.executable, "-m", module, "--ros-args", "-r", f"__node:={name}", "-r", f"__ns:={namespace}"]
    for old, new in (remaps or {}).items():
        args += ["-r", f"{old}:={new}"]
    return args + ["--params-file", str(params_file)]


def write_params(path, name: str, values: dict) -> Path:
    """A parameters file for node ``name`` (any namespace), as launch_ros writes one for a node's dict."""
    import yaml

    path = Path(path)
    path.write_text(yaml.safe_dump({f"/**/{name}": {"ros__parameters": values}}, sort_keys=False))
    return path


def _die_with_parent() -> None:
    """In the child, before its command runs: SIGTERM when the thread that started it ends (Linux's
    PR_SET_PDEATHSIG) — a supervisor killed without :meth:`Supervised.stop` (SIGKILL, a crash, a test run
    interrupted) leaves no node running behind it, loading the machine and talking on its domain. The
    first start is from the caller's thread, each respawn from the supervisor's watcher thread: both live
    as long as the supervision."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Supervised:
    """One node process under respawn. ``events``: ``(time.monotonic(), what, pid)`` for every start,
    exit and kill; ``log``: its output lines (all runs)."""

    def __init__(
        self, command: list[str], env: dict | None = None, respawn_delay: float = 1.0, name: str = ""
    ):
        self.command, self.env, self.respawn_delay = list(command), dict(env or os.environ), respawn_delay
        self.name = name or (command[2] if len(command) > 2 else "node")
        self.events: list[tuple[float, str, int]] = []
        self.log: list[str] = []
        self.exits: list[int] = []
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self._watcher: threading.Thread | None = None

    def start(self) -> Supervised:
        self._spawn()
        self._watcher = threading.Thread(target=self._watch, daemon=True, name=f"supervise {self.name}")
        self._watcher.start()
        return self

    def _spawn(self) -> None:
        proc = subprocess.Popen(
            self.command,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
        threading.Thread(target=self._drain, args=(proc,), daemon=True).start()
        with self._lock:
            self.proc = proc
            self.events.append((time.monotonic(), "started", proc.pid))

    def _drain(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None  # opened with stdout=PIPE
        for line in proc.stdout:
            self.log.append(line.rstrip("\n"))

    def _watch(self) -> None:
        while not self._stopping.is_set():
            proc = self.proc
            assert proc is not None  # started before the watcher
            code = proc.wait()
            with self._lock:
                self.events.append((time.monotonic(), "exited", proc.pid))
                self.exits.append(code)
            if self._stopping.wait(self.respawn_delay):
                return
            self._spawn()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> float:
        """Send ``sig`` to the running process; the time it was sent (``time.monotonic()``)."""
        assert self.proc is not None
        with self._lock:
            now = time.monotonic()
            self.events.append((now, f"signal {signal.Signals(sig).name}", self.proc.pid))
        self.proc.send_signal(sig)
        return now

    def starts(self) -> int:
        return sum(1 for _, what, _ in self.events if what == "started")

    def stop(self, timeout: float = 15.0) -> None:
        """No more respawns; the running process ends by SIGINT (SIGKILL after ``timeout``)."""
        self._stopping.set()
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._watcher is not None:
            self._watcher.join(timeout=timeout)

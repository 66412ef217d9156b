"""Soak: the nodes of a robot running for a long time, each in its own process, while faults drawn
from the fault harness come at random intervals (``ros-lnn bench soak``).

Two loops run live. The crane: ``sim`` publishes joint states at ``rate_hz`` and ``servo_lnn``
estimates from them. The arm: ``dac_chain_sim`` ← ``effort_watchdog`` ← ``dac_controller`` (as
dac_ros2_control.launch.py wires them, the simulator standing in for ros2_control), and
``effort_observer`` watching the arm's joint states. The fault cases of servo_lnn, sim, dac_controller
and effort_observer (:mod:`.fault_registry`) run against these live nodes through a :class:`LiveDriver`:
a case that stops a node's input stops the simulator that feeds it (SIGSTOP, then SIGCONT), as a
crashed driver or a paused simulator would. Left out: the watchdog's own cases (they inject into the
controller's output, which the soak watches) and the cases that restart a node with other parameters
(``/clock`` stops: a restart would reset the memory being watched), and the two joint-limit
violations whose check needs an isolated controller (:data:`ISOLATED`). The simulators' joint states are
not checked for non-finite numbers by the driver (the cases inject into those topics); the nodes that
take them count what they refuse.

Measured: every node process's resident memory (``/proc/<pid>/status``), the per-sample nodes'
processing latency (servo_lnn, dac_controller, effort_observer: the p99 of their last 2 s in their
/diagnostics, every ``diagnostics_period_s``), the verdict of every case (crashed, hung, missed stop,
non-finite output), and between cases whether each process lives and answers. Every case runs once
before the timed run (a warm-up: what a node allocates once, a flood's high-water mark in its DDS
queues, is then in the start figure). Figures: memory growth from the end of the first window (a fifth
of the run, at most 5 min) to the end; the latency p99 over the first and the last window (the 99th
percentile of the windowed p99s of the three nodes, pooled)."""

from __future__ import annotations

import math
import os
import signal
import time
from dataclasses import dataclass, field

import numpy as np

from ros_lnn_lab.harness import fault_registry, faults
from ros_lnn_lab.harness.faults import Driver, Target
from ros_lnn_lab.harness.flood import rss_bytes

#: The per-sample nodes whose processing latency is watched.
LATENCY_NODES = ("servo_lnn", "dac_controller", "effort_observer")
#: The longest measurement window at the start and at the end [s].
WINDOW_S = 300.0


def window_s(duration_s: float) -> float:
    """The start and end windows: 5 min, or a fifth of a run shorter than 25 min."""
    return min(WINDOW_S, duration_s / 5.0)


def live_targets(rate_hz: float) -> dict[str, Target]:
    """The six live nodes as fault-harness targets (namespace: :data:`NAMESPACES`), each fed by its
    simulator, none by the driver."""
    servo = faults.servo_lnn_target()
    sim = faults.sim_target()
    sim.params = dict(sim.params, rate_hz=rate_hz)
    controller = faults.dac_controller_target()
    observer = fault_registry.TARGETS["effort_observer"]()
    # dac_chain_sim's efforts are the ones held over the step that ended at each stamp
    observer.params = dict(observer.params, effort_timing="held_until_stamp")
    arm = Target(
        "dac_chain_sim",
        "ros_lnn.nodes.dac_chain_sim",
        {
            "rate_hz": rate_hz,
            "initial_positions": list(faults.ARM_POSE),
            "hold_until_command": True,
            # drives as real ones are (reflected rotor inertia, viscous friction): the bare demo arm's
            # wrist turns 6 000 rad/s² on its 6 N m, and one sample of efforts meant for an injected
            # joint state would spin it up to hundreds of rad/s
            "rotor_inertia": [0.05],
            "friction_viscous": [0.2],
        },
        False,
        inputs={},
        outputs={"joint_states": "sensor_msgs/JointState"},
        heartbeat="joint_states",
        remaps={"effort_commands": "commands_out"},
    )
    watchdog = Target(
        "effort_watchdog",
        "ros_lnn.nodes.effort_watchdog",
        {"joints": list(faults.ARM_JOINTS), "timeout_s": 0.1, "diagnostics_period_s": 0.1},
        False,
        inputs={},
        outputs={"commands_out": "std_msgs/Float64MultiArray"},
        heartbeat="commands_out",
        remaps={"commands_in": "dac_controller/joint_effort_command"},
    )
    # started in this order: the arm's simulator holds it until the first effort command that is not
    # all zeros (the watchdog's zeros before the controller runs keep it held)
    targets = {t.name: t for t in (sim, servo, arm, controller, watchdog, observer)}
    for target in targets.values():
        target.normal = None  # the simulators feed them
    return targets


#: Which live node's stream a target's normal input is (paused by SIGSTOP when a case pauses it).
FEEDERS = {"servo_lnn": "sim", "dac_controller": "dac_chain_sim", "effort_observer": "dac_chain_sim"}
#: The namespace of each live node: the crane's two, the arm's four.
NAMESPACES = {
    "sim": "crane",
    "servo_lnn": "crane",
    "dac_chain_sim": "arm",
    "effort_watchdog": "arm",
    "dac_controller": "arm",
    "effort_observer": "arm",
}


class _Feeds(dict):
    """``stream_on`` of a :class:`LiveDriver`: turning a target's stream off stops the simulator that
    feeds it (SIGSTOP), on again continues it (SIGCONT) once no target it feeds is paused."""

    def __init__(self, driver: LiveDriver):
        super().__init__()
        self.driver = driver

    def __setitem__(self, name, on) -> None:
        super().__setitem__(name, on)
        feeder = FEEDERS.get(name)
        if feeder is None or feeder not in self.driver.procs:
            return
        paused = any(not self.get(t, True) for t, f in FEEDERS.items() if f == feeder)
        proc = self.driver.procs[feeder].proc
        if proc.poll() is None:
            proc.send_signal(signal.SIGSTOP if paused else signal.SIGCONT)


class LiveDriver(Driver):
    """The fault harness's driver on the live nodes: every one started (and kept) at once, each in
    its loop's namespace, the normal streams those of the simulators (:class:`_Feeds`); /diagnostics
    latencies kept as a series."""

    def __init__(self, targets: list[Target], env: dict | None = None, run_id: str | None = None):
        self.latencies: list[tuple[float, str, float]] = []  # (monotonic time, node, p99 [s])
        self.injected: set[str] = set()  # topics that are one node's output and another's input
        super().__init__(targets, env=env, run_id=run_id, one_at_a_time=True)
        self.injected = {f"{self.namespace(t.name)}/{topic}" for t in targets for topic in t.inputs}
        self.one_at_a_time = False
        feeds = _Feeds(self)
        feeds.update(self.stream_on)
        self.stream_on = feeds
        for name in self.targets:
            self.start(name)

    def namespace(self, target: str) -> str:
        return f"/{self.run_id}_{NAMESPACES[target]}"

    def focus(self, name: str) -> None:
        if name not in self.procs:
            self.start(name)

    def _on_output(self, topic: str, msg) -> None:
        """As the driver's, except on a topic the cases inject into (a simulator's joint states, which
        the estimator, the controller and the observer take): the driver's own NaN would count there as
        the simulator's; those nodes' inputs are judged by their counts instead."""
        if topic not in self.injected:
            return super()._on_output(topic, msg)
        with self.lock:
            self.latest[topic] = (time.monotonic(), [])
            self.received[topic] += 1

    def close(self) -> None:
        for proc in self.procs.values():  # a feeder a failed case left stopped must hear the SIGINT
            if proc.alive():
                proc.proc.send_signal(signal.SIGCONT)
        super().close()

    def _on_diagnostics(self, msg) -> None:
        super()._on_diagnostics(msg)
        now = time.monotonic()
        for status in msg.status:
            node = status.name.rsplit("/", 1)[-1]
            if node not in LATENCY_NODES:
                continue
            value = next((kv.value for kv in status.values if kv.key == "latency_p99_us"), "")
            try:
                p99 = float(value) * 1e-6
            except ValueError:
                continue  # "n/a": no sample in the window
            if math.isfinite(p99):
                with self.lock:
                    self.latencies.append((now, node, p99))


#: Cases whose check needs the node's input to be the case's alone: a joint-limit violation must be the
#: first one the controller latches, and on a live arm a real one may come first (the efforts computed
#: for an injected state reach the arm). ``ros-lnn bench fault`` runs them on an isolated controller.
ISOLATED = ("joint_states beyond a position limit", "joint_states at 1.5x a velocity limit")


def soak_cases() -> list:
    """The fault cases the soak draws from (module docstring: the watchdog's, the restarting ones and
    :data:`ISOLATED` left out)."""
    wanted = ("servo_lnn", "sim", "dac_controller", "effort_observer")
    return [
        c
        for name in wanted
        for c in fault_registry.CASES[name]()
        if "/clock" not in c.name and c.name not in ISOLATED
    ]


@dataclass
class SoakResult:
    duration_s: float
    window_s: float
    verdicts: list = field(default_factory=list)
    rss: list = field(default_factory=list)  # (monotonic time, total bytes, {node: bytes})
    latencies: list = field(default_factory=list)  # (monotonic time, node, p99 s)
    died: list = field(default_factory=list)  # (time, node): a process found dead between cases
    unanswered: list = field(default_factory=list)  # (time, node): services silent between cases
    start: float = 0.0

    def crashed(self) -> int:
        return sum(v.crashed for v in self.verdicts) + len(self.died)

    def hung(self) -> int:
        return sum(v.hung for v in self.verdicts) + len(self.unanswered)

    def missed_stops(self) -> int:
        return sum(v.missed_stop for v in self.verdicts)

    def rss_growth_percent(self) -> float:
        """Total resident memory at the end against the end of the first window, in percent."""
        t0 = self.start + self.window_s
        before = [total for t, total, _ in self.rss if t <= t0]
        if not before or not self.rss:
            return math.nan
        base = before[-1]
        return 100.0 * (self.rss[-1][1] - base) / base

    def rss_by_node(self) -> dict:
        """Each process's resident memory [bytes] at the end of the first window and at the end."""
        t0 = self.start + self.window_s
        before = [per for t, _, per in self.rss if t <= t0]
        if not before:
            return {}
        base, last = before[-1], self.rss[-1][2]
        return {name: (base[name], last.get(name, 0)) for name in base}

    def latency_p99_ms(self) -> tuple[float, float]:
        """The 99th percentile of the windowed p99s over the first and the last window [ms]."""
        first = [v for t, _, v in self.latencies if t <= self.start + self.window_s]
        end = self.start + self.duration_s
        last = [v for t, _, v in self.latencies if t >= end - self.window_s]
        pick = lambda xs: float(np.percentile(xs, 99)) * 1e3 if xs else math.nan  # noqa: E731
        return pick(first), pick(last)

    def line(self) -> str:
        a, b = self.latency_p99_ms()
        label = "5 min" if self.window_s >= WINDOW_S else f"fifth ({self.window_s:.0f} s)"
        return (
            f"soak: {self.duration_s:.0f} s, {len(self.verdicts)} faults injected, {self.crashed()} "
            f"crashed, {self.hung()} hung, {self.missed_stops()} missed stops, RSS growth "
            f"{self.rss_growth_percent():.2f} %, latency p99 first/last {label} {a:.2f}/{b:.2f} ms"
        )


def run_soak(
    duration_s: float,
    rate_hz: float = 200.0,
    mean_gap_s: float = 5.0,
    seed: int = 0,
    env: dict | None = None,
    report=print,
    sample_s: float = 5.0,
    warm_up: bool = True,
) -> SoakResult:
    """The soak (module docstring); ``mean_gap_s``: mean time between two faults (exponential),
    ``sample_s``: how often memory is read and every node's services are asked; ``warm_up``: every
    case once before the timed run (their verdicts count), so that what a node allocates once — the
    high-water mark of a flood in its DDS queues, a model's session — is in the start figure and the
    growth measured is what repeating them adds."""
    rng = np.random.default_rng(seed)
    cases = soak_cases()
    env = dict(os.environ if env is None else env)  # the nodes on their default executor (intake) unless set
    driver = LiveDriver(list(live_targets(rate_hz).values()), env=env)
    result = SoakResult(duration_s, window_s(duration_s))
    try:
        if warm_up:
            for case in cases:
                verdict = driver.run(case)
                result.verdicts.append(verdict)
                if not verdict.passed:
                    report(f"  {verdict.target}: {case.name}: {verdict.detail.strip()[:300]}")
            report(f"  warm-up: every case once ({len(cases)}); the timed run starts")
        result.start = start = time.monotonic()
        end = start + duration_s
        next_fault = start + rng.exponential(mean_gap_s)
        next_sample, next_report = start, start + 60.0
        while time.monotonic() < end:
            now = time.monotonic()
            if now >= next_sample:
                _sample(driver, result, now)
                next_sample = now + sample_s
            if now >= next_fault:
                case = cases[int(rng.integers(len(cases)))]
                verdict = driver.run(case)
                result.verdicts.append(verdict)
                if not verdict.passed:
                    report(f"  {verdict.target}: {case.name}: {verdict.detail.strip()[:300]}")
                next_fault = time.monotonic() + rng.exponential(mean_gap_s)
            if now >= next_report:
                report(_progress(result, driver, now - start))
                next_report = now + 60.0
            time.sleep(0.05)
        _sample(driver, result, time.monotonic())
    finally:
        with driver.lock:
            result.latencies = list(driver.latencies)
        driver.close()
    return result


def _sample(driver: LiveDriver, result: SoakResult, now: float) -> None:
    """Memory of every process; a process found dead is counted and started again; one whose services
    do not answer is counted."""
    per = {}
    for name, proc in list(driver.procs.items()):
        if not proc.alive():
            result.died.append((now, name))
            driver.start(name)
            continue
        per[name] = rss_bytes(proc.proc.pid)
        if name in driver.targets and not driver.responsive(name):
            result.unanswered.append((now, name))
    result.rss.append((now, sum(per.values()), per))


def _progress(result: SoakResult, driver: LiveDriver, elapsed: float) -> str:
    total = result.rss[-1][1] / 2**20 if result.rss else math.nan
    with driver.lock:
        recent = [v for t, _, v in driver.latencies if t >= time.monotonic() - 60.0]
    p99 = float(np.percentile(recent, 99)) * 1e3 if recent else math.nan
    return (
        f"  {elapsed:6.0f} s: {len(result.verdicts)} faults, {result.crashed()} crashed, "
        f"{result.hung()} hung, {result.missed_stops()} missed stops; RSS {total:.1f} MiB; latency p99 "
        f"(last min) {p99:.2f} ms; load {os.getloadavg()[0]:.1f}"
    )

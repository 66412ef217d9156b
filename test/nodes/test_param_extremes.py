"""Every numeric parameter of every node at the edges of its rule, over real DDS: a value the rule
allows must never make the node's outputs non-finite, nor make it drop them as non-finite.

For each node, each numeric parameter (and each entry of a numeric list) is set alone to its smallest
and its largest allowed value (``ge``/``le``; just above ``gt`` for a strict bound; the ``off`` value)
— live on a running node, at configure on a cleaned-up one, at start-up on a new one, as its timing
says. Either the node refuses the value (the set, the configure or the start-up fails, with a reason)
or it takes it, and then its per-sample output goes on with every number finite and its own
non-finite counters stay where they were. ``servo_lnn free_joint_forces [1e300]`` was such a value:
taken live, every output after it non-finite and dropped (the rule now bounds it).
"""

from __future__ import annotations

import itertools
import math
import time
from pathlib import Path

import pytest

from conftest import HAVE_RCLPY, requires_rclpy

pytestmark = [requires_rclpy, pytest.mark.ros]

if HAVE_RCLPY:
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from _ros_harness import Harness
    from ros_lnn.nodes.params import CONFIGURE, LIVE, STARTUP
    from ros_lnn.nodes.qos import SENSOR_QOS
    from ros_lnn.nodes.stamps import ns_to_stamp
    from ros_lnn_lab.harness.faults import numbers

ROOT = Path(__file__).resolve().parents[2]
URDF = ROOT / "config" / "dac_chain.urdf"
ARM = ["joint1", "joint2", "joint3", "joint4", "joint5"]
ARM_Q = [0.1, -0.7, 1.3, 0.5, 0.3]
CRANE = ["pendulum_joint", "cart_joint"]
#: Just above a strict lower bound: finite, and as absurd as the rule allows.
ABOVE = 1e-300
#: Outputs awaited per case (a passing case returns as soon as they came).
OUTPUTS = 3
WAIT_S = 60.0
_ns = itertools.count()
#: dac_controller parameters that act only with the built-in circle, or with an obstacle.
CIRCLE = ("circle_center", "circle_normal", "circle_period_s", "circle_phase")
OBSTACLE = ("obstacle_gain", "obstacle_influence", "obstacle_eta")
#: sim parameters that act only with the sweep excitation.
SWEEP = ("sweep_f_low", "sweep_f_high", "sweep_period_s")


class Rig:
    """One node of ``kind`` under test, its per-sample output collected, its normal input fed."""

    def __init__(self, ctx, kind: str, extra: dict | None = None):
        spec = SPECS[kind]
        self.kind, self.spec = kind, spec
        self.ns = f"/extreme{next(_ns)}"
        params = dict(spec["params"](), **(extra or {}))
        overrides = [Parameter(k, value=v) for k, v in params.items()]
        self.node = spec["node"](namespace=self.ns, context=ctx, parameter_overrides=overrides)
        self.h = Harness(self.node, context=ctx)
        self.received: list = []
        topic, kind_ = spec["output"]
        self.h.probe.create_subscription(kind_, f"{self.ns}/{topic}", self._take, SENSOR_QOS)
        self.pub = None
        if spec.get("input"):
            in_topic, in_type = spec["input"]
            self.pub = self.h.probe.create_publisher(in_type, f"{self.ns}/{in_topic}", SENSOR_QOS)
        self.k = 0

    def _take(self, msg) -> None:
        with self.h.lock:
            self.received.append(numbers(msg))

    def start(self) -> bool:
        if not self.spec["lifecycle"]:
            return True
        return bool(self.h.call(lambda: self.spec["start"](self.node)))

    def bad_counts(self) -> int:
        return sum(int(self.node.counts.get(k, 0)) for k in self.spec["bad"])

    def outputs_flow(self) -> tuple[int, list]:
        """Feed normal input until OUTPUTS new outputs came (or WAIT_S): (how many came, their
        non-finite numbers)."""
        with self.h.lock:
            start = len(self.received)
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            if self.pub is not None:
                self.pub.publish(self.spec["feed"](self.k))
                self.k += 1
            with self.h.lock:
                got = self.received[start:]
            if len(got) >= OUTPUTS:
                break
            time.sleep(0.004)
        bad = [v for values in got for v in values if not math.isfinite(v)]
        return len(got), bad

    def close(self) -> None:
        self.h.close()


def _crane_state(k: int):
    t = 0.004 * k
    msg = JointState(
        name=list(CRANE),
        position=[0.3 * math.sin(1.3 * t) + 0.1, 0.2 * math.sin(4.4 * t)],
        velocity=[0.39 * math.cos(1.3 * t), 0.88 * math.cos(4.4 * t)],
    )
    msg.header.stamp = ns_to_stamp(time.time_ns())
    return msg


def _arm_state(k: int):
    t = 0.004 * k
    q = [v + 0.05 * math.sin(t + i) for i, v in enumerate(ARM_Q)]
    qd = [0.05 * math.cos(t + i) for i in range(5)]
    msg = JointState(name=list(ARM), position=q, velocity=qd, effort=[0.5] * 5)
    msg.header.stamp = ns_to_stamp(time.time_ns())
    return msg


def _command(k: int):
    return Float64MultiArray(data=[0.1 * math.sin(0.01 * k)] * 5)


def _specs() -> dict:
    from ros_lnn.inference.runtime import default_model_path
    from ros_lnn.nodes.dac_chain_sim import node as dac_chain_sim
    from ros_lnn.nodes.dac_chain_sim import parameters as dac_chain_sim_params
    from ros_lnn.nodes.dac_controller import node as dac_controller
    from ros_lnn.nodes.dac_controller import parameters as dac_controller_params
    from ros_lnn.nodes.effort_observer import node as effort_observer
    from ros_lnn.nodes.effort_observer import parameters as effort_observer_params
    from ros_lnn.nodes.effort_watchdog import node as effort_watchdog
    from ros_lnn.nodes.effort_watchdog import parameters as effort_watchdog_params
    from ros_lnn.nodes.servo_lnn import node as servo_lnn
    from ros_lnn.nodes.servo_lnn import parameters as servo_lnn_params
    from ros_lnn.nodes.sim import node as sim
    from ros_lnn.nodes.sim import parameters as sim_params

    urdf = URDF.read_text()
    return {
        "servo_lnn": {
            "table": servo_lnn_params.PARAMETERS,
            "node": servo_lnn.ServoLnnNode,
            "start": servo_lnn.start,
            "lifecycle": True,
            "params": lambda: {"model_path": str(default_model_path()), "max_input_age_s": 0.0},
            "input": ("joint_states", JointState),
            "feed": _crane_state,
            "output": ("servo_lnn/driving_force", JointState),
            "bad": ("non_finite_output", "non_finite_marker", "internal_error"),
            "lists": {"free_joint_forces": 1},
        },
        "sim": {
            "table": sim_params.PARAMETERS,
            "node": sim.SimNode,
            "lifecycle": False,
            "params": lambda: {"rate_hz": 200.0},
            "output": ("joint_states", JointState),
            "bad": ("non_finite_state", "internal_error"),
            "lists": {"initial_positions": 1, "initial_velocities": 1, "servo_offset": 1},
            "chain": {"system": "chain"},  # the chain_* parameters are read with this
            "with": {name: {"excitation": "sweep"} for name in SWEEP},
        },
        "dac_controller": {
            "table": dac_controller_params.PARAMETERS,
            "node": dac_controller.DacControllerNode,
            "start": dac_controller.start,
            "lifecycle": True,
            "params": lambda: {"robot_description": urdf, "state_timeout_s": 60.0},
            "input": ("joint_states", JointState),
            "feed": _arm_state,
            "output": ("dac_controller/joint_effort_command", Float64MultiArray),
            "bad": ("non_finite_output", "step_error", "internal_error"),
            "lists": {"residual_limit": 1, "effort_limits": 5, "velocity_limits": 1},
            "special": {
                "position_limits": ([-1e6, 1e6] * 5, [v for q in ARM_Q for v in (q - 1e-9, q + 1e-9)]),
                "obstacles": ([0.45, 0.0, 0.3, 1e3], [0.45, 0.0, 0.3, ABOVE], [1e3, 1e3, 1e3, 1e3]),
                "target_frame_poses": ([1e6] * 7, [-1e6] * 7),
            },
            "with": {
                "target_frame_poses": {"target_frames": ["camera"]},
                **{name: {"circle_radius": 0.12} for name in CIRCLE},
                **{name: {"obstacles": [0.45, 0.0, 0.3, 0.05]} for name in OBSTACLE},
            },
        },
        "dac_chain_sim": {
            "table": dac_chain_sim_params.PARAMETERS,
            "node": dac_chain_sim.DacChainSim,
            "lifecycle": False,
            "params": lambda: {"robot_description": urdf, "rate_hz": 200.0},
            "output": ("joint_states", JointState),
            # an uncontrolled arm under a constant disturbance spins up and diverges whatever its size
            # (physics, not a parameter): the simulator holds it at its last finite state, counted;
            # what must hold is that nothing non-finite is published
            "bad": (),
            "lists": {
                "initial_positions": 5,
                "friction_viscous": 1,
                "friction_coulomb": 1,
                "rotor_inertia": 1,
            },
            "with": {
                "friction_coulomb_velocity": {"friction_coulomb": [0.05]},
                "payload_offset": {"payload_mass": 0.3},
            },
        },
        "effort_watchdog": {
            "table": effort_watchdog_params.PARAMETERS,
            "node": effort_watchdog.EffortWatchdogNode,
            "lifecycle": False,
            "params": lambda: {"joints": list(ARM)},
            "input": ("commands_in", Float64MultiArray),
            "feed": _command,
            "output": ("commands_out", Float64MultiArray),
            "bad": (),
            "lists": {},
        },
        "effort_observer": {
            "table": effort_observer_params.PARAMETERS,
            "node": effort_observer.EffortObserverNode,
            "start": effort_observer.start,
            "lifecycle": True,
            "params": lambda: {"urdf": str(URDF), "joints": list(ARM)},
            "input": ("joint_states", JointState),
            "feed": _arm_state,
            "output": ("effort_observer/external_effort", JointState),
            "bad": ("non_finite", "internal_error"),
            "lists": {"gains": 1, "effort_gains": 5},
        },
    }


SPECS: dict = _specs() if HAVE_RCLPY else {}


def extremes(spec: dict, p) -> list:
    """The values of ``p`` at the edges of its rule (a list filled with them at the length it needs)."""
    if p.name in spec.get("special", {}):
        return list(spec["special"][p.name])
    kind = p.item_kind if p.kind is list else p.kind
    edges = []
    low = p.ge if p.ge is not None else (p.gt + ABOVE if p.gt is not None else None)
    for edge in (low, p.le, p.off):
        if edge is not None:
            edges.append(int(edge) if kind is int else float(edge))
    if p.kind is not list:
        return edges
    n = p.size[0] if p.size else spec["lists"].get(p.name) or len(p.default)
    return [[edge] * n for edge in edges]


def numeric(table) -> list:
    return [
        p
        for p in table
        if p.kind in (int, float) or (p.kind is list and p.item_kind in (int, float))
        if p.name != "autostart"
    ]


def _verdict(rig: Rig, before: int, what: str) -> str:
    """'' when the outputs flow finite and the node counted nothing non-finite; else what went wrong."""
    came, bad = rig.outputs_flow()
    counted = rig.bad_counts() - before
    if bad or counted or came < OUTPUTS:
        return f"{what}: {came} outputs, {len(bad)} non-finite numbers, {counted} counted non-finite"
    return ""


def _startup_case(ctx, kind: str, p, value, extra: dict) -> str:
    try:
        rig = Rig(ctx, kind, dict(extra, **{p.name: value}))
    except Exception:  # noqa: BLE001 - refused at start-up (ConfigError, or rclpy's own refusal)
        return ""
    try:
        if not rig.start():
            return ""
        return _verdict(rig, rig.bad_counts(), f"{p.name}={value!r} at start-up")
    finally:
        rig.close()


def _set(rig: Rig, name: str, value) -> bool:
    return rig.h.call(lambda: rig.node.set_parameters([Parameter(name, value=value)]))[0].successful


def _configure_case(rig: Rig, p, value, extra: dict) -> str:
    node, h = rig.node, rig.h
    h.call(node.trigger_deactivate)
    h.call(node.trigger_cleanup)
    try:
        for name, v in extra.items():
            assert _set(rig, name, v), name
        if not _set(rig, p.name, value):
            return ""  # refused at the set
        if not rig.start():
            return ""  # refused at configure, with its one line
        return _verdict(rig, rig.bad_counts(), f"{p.name}={value!r} at configure")
    finally:
        state = node._state_machine.current_state[1]
        if state == "active":
            h.call(node.trigger_deactivate)
        if node._state_machine.current_state[1] == "inactive":
            h.call(node.trigger_cleanup)
        assert _set(rig, p.name, p.default)
        for name in extra:
            assert _set(rig, name, rig.spec["table"].params[name].default)
        assert rig.start(), "the node did not start again with its defaults"


def _live_case(rig: Rig, p, value) -> str:
    before = rig.bad_counts()
    if not _set(rig, p.name, value):
        return ""
    try:
        return _verdict(rig, before, f"{p.name}={value!r} live")
    finally:
        assert _set(rig, p.name, p.default)


@pytest.mark.parametrize("kind", list(SPECS))
def test_every_numeric_parameter_at_its_edges_keeps_the_outputs_finite(ctx, kind):
    spec = SPECS[kind]
    params = numeric(spec["table"])
    assert params
    problems, tried = [], 0
    rig = Rig(ctx, kind)
    try:
        assert rig.start()
        for p in params:
            extra = dict(spec.get("with", {}).get(p.name, {}))
            if p.name.startswith("chain_"):
                extra.update(spec.get("chain", {}))
            for value in extremes(spec, p):
                tried += 1
                if p.applies == STARTUP or (extra and not spec["lifecycle"]):
                    problems.append(_startup_case(ctx, kind, p, value, extra))
                elif p.applies == CONFIGURE or extra:  # a live one with what makes it act, at configure
                    problems.append(_configure_case(rig, p, value, extra))
                else:
                    assert p.applies == LIVE
                    problems.append(_live_case(rig, p, value))
    finally:
        rig.close()
    assert tried >= 2 * len(params) - 2
    problems = [x for x in problems if x]
    assert not problems, "\n".join(problems)


def test_every_numeric_parameter_has_a_lower_and_an_upper_bound():
    """No numeric parameter takes any finite number: each has a rule on both sides (what the sweep
    above tries)."""
    unbounded = [
        f"{kind} {p.name}"
        for kind, spec in SPECS.items()
        for p in numeric(spec["table"])
        if (p.ge is None and p.gt is None) or p.le is None
    ]
    assert not unbounded


def test_dac_chain_sim_refuses_friction_too_stiff_for_its_step_and_never_publishes_a_diverged_state(ctx):
    """Friction that stops the arm faster than one RK4 step can follow is refused at start-up in one
    line; a disturbance the uncontrolled arm cannot follow makes the state diverge: held at its last
    finite state, counted, and only finite joint states go out."""
    from ros_lnn.errors import RosLnnError

    with pytest.raises(RosLnnError, match=r"friction_viscous / friction_coulomb.*rate_hz 200"):
        Rig(ctx, "dac_chain_sim", {"friction_viscous": [1e3]})
    rig = Rig(ctx, "dac_chain_sim", {"disturbance": [1e6] * 6})
    try:
        rig.h.wait(lambda: rig.node.counts["non_finite_state"] > 0, WAIT_S, "the state diverged")
        came, bad = rig.outputs_flow()
        assert came >= OUTPUTS and not bad
    finally:
        rig.close()

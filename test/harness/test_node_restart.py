"""Crash and restart with real processes: the closed loop of dac_ros2_control.launch.py without
ros2_control (dac_chain_sim ← effort_watchdog ← dac_controller, and effort_observer watching), each
node its own process started the way launch starts it (name, namespace, remappings, a parameters
file) and kept alive as launch's respawn keeps it (ros_lnn_lab.harness.supervisor). dac_controller is
killed by SIGKILL: it comes back active by itself with the parameters it started with, and while it is
down the watchdog sends zero efforts; effort_observer is killed mid-motion: it starts its momentum
integration again cleanly. The observer's model and the arm are the same URDF: there is no external
torque to find, and the observer reads the simulator's efforts as what they are (held over the step
before each stamp: ``effort_timing``), so the watchdog's zeros and the controller's first efforts show as
nothing. The arm has drive inertia (_with_drives); while the controller is down it falls, and the
observer is killed once the respawned controller holds it again. The figures (SIGKILL to active, the
watchdog's zeros after the last command) are printed; timing is asserted nowhere."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import pytest

from conftest import HAVE_RCLPY, requires_rclpy

pytestmark = [requires_rclpy, pytest.mark.ros]

if HAVE_RCLPY:
    from rcl_interfaces.srv import GetParameters
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from _ros_harness import Harness
    from ros_lnn.nodes.qos import SENSOR_QOS
    from ros_lnn_lab.harness.supervisor import Supervised, node_command, write_params

ROOT = Path(__file__).resolve().parents[2]
URDF = ROOT / "config" / "dac_chain.urdf"
JOINTS = ["joint1", "joint2", "joint3", "joint4", "joint5"]
WATCHDOG_TIMEOUT_S = 0.1
COLLISION_N_M = 1.0
SETTLED_RAD_S = 1.0  # the demo's motion: a few tenths of a rad/s
DRIVE_INERTIA = 0.05  # kg m², added about each axis of every link (_with_drives)
WAIT_S = 120.0


def _with_drives(urdf: str) -> str:
    """The demo arm with every link's inertia raised by ``DRIVE_INERTIA`` about each axis, as a drive's
    reflected rotor inertia raises a real joint's: the bare demo arm's wrist (3e-4 kg m²) turns 6 000
    rad/s² on its 6 N m, and dropped by the watchdog's zeros it whips at hundreds of rad/s, beyond any
    integration at 200 Hz. The simulator, the controller and the observer all take this URDF."""
    import re

    def raised(match) -> str:
        values = {k: float(v) for k, v in re.findall(r'(i[xyz]{2})="([^"]+)"', match[0])}
        for axis in ("ixx", "iyy", "izz"):
            values[axis] += DRIVE_INERTIA
        return "<inertia " + " ".join(f'{k}="{v:g}"' for k, v in values.items()) + "/>"

    out = re.sub(r"<inertia [^>]*/>", raised, urdf)
    assert out.count("<inertia ") == urdf.count("<inertia ") == 5
    return out


def _rig(tmp_path, ns: str) -> dict:
    """The four nodes' supervised processes (not started)."""
    import yaml

    from ros_lnn.arm.observer import Thresholds

    demo = yaml.safe_load((ROOT / "config" / "dac_demo.yaml").read_text())
    thresholds = tmp_path / "thresholds.yaml"
    Thresholds(tuple(JOINTS), [COLLISION_N_M] * 5, [0.0] * 5).save(thresholds)
    urdf = _with_drives(URDF.read_text())
    params = {
        "dac_chain_sim": {
            "robot_description": urdf,
            "rate_hz": 200.0,
            "hold_until_command": True,
            "initial_positions": demo["/**/dac_chain_sim"]["ros__parameters"]["initial_positions"],
        },
        "effort_watchdog": {"joints": JOINTS, "timeout_s": WATCHDOG_TIMEOUT_S, "period_s": 0.02},
        "dac_controller": {
            **demo["/**/dac_controller"]["ros__parameters"],
            "robot_description": urdf,
            "autostart": True,
            "kd_linear": 31.0,  # not the default: the respawned node must have it too
            "state_timeout_s": 0.5,
            "publish_markers": False,
        },
        "effort_observer": {
            "robot_description": urdf,
            "joints": JOINTS,
            "thresholds": str(thresholds),
            "effort_timing": "held_until_stamp",  # dac_chain_sim's: the effort held until each stamp
            "autostart": True,
        },
    }
    remaps = {
        "effort_watchdog": {
            "commands_in": "dac_controller/joint_effort_command",
            "commands_out": "effort_commands",
        }
    }
    env = dict(os.environ)
    return {
        name: Supervised(
            node_command(
                f"ros_lnn.nodes.{name}",
                name,
                ns,
                write_params(tmp_path / f"{name}.yaml", name, values),
                remaps.get(name),
            ),
            env,
            respawn_delay=0.5,
            name=name,
        )
        for name, values in params.items()
    }


def test_a_node_killed_by_sigkill_comes_back_and_the_loop_stays_safe(ctx, tmp_path):
    ns = f"/restart{os.getpid()}"
    procs = _rig(tmp_path, ns)
    for proc in procs.values():
        proc.start()
    probe = Harness(context=ctx)
    try:
        efforts: list = []  # (receive time, efforts) of what the watchdog sends the arm
        collisions: list = []
        external: list = []  # (receive time, max |τ_ext|) of the observer
        probe.probe.create_subscription(
            Float64MultiArray,
            f"{ns}/effort_commands",
            lambda m: efforts.append((time.monotonic(), list(m.data))),
            10,
        )
        arm: list = []  # (max |q̇|, any effort) of each joint state of the arm
        probe.probe.create_subscription(
            JointState,
            f"{ns}/joint_states",
            lambda m: arm.append((max(abs(v) for v in m.velocity), any(m.effort))),
            SENSOR_QOS,
        )
        probe.probe.create_subscription(
            JointState, f"{ns}/effort_observer/collision", lambda m: collisions.append(m), 10
        )
        probe.probe.create_subscription(
            JointState,
            f"{ns}/effort_observer/external_effort",
            lambda m: external.append((time.monotonic(), max(abs(v) for v in m.effort))),
            SENSOR_QOS,
        )

        def state(name: str):
            from lifecycle_msgs.srv import GetState

            return _call(probe, f"{ns}/{name}/get_state", GetState, GetState.Request())

        def active(name: str) -> bool:
            reply = state(name)
            return reply is not None and reply.current_state.label == "active"

        def moving() -> bool:
            return len(efforts) > 50 and any(any(v) for _, v in efforts[-10:]) and len(external) > 50

        probe.wait(
            lambda: active("dac_controller") and active("effort_observer") and moving(), WAIT_S, "the loop"
        )

        # -- the controller, killed -------------------------------------------------------------
        killed_at = procs["dac_controller"].kill()
        probe.wait(lambda: procs["dac_controller"].starts() == 2, WAIT_S, "the controller respawned")
        probe.wait(lambda: active("dac_controller"), WAIT_S, "the respawned controller active")
        active_at = time.monotonic()
        reply = _call(
            probe,
            f"{ns}/dac_controller/get_parameters",
            GetParameters,
            GetParameters.Request(names=["kd_linear"]),
        )
        assert reply is not None and reply.values[0].double_value == 31.0  # the parameters it started with
        probe.wait(lambda: any(any(v) for t, v in efforts if t > active_at), WAIT_S, "efforts again")
        after_kill = [(t, v) for t, v in efforts if t > killed_at]
        first_zero = next(t for t, v in after_kill if not any(v))
        last_command = max(t for t, v in efforts if t <= first_zero and any(v))
        back = next(t for t, v in after_kill if any(v) and t > first_zero)
        # between the first zero and the controller's efforts again: zeros only, none missing a beat
        assert all(not any(v) for t, v in after_kill if first_zero <= t < back)
        assert first_zero < active_at  # the zeros came while the controller was down

        # -- the observer, killed mid-motion -----------------------------------------------------
        def settled() -> bool:  # the controller tracks again: a second of states under control
            last = arm[-200:]
            return len(last) == 200 and all(v < SETTLED_RAD_S and pushed for v, pushed in last)

        probe.wait(
            lambda: len([t for t, _ in external if t > back]) > 400 and settled(),
            WAIT_S,
            "the loop settled again",
        )
        during_controller_restart = len(collisions)
        observer_killed = procs["effort_observer"].kill()
        probe.wait(lambda: procs["effort_observer"].starts() == 2, WAIT_S, "the observer respawned")
        probe.wait(lambda: active("effort_observer"), WAIT_S, "the respawned observer active")
        observer_back = time.monotonic()
        probe.wait(lambda: sum(t > observer_back for t, _ in external) > 200, WAIT_S, "the observer's output")
        restarted = [r for t, r in external if t > observer_killed]
        assert restarted and max(restarted) < COLLISION_N_M, max(restarted)
        assert len(collisions) == during_controller_restart, [list(m.name) for m in collisions]
        assert all(math.isfinite(r) for _, r in external)
        print(
            f"restart figures: SIGKILL -> dac_controller active again {active_at - killed_at:.2f} s "
            f"(respawn_delay 0.5 s); watchdog zeros {first_zero - last_command:.3f} s after the last "
            f"command (timeout {WATCHDOG_TIMEOUT_S} s), {first_zero - killed_at:.3f} s after the SIGKILL; "
            f"efforts forwarded again {back - killed_at:.2f} s after it; effort_observer active again "
            f"{observer_back - observer_killed:.2f} s after its SIGKILL, max |τ_ext| after it "
            f"{max(restarted):.3f} N m (threshold {COLLISION_N_M}), no collision from its restart; "
            f"{during_controller_restart} reported while the controller restarted"
        )
    finally:
        probe.close()
        for proc in procs.values():
            proc.stop()
    for name, proc in procs.items():
        assert not [line for line in proc.log if line.startswith("Traceback")], name


def _call(h, service: str, kind, request, timeout: float = 1.0):
    """One service call from the probe; None when there is no answer within ``timeout`` (a node down)."""
    client = h.probe.create_client(kind, service)
    try:
        if not client.wait_for_service(timeout_sec=timeout):
            return None
        future = client.call_async(request)
        deadline = time.monotonic() + timeout
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.005)
        return future.result() if future.done() else None
    finally:
        h.probe.destroy_client(client)

"""The identified arm's loop over DDS (``ros-lnn bench armcontrol --dds``): ``arm_sim`` (the benchmark's
simulated Panda: the same true arm, friction, noise seed and one-period command delay) and
``dac_controller`` (the arm model file, law ``feedforward_pd``, the given gains) each run in their own
process in real time; this process publishes the robot's description (transient local, as
robot_state_publisher does) and the program as one ``~/joint_trajectory``, and records the joint states.
The tracking error is taken as the library loop's: the measured positions against the program at each
state's stamp, over the program's duration."""

from __future__ import annotations

import os
import time

import numpy as np


def dds_loop(
    model_path, program, kp, kd, rate: float, library_rms_mrad: float, say, lockstep: bool = False
) -> dict:
    """Run ``program`` over DDS with the arm model at ``model_path``, gains ``kp``, ``kd`` at ``rate`` Hz;
    its tracking RMS beside the library loop's ``library_rms_mrad``. ``lockstep``: ``arm_sim`` steps once
    per command and publishes its simulated time on /clock, which the controller follows (the loop of
    a simulator in lockstep: the same on any machine, however loaded); otherwise both keep wall time."""
    from builtin_interfaces.msg import Duration
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from ros_lnn.arm.simulation import PANDA_JOINTS, panda_urdf
    from ros_lnn.control.pipeline import JointTrajectorySampler
    from ros_lnn.nodes.robot_description import description_qos
    from ros_lnn.nodes.stamps import ns_to_stamp, stamp_ns
    from ros_lnn_lab.harness.node_bench import BenchDriver, bench_env, deep_rx_qos, launch_node

    env = bench_env()
    ns = f"/bench_arm{os.getpid()}"
    sim = launch_node(
        "ros_lnn.nodes.arm_sim",
        ns,
        [
            f"rate_hz:={rate}",
            "noise_seed:=31",
            "initial_positions:=[" + ",".join(repr(float(x)) for x in program.q[0]) + "]",
            f"lockstep:={str(lockstep).lower()}",
            "lockstep_timeout_s:=5.0",  # wait for the controller; a lost command: one step on the held one
        ],
        env,
        remaps=["effort_commands:=dac_controller/joint_effort_command"],
    )
    controller = launch_node(
        "ros_lnn.nodes.dac_controller",
        ns,
        [
            f"model_path:={model_path}",
            "law:=feedforward_pd",
            "joint_kp:=[" + ",".join(repr(float(k)) for k in kp) + "]",
            "joint_kd:=[" + ",".join(repr(float(k)) for k in kd) + "]",
            "robot_description_timeout_s:=30.0",
            # a loaded machine's scheduling gaps of a tenth of a second would stop the arm (zero
            # efforts: it falls) long before they disturb the tracking; the watchdog stays, later
            # (in lockstep longer than the simulator's own timeout: the watchdog's zeros would step it)
            f"state_timeout_s:={10.0 if lockstep else 0.5}",
            f"use_sim_time:={str(lockstep).lower()}",
            "autostart:=true",
        ],
        env,
    )
    driver = BenchDriver("bench_armcontrol_driver", ns, controller)
    node, lock = driver.node, driver.lock
    states: list = []

    def on_state(msg):
        with lock:
            states.append((stamp_ns(msg.header.stamp), np.array(msg.position)))

    node.create_subscription(JointState, "joint_states", on_state, deep_rx_qos())
    description = node.create_publisher(String, "robot_description", description_qos())
    description.publish(String(data=panda_urdf().read_text()))
    trajectory = node.create_publisher(JointTrajectory, "dac_controller/joint_trajectory", 10)
    driver.spin()
    try:
        driver.wait_matched(trajectory, f"{ns}/dac_controller/joint_effort_command", 120, "dac_controller")
        deadline = time.monotonic() + 60
        while not states and time.monotonic() < deadline:
            time.sleep(0.05)
        if not states or trajectory.get_subscription_count() == 0:
            sim.terminate()
            output = sim.communicate(timeout=30)[0].decode(errors="replace")
            raise RuntimeError(
                f"arm_sim or dac_controller did not come up within two minutes: {output[-2000:]}"
            )
        with lock:  # the simulated time in lockstep (from 0), the wall clock otherwise
            start_ns = (states[-1][0] if lockstep else time.time_ns()) + 1_000_000_000
        msg = JointTrajectory(joint_names=list(PANDA_JOINTS))
        msg.header.stamp = ns_to_stamp(start_ns)
        for t, q, qd, qdd in zip(program.times, program.q, program.qd, program.qdd):
            ns_t = int(round(t * 1e9))
            point = JointTrajectoryPoint(
                positions=q.tolist(), velocities=qd.tolist(), accelerations=qdd.tolist()
            )
            point.time_from_start = Duration(sec=ns_t // 1_000_000_000, nanosec=ns_t % 1_000_000_000)
            msg.points.append(point)
        trajectory.publish(msg)
        say(f"DDS loop: trajectory of {len(msg.points)} points sent; {program.duration:.1f} s of motion")
        end_ns = start_ns + int((program.duration + 0.5) * 1e9)
        deadline = time.monotonic() + 20 * (1.5 + program.duration)
        while time.monotonic() < deadline:
            time.sleep(0.1)
            with lock:
                if (states[-1][0] if lockstep else time.time_ns()) >= end_ns:
                    break
        with lock:
            got = list(states)
    finally:
        out_ctl = driver.close()
        sim.terminate()
        out_sim = sim.communicate(timeout=30)[0].decode(errors="replace")
    sampler = JointTrajectorySampler(program.times, program.q, program.qd, program.qdd)
    window = [(s, q) for s, q in got if start_ns <= s <= start_ns + int(program.duration * 1e9)]
    expected = int(program.duration * rate) + 1
    if len(window) < 0.5 * expected:
        raise RuntimeError(
            f"DDS loop: {len(window)} of {expected} joint states recorded\n"
            f"{out_ctl[-2000:]}\n{out_sim[-2000:]}"
        )
    e = np.array([q - sampler((s - start_ns) * 1e-9)[0] for s, q in window])
    rms = 1e3 * float(np.sqrt(np.mean(e**2)))
    lib = library_rms_mrad
    lagged = out_sim.count("periods behind the clock")
    say(
        f"DDS loop (dac_controller + arm_sim, own processes, {rate:g} Hz "
        f"{'lockstep' if lockstep else 'real time'}): tracking RMS {rms:.3f} "
        f"mrad against the library loop's {lib:.3f} (ratio {rms / lib:.2f}); {len(window)} of {expected} "
        f"states; arm_sim lag warnings {lagged}"
    )
    print(f"DDS loop tracking RMS [mrad]: {rms:.3f}, library {lib:.3f}, ratio {rms / lib:.2f}")
    return {
        "rms_mrad": rms,
        "library_rms_mrad": lib,
        "ratio": rms / lib,
        "states": len(window),
        "expected": expected,
    }

"""``ros-lnn bench node --observer``: the effort_observer node in its own process, driven over DDS at
1 kHz by this process with the joint states of a simulated Panda.

1. Model: ``--model`` (an arm model), else one trained here on a pulse-free recording of the collision
   bench's generator (the Panda with a model/URDF mismatch, friction and sensor noise; 10 s, the
   least-squares fit + a learned residual where it helps; ``--quick``: 6 s, the fit alone).
2. The node: ``python -m ros_lnn.nodes.effort_observer`` with the model, the momentum observer (gain
   150 1/s), thresholds at 10 % of each joint's effort limit (the detection path runs on every sample;
   they are for its cost, not calibrated) and ``~/external_wrench`` at ``panda_hand_tcp``: every output
   of a deployment.
3. The stream: another recording of the same arm (``--duration`` s, default 10; ``--quick`` 3),
   published as JointState (position, velocity, effort) at 1 kHz, stamped at 1 ms steps; the send time
   of each stamp is kept.

   ``--busy``: a busy-loop process (``python -c "while True: pass"``) runs beside it, as the
   controller, the driver and the planners share the robot computer's cores.
4. The floor, timed alone in this process on the same states: Pinocchio's M, C, g and the wrench
   frame's Jacobian per state, and the model's friction + residual for one state (one graph call,
   its friction state given) — what no observer of this model can skip.

Figures: processed = the joint states the node processed (its ``/diagnostics`` count once the stream
ended) / joint states sent; end-to-end latency = the input's send time (taken just before publishing)
to the receipt of the ``~/external_effort`` with its stamp (the node's default ``output_rate_hz``:
the samples at 100 Hz); CPU = the node process's user + system time over the run (/proc) per joint
state processed, which includes its DDS receive and send work and its /diagnostics timer. Last line:
``effort_observer: 1 kHz processed P %, latency p50 A ms p99 B ms, CPU C us/sample; floor F us
(Pinocchio M, C, g, J X us + model one sample Y us), node/floor R``.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ros_lnn.timing import machine_description
from ros_lnn.timing import percentile as _pct
from ros_lnn.timing import process_cpu_seconds as _cpu_seconds

GAIN = 150.0
THRESHOLD_FRACTION = 0.10
WRENCH_FRAME = "panda_hand_tcp"


def observer_model(args, workdir: Path, say) -> Path:
    """The arm model the node runs: ``--model``, or one trained on the generator's recording."""
    from ros_lnn.arm.model import is_arm_model
    from ros_lnn.errors import ConfigError

    if getattr(args, "model", None):
        path = Path(args.model)
        if not is_arm_model(path):
            raise ConfigError(f"--model {path}: bench node --observer needs an arm model (arm training)")
        return path
    from ros_lnn.arm import simulation as sim
    from ros_lnn.arm.mapping import ArmMapping
    from ros_lnn.arm.residual import ResidualOptions
    from ros_lnn.arm.simulation import PANDA_JOINTS as JOINTS
    from ros_lnn.arm.simulation import panda_generator as generator
    from ros_lnn.arm.training import train_arm

    quick = bool(getattr(args, "quick", False))
    arm, truth, friction, noise = generator()
    seconds = 6.0 if quick else 10.0
    run = sim.simulate_arm(truth, seconds, nominal=arm, friction=friction, noise=noise, seed=11)
    out = workdir / "panda_observer_bench.onnx"
    result = train_arm(
        [run.recording("train")],
        arm.urdf_text,
        ArmMapping(actuated_joints=JOINTS),
        out=out,
        residual="off" if quick else "auto",
        ripple="off" if quick else "auto",
        fast_torque="off" if quick else "auto",
        options=ResidualOptions(epochs=40, time_limit_s=20),
    )
    say(
        f"trained on {run.duration:.0f} s of the simulated Panda in {result.train_s:.0f} s "
        f"(residual {'on' if result.residual_enabled else 'off'})"
    )
    return out


def write_thresholds(model_path: Path, path: Path) -> Path:
    from ros_lnn.arm.model import ArmModel
    from ros_lnn.arm.observer import Thresholds

    model = ArmModel(model_path)
    limits = model.nominal.effort_limits()
    Thresholds(
        model.joints,
        THRESHOLD_FRACTION * limits,
        np.zeros(model.n),
        info={"observer": {"method": "momentum", "gains": [GAIN]}},
    ).save(path)
    return path


def stream(duration_s: float, seed: int = 12):
    """(joints, q, qd, tau) of a pulse-free run of the generator, 1 kHz."""
    from ros_lnn.arm import simulation as sim
    from ros_lnn.arm.simulation import PANDA_JOINTS as JOINTS
    from ros_lnn.arm.simulation import panda_generator as generator

    arm, truth, friction, noise = generator()
    run = sim.simulate_arm(truth, duration_s, nominal=arm, friction=friction, noise=noise, seed=seed)
    return JOINTS, run.q, run.qd, run.tau


def floor_us(model_path: Path, states, frame: str = WRENCH_FRAME) -> dict:
    """The observer's floor per joint state, thread CPU timed alone (µs, means over the states):
    Pinocchio's M, C, g and ``frame``'s Jacobian (``rigid``), and the model's friction + residual for
    one state, one graph call each with its friction state (``model``)."""
    from ros_lnn.arm.model import ArmModel
    from ros_lnn.arm.observer import WrenchEstimator
    from ros_lnn.arm.rigid_body import pinocchio

    _, q, qd, _ = states
    model = ArmModel(model_path)
    pin, body = pinocchio(), model.rigid
    data = body.model.createData()
    jacobian = WrenchEstimator(model.nominal, frame).jacobian
    qm, vm = np.zeros_like(q), np.zeros_like(qd)
    qm[:, body.order], vm[:, body.order] = q, qd  # Pinocchio's joint order
    start = time.thread_time_ns()
    for k in range(len(q)):
        pin.crba(body.model, data, qm[k])
        pin.computeCoriolisMatrix(body.model, data, qm[k], vm[k])
        pin.computeGeneralizedGravity(body.model, data, qm[k])
        jacobian(q[k])
    rigid = (time.thread_time_ns() - start) / len(q) / 1e3
    friction = model.friction_states(q)
    start = time.thread_time_ns()
    for k in range(len(q)):
        model.non_rigid_torque(q[k : k + 1], qd[k : k + 1], None if friction is None else friction[k : k + 1])
    one = (time.thread_time_ns() - start) / len(q) / 1e3
    return {"rigid": rigid, "model": one, "total": rigid + one}


@contextlib.contextmanager
def busy_loop(on: bool):
    """A process that spins a core for as long as the block runs (``on``), else nothing."""
    if not on:
        yield None
        return
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def run_observer_rate(
    model: Path, thresholds: Path, states, rate_hz: float, duration_s: float, domain_env: dict
) -> dict:
    from diagnostic_msgs.msg import DiagnosticArray
    from sensor_msgs.msg import JointState

    from ros_lnn.nodes.qos import SENSOR_QOS
    from ros_lnn.nodes.stamps import ns_to_stamp
    from ros_lnn_lab.harness.node_bench import BenchDriver, deep_rx_qos, launch_node

    ns = f"/bench_obs{os.getpid()}"
    params = [
        f"model_path:={model}",
        "autostart:=true",
        f"gains:=[{GAIN}]",
        f"thresholds:={thresholds}",
        f"wrench_frame:={WRENCH_FRAME}",
        "robot_description_timeout_s:=0.0",  # no robot_state_publisher here: the model's URDF
        "diagnostics_period_s:=0.25",  # its processed count soon after the stream ends
    ]
    proc = launch_node("ros_lnn.nodes.effort_observer", ns, params, domain_env)
    driver = BenchDriver("bench_observer_driver", ns, proc)
    node, lock = driver.node, driver.lock
    collisions = [0]
    last_diagnostics: dict = {}

    def on_collision(raw: bytes):
        with lock:
            collisions[0] += 1

    def on_diagnostics(msg):
        for status in msg.status:
            if status.name == f"{ns}/effort_observer":
                with lock:
                    last_diagnostics.clear()
                    last_diagnostics.update({kv.key: kv.value for kv in status.values})

    rx_qos = deep_rx_qos()
    node.create_subscription(
        JointState, "effort_observer/external_effort", driver.on_stamped, rx_qos, raw=True
    )
    node.create_subscription(JointState, "effort_observer/collision", on_collision, rx_qos, raw=True)
    node.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 10)
    pub = node.create_publisher(JointState, "joint_states", SENSOR_QOS)
    driver.spin()
    joints, q, qd, tau = states
    period_ns = int(round(1e9 / rate_hz))
    n = min(int(round(rate_hz * duration_s)), len(q))
    # built before the timed loop: the driver only stamps and publishes (it shares the machine)
    msgs = [
        JointState(name=list(joints), position=q[k].tolist(), velocity=qd[k].tolist(), effort=tau[k].tolist())
        for k in range(n)
    ]
    send_ns = np.zeros(n, dtype=np.int64)
    try:
        driver.wait_matched(pub, f"{ns}/effort_observer/external_effort", 60, "effort_observer")
        if pub.get_subscription_count() == 0:
            raise RuntimeError("effort_observer did not subscribe joint_states within 60 s")
        time.sleep(1.0)  # the node's subscription and ours matched
        base_ns = time.time_ns()
        cpu0, wall0, driver0 = _cpu_seconds(proc.pid), time.monotonic(), time.process_time()
        t_next = time.monotonic()
        period = period_ns * 1e-9
        for k in range(n):
            msg = msgs[k]
            msg.header.stamp = ns_to_stamp(base_ns + k * period_ns)
            # sleep, never spin (the node needs the other core); late wake-ups are caught up
            remaining = t_next - time.monotonic()
            if remaining > 0:
                time.sleep(remaining)
            send_ns[k] = time.time_ns()
            pub.publish(msg)
            t_next += period
        send_wall = time.monotonic() - wall0
        # the last outputs arrive, and /diagnostics counts every state the node took: the same
        # received and processed counts twice, half a second apart (it publishes every 0.25 s)
        time.sleep(1.0)
        deadline, counts = time.monotonic() + 10.0, None
        while time.monotonic() < deadline:
            with lock:
                now = (last_diagnostics.get("received"), last_diagnostics.get("processed"))
            if now == counts and now[0] is not None and now[0] == now[1]:
                break
            counts = now
            time.sleep(0.5)
        cpu = _cpu_seconds(proc.pid) - cpu0
        wall = time.monotonic() - wall0
        driver_cpu = time.process_time() - driver0
    finally:
        driver.close()
    with lock:
        pairs = np.array(driver.received, dtype=np.int64).reshape(-1, 2)
        diag = dict(last_diagnostics)
    index = (pairs[:, 0] - base_ns) // period_ns
    ok = (index >= 0) & (index < n)
    e2e_us = (pairs[ok, 1] - send_ns[index[ok]]) / 1e3
    outputs = int(ok.sum())

    def diag_float(key):
        try:
            return float(diag[key])
        except (KeyError, ValueError):
            return float("nan")

    processed = diag_float("processed")
    processed = 0.0 if processed != processed else processed  # no /diagnostics: nothing counted
    return {
        "rate_hz": rate_hz,
        "duration_s": n / rate_hz,
        "sent": n,
        "send_rate_hz": n / send_wall,
        "outputs_received": outputs,
        "fraction_processed": processed / n,
        "collision_events": collisions[0],
        "e2e_median_us": _pct(e2e_us, 50),
        "e2e_p99_us": _pct(e2e_us, 99),
        "e2e_max_us": float(e2e_us.max()) if e2e_us.size else float("nan"),
        "node_cpu_pct_of_one_core": 100 * cpu / wall,
        "node_cpu_us_per_sample": 1e6 * cpu / max(processed, 1.0),
        "driver_cpu_pct_of_one_core": 100 * driver_cpu / wall,
        "node_received": diag_float("received"),
        "node_processed": diag_float("processed"),
        "node_input_wakeups": diag_float("input_wakeups"),
        "node_input_batches": diag_float("input_batches"),
        "in_node_median_us_last_2s": diag_float("latency_median_us"),
        "in_node_p99_us_last_2s": diag_float("latency_p99_us"),
    }


def bench_observer_node(args) -> dict:
    from ros_lnn.nodes.process import executor_kind
    from ros_lnn_lab.harness.node_bench import bench_env

    quick = bool(getattr(args, "quick", False))
    duration = float(getattr(args, "duration", None) or (3.0 if quick else 10.0))
    rate = 1000.0
    env = bench_env()
    start = time.perf_counter()

    def say(text):
        print(f"[{time.perf_counter() - start:6.1f} s] {text}", flush=True)

    load = os.getloadavg()
    say(f"effort_observer node benchmark: {machine_description()}; load average {load[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        model = observer_model(args, workdir, say)
        from ros_lnn.arm.model import ArmModel

        arm_model = ArmModel(model)
        described = (
            f"{arm_model.n} joints, rigid body + friction, residual "
            f"{'on' if arm_model.residual_enabled else 'off'}"
        )
        thresholds = write_thresholds(model, workdir / "thresholds.yaml")
        states = stream(duration + 0.1)
        busy = bool(getattr(args, "busy", False))
        say(
            f"model {model.name}: {described}; momentum observer K {GAIN:g} 1/s, thresholds "
            f"{100 * THRESHOLD_FRACTION:g} % of the effort limits, wrench at {WRENCH_FRAME}; executor "
            f"{executor_kind()}; {rate:.0f} Hz for {duration:g} s"
            + ("; a busy-loop process beside it" if busy else "")
        )
        with busy_loop(busy):
            r = run_observer_rate(model, thresholds, states, rate, duration, env)
        floor = floor_us(model, states)
    say(
        f"sent {r['sent']} ({r['send_rate_hz']:.0f}/s), external_effort received {r['outputs_received']}, "
        f"collision events {r['collision_events']}; node counted received {r['node_received']:.0f}, "
        f"processed {r['node_processed']:.0f} at its last /diagnostics in {r['node_input_batches']:.0f} "
        f"batches (intake wake-ups {r['node_input_wakeups']:.0f}); in-node latency (last 2 s) median "
        f"{r['in_node_median_us_last_2s']:.0f} us, p99 {r['in_node_p99_us_last_2s']:.0f} us; end-to-end "
        f"max {r['e2e_max_us'] / 1e3:.1f} ms; node CPU {r['node_cpu_pct_of_one_core']:.0f} % of one core, "
        f"driver {r['driver_cpu_pct_of_one_core']:.0f} %; load average at the end {os.getloadavg()[0]:.1f}"
    )
    print(
        f"effort_observer: {rate / 1000:.0f} kHz processed {100 * r['fraction_processed']:.2f} %, latency "
        f"p50 {r['e2e_median_us'] / 1e3:.2f} ms p99 {r['e2e_p99_us'] / 1e3:.2f} ms, CPU "
        f"{r['node_cpu_us_per_sample']:.0f} us/sample; floor {floor['total']:.0f} us (Pinocchio M, C, g, J "
        f"{floor['rigid']:.0f} us + model one sample {floor['model']:.0f} us), node/floor "
        f"{r['node_cpu_us_per_sample'] / floor['total']:.2f}",
        flush=True,
    )
    return {
        "machine": machine_description(),
        "load_average_1min": load[0],
        "model": model.name,
        "model_description": described,
        "gain": GAIN,
        "threshold_fraction_of_effort_limit": THRESHOLD_FRACTION,
        "wrench_frame": WRENCH_FRAME,
        "executor": executor_kind(),
        "busy_loop": busy,
        "load_average_1min_end": os.getloadavg()[0],
        "floor_us": floor,
        "node_over_floor": r["node_cpu_us_per_sample"] / floor["total"],
        **r,
    }

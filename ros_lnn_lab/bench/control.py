"""``ros-lnn bench control``: DAC controller step time for N = 2, 5, 10 bodies with each law, and the
closed-loop demo's tracking / Lyapunov figures.

Step = what a controller does per sample: ``update`` (inertial-frame tensors at the measured state) +
the law (mobility, reference velocity and its exact rate, τ_c). Models: the paper's free-floating chain
of N bodies with spherical joints (laws I, II, III with a 6-D pose task and one obstacle; the
maximal-coordinate numpy model), and a fixed-base revolute arm of N links through the whole joint-space
pipeline (joint states → Pinocchio kinematics and dynamics → law III → u = Gᵀ τ_c), i.e. the node's
per-message work without the DDS part.

Then, in the same run: the simulator's forward dynamics at N = 5 (RK4 steps per second on the
maximal-coordinate model with its KKT solve and Baumgarte terms, and on Pinocchio's ABA in joint
coordinates), and, as the last line, the pipeline's law III step on the demo arm against the same law
written plainly on Pinocchio (:mod:`ros_lnn.control.pinocchio_reference`), timed interleaved in
this process after checking that both give the same efforts.

``ros-lnn bench dac-node``: the dac_controller node alone at 1 kHz over DDS (joint states from another
process): processed fraction, outputs per input, in-node latency and callback CPU per sample.
"""

from __future__ import annotations

import platform
import time
from typing import Any

import numpy as np

SIZES = (2, 5, 10)


def _arm_state(joint_state_type):
    """The one joint state the feeders send: the 5-joint demo arm at a fixed pose, at rest."""
    msg = joint_state_type()
    msg.name = [f"joint{i}" for i in range(1, 6)]
    msg.position, msg.velocity = [0.1, -0.7, 1.3, 0.5, 0.3], [0.0] * 5
    return msg


def _sleep_until(next_t: float) -> None:
    delay = next_t - time.perf_counter()
    if delay > 0:
        time.sleep(delay)


def _send_paced(pub, msg, rate_hz: float, duration: float, wait_until) -> tuple[int, float, float]:
    """Publish ``msg`` every ``1 / rate_hz`` s for ``duration`` s, ``wait_until(next sample time)``
    between samples (perf_counter time); ``(sent, start, elapsed)``."""
    sent, period = 0, 1.0 / rate_hz
    t_start = time.perf_counter()
    next_t = t_start
    while time.perf_counter() - t_start < duration:
        pub.publish(msg)
        sent += 1
        next_t += period
        wait_until(next_t)
    return sent, t_start, time.perf_counter() - t_start


def _timeit(fn, reps: int) -> dict:
    """Wall time and this thread's CPU time per call (the CPU time does not count the waits a loaded
    machine imposes; the wall time is what a control loop sees)."""
    for _ in range(min(20, reps)):
        fn()
    wall, cpu = np.empty(reps), np.empty(reps)
    for i in range(reps):
        c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
        fn()
        wall[i], cpu[i] = time.perf_counter_ns() - t0, time.thread_time_ns() - c0
    return {
        "median_us": float(np.median(wall) / 1e3),
        "p99_us": float(np.percentile(wall, 99) / 1e3),
        "cpu_median_us": float(np.median(cpu) / 1e3),
        "cpu_p99_us": float(np.percentile(cpu, 99) / 1e3),
    }


def _row(stats) -> str:
    return " ".join(f"{stats[k]:9.1f}" for k in ("median_us", "p99_us", "cpu_median_us", "cpu_p99_us"))


def _chain_cases(n: int, rng):
    from ros_lnn.control.dac import (
        BodyPoseTarget,
        DacController,
        EndEffector,
        EndEffectorTarget,
        VelocityTarget,
    )
    from ros_lnn.control.obstacles import ObstacleField, SphereObstacle, default_control_points
    from ros_lnn.physics.multibody import update
    from ros_lnn.physics.multibody.build import make_chain
    from ros_lnn.physics.multibody.kinematics import forward_kinematics, n_rates, twist_map

    model = make_chain(n, gravity=(0, 0, -9.81), damping=0.05)
    r, quat = forward_kinematics(model, rng.normal(size=3 * (n - 1)) * 0.3)
    nu = twist_map(model, update(model, r, quat, np.zeros(6 * n))) @ rng.normal(size=n_rates(model))
    r_d, q_d = forward_kinematics(model, rng.normal(size=3 * (n - 1)) * 0.3)
    field = ObstacleField(
        (SphereObstacle(np.array([0.5 * n * 0.25, 0.3, 0.0]), 0.1),),
        *default_control_points(model, exclude_bodies=(n - 1,)),
        influence=0.5,
        gain=2.0,
    )
    laws = {
        "I": (DacController(model, "velocity"), VelocityTarget(np.zeros(6 * n), np.zeros(6 * n))),
        "II": (DacController(model, "pose"), BodyPoseTarget(r_d, q_d, np.zeros(6 * n), np.zeros(6 * n))),
        "III": (
            DacController(model, "end_effector", end_effector=EndEffector(n - 1), obstacles=field),
            EndEffectorTarget(r[-1] + 0.05, quat[-1]),
        ),
    }
    return model, (r, quat, nu), laws


def _arm_pipeline(n: int):
    from ros_lnn.control.dac import Gains
    from ros_lnn.control.pipeline import DacPipeline
    from ros_lnn.physics.multibody.build import make_chain

    axes = [[0, 0, 1]] + [[0, 1, 0]] * (n - 1)
    arm = make_chain(
        n,
        joint="revolute",
        base="fixed",
        axes=axes,
        stiffness=[0.0],
        gravity=(0, 0, -9.81),
        length=0.6 / n,
        mass=3.0 / n,
    )
    pipe = DacPipeline(
        arm,
        "end_effector",
        Gains(damping=0.05),
        obstacles=[([0.2, 0.1, 0.2], 0.03)],
        effort_limits=[50.0] * n,
    )
    pipe.set_ee_target([0.3, 0.1, 0.1])
    return pipe


def bench_control(args) -> dict:
    from ros_lnn.physics.multibody import update

    reps = 200 if getattr(args, "quick", False) else 3000
    rng = np.random.default_rng(0)
    results = {
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "reps": reps,
        "steps": {},
    }
    print(
        f"DAC controller step time ({reps} reps each, single thread), µs: wall median / p99, "
        "thread-CPU median / p99"
    )
    print(f"{'model':28s} {'N':>3s} {'law':>4s} {'median':>9s} {'p99':>9s} {'cpu med':>9s} {'cpu p99':>9s}")
    for n in SIZES:
        model, (r, quat, nu), laws = _chain_cases(n, rng)
        for law, (ctl, target) in laws.items():
            stats = _timeit(lambda: ctl.compute(update(model, r, quat, nu), target), reps)
            results["steps"][f"chain{n}_law{law}"] = stats
            print(f"{'free chain (update+law)':28s} {n:3d} {law:>4s} " + _row(stats))
        pipe = _arm_pipeline(n)
        q, qd = rng.normal(size=n) * 0.3, rng.normal(size=n) * 0.3
        stats = _timeit(lambda: pipe.step(q, qd), reps)
        results["steps"][f"arm{n}_pipeline_lawIII"] = stats
        print(f"{'arm pipeline (q,q̇ → u)':28s} {n:3d} {'III':>4s} " + _row(stats))
    wall, cpu = (results["steps"]["chain5_lawIII"][k] for k in ("median_us", "cpu_median_us"))
    print(
        f"target ≤ 200 µs median at N = 5, law III: wall {wall:.0f} µs, thread CPU {cpu:.0f} µs "
        f"({'met' if wall <= 200 else 'not met'} in wall time on this machine now)"
    )
    results["simulator"] = simulator_rates(max(reps // 10, 50))
    if getattr(args, "duration", None) or not getattr(args, "quick", False):
        results["node"] = bench_node_rate(float(getattr(args, "duration", None) or 5.0))
    if not getattr(args, "quick", False):
        from pathlib import Path

        from ros_lnn.demos.dac import simulate_demo, summarize, write_figures

        out = simulate_demo(6.0)
        results["demo"] = summarize(out)
        folder = Path(getattr(args, "output", None) or "reports/dac_demo")
        results["figures"] = [str(p) for p in write_figures(out, folder)]
        print("closed-loop demo: " + ", ".join(f"{k} {v:.3g}" for k, v in results["demo"].items()))
        print("figures: " + ", ".join(results["figures"]))
    results["law_ii_trajectory"] = law_ii_trajectory_against_law_iii(reps)
    results["law_iii_vs_pinocchio"] = law_iii_against_reference(reps)
    return results


def _feed_joint_states(result_queue, namespace: str, duration: float, rate_hz: float) -> None:
    """Another process, as a robot driver would be: joint states at ``rate_hz`` to the controller, and
    a count of the effort commands that come back."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from ros_lnn.nodes.qos import SENSOR_QOS

    rclpy.init(args=[])
    from rclpy.qos import QoSProfile

    probe = rclpy.create_node("bench_dac_feeder")
    received = []
    deep = QoSProfile(
        history=SENSOR_QOS.history,
        depth=1000,
        reliability=SENSOR_QOS.reliability,
        durability=SENSOR_QOS.durability,
    )  # count every output, late or not
    probe.create_subscription(
        Float64MultiArray,
        f"{namespace}/dac_controller/joint_effort_command",
        lambda m: received.append(time.perf_counter()),
        deep,
    )
    pub = probe.create_publisher(JointState, f"{namespace}/joint_states", SENSOR_QOS)
    executor = SingleThreadedExecutor()
    executor.add_node(probe)
    msg = _arm_state(JointState)
    t_wait = time.perf_counter()
    while pub.get_subscription_count() == 0 and time.perf_counter() - t_wait < 10.0:
        executor.spin_once(timeout_sec=0.05)
    time.sleep(0.5)  # discovery of the reverse direction

    def receive_until(next_t: float) -> None:  # receive while waiting for the next sample time
        while True:
            delay = next_t - time.perf_counter()
            if delay <= 0:
                break
            executor.spin_once(timeout_sec=delay)

    sent, t_start, elapsed = _send_paced(pub, msg, rate_hz, duration, receive_until)
    t_end = time.perf_counter()
    while time.perf_counter() - t_end < 0.2:
        executor.spin_once(timeout_sec=0.02)
    n_in_window = sum(1 for t in received if t <= t_start + elapsed + 0.05)
    result_queue.put(
        {
            "sent": sent,
            "sent_rate_hz": sent / elapsed,
            "output_rate_hz": n_in_window / elapsed,
            "outputs_per_input": len(received) / max(sent, 1),
        }
    )
    probe.destroy_node()
    rclpy.try_shutdown()


def bench_node_rate(
    duration: float,
    rate_hz: float = 1000.0,
    feeder: str = "process",
    executor: str | None = None,
    input_queue_depth: int | None = None,
    residual_model: str | None = None,
) -> dict:
    """dac_controller (demo arm, law III) fed joint states at ``rate_hz`` over DDS: input and output
    rates, and the node's own processing time per message.

    ``feeder="process"``: the joint states come from, and the efforts return to, another process (a
    robot driver's situation; the node's process runs only the node). ``feeder="thread"``: feeder and
    node share this process and its GIL — the rclpy executors then cap the rate by themselves (measured:
    ~650 Hz with the controller step replaced by a cached output on the 2-core machine).
    ``executor``: the node's executor as the node process makes it ("single", "events"; None:
    :func:`ros_lnn.nodes.process.executor_kind`), process feeder only;
    ``input_queue_depth``: the node parameter of that name (None: its default); ``residual_model``: a
    learned port for the node (process feeder only)."""
    if feeder == "process":
        return _bench_node_rate_process(duration, rate_hz, executor, input_queue_depth, residual_model)
    return _bench_node_rate_thread(duration, rate_hz)


def _bench_node_rate_process(
    duration: float,
    rate_hz: float,
    executor_kind: str | None,
    input_queue_depth: int | None,
    residual_model: str | None = None,
) -> dict:
    import multiprocessing
    import threading

    import rclpy
    from rclpy.parameter import Parameter

    from ros_lnn.nodes.dac_controller.node import DacControllerNode, start
    from ros_lnn.nodes.params import param as C_param
    from ros_lnn.nodes.process import make_executor

    namespace = "/bench_dac"
    ctx = rclpy.Context()
    rclpy.init(args=[], context=ctx)
    overrides: list[Parameter] = [Parameter("robot_description_timeout_s", value=0.0)]  # the shipped arm
    if input_queue_depth is not None:
        overrides.append(Parameter("input_queue_depth", value=int(input_queue_depth)))
    if residual_model:
        overrides.append(Parameter("residual_model", value=str(residual_model)))
    node = DacControllerNode(namespace=namespace, context=ctx, parameter_overrides=overrides)
    if not start(node):
        raise RuntimeError(node.last_error)
    executor = make_executor(ctx, executor_kind)
    executor.add_node(node)  # after start(): the EventsExecutor serves only subscriptions that exist by then
    stop = threading.Event()
    thread = threading.Thread(
        target=lambda: [executor.spin_once(timeout_sec=0.01) for _ in iter(stop.is_set, True)], daemon=True
    )
    thread.start()
    mp = multiprocessing.get_context("spawn")
    queue = mp.Queue()
    child = mp.Process(target=_feed_joint_states, args=(queue, namespace, duration, rate_hz))
    child.start()
    try:
        got = queue.get(timeout=duration + 60.0)
    finally:
        child.join(timeout=10)
        stop.set()
        thread.join(timeout=2)
    lat = np.array([v for _, v in node.stats.latencies]) * 1e6
    cpu = np.array(node.cpu_times) * 1e6

    def q(x, p):
        return float(np.percentile(x, p)) if x.size else float("nan")

    out = {
        "feeder": "process",
        "executor": type(executor).__name__,
        "residual_model": residual_model or "",
        "input_queue_depth": int(C_param(node, "input_queue_depth")),
        "requested_rate_hz": rate_hz,
        **got,
        "processed": int(node.counts["processed"]),
        "processed_fraction": node.counts["processed"] / max(got["sent"], 1),
        "node_step_median_us": q(lat, 50),
        "node_step_p99_us": q(lat, 99),
        "node_cpu_median_us": q(cpu, 50),
        "node_cpu_p99_us": q(cpu, 99),
    }
    print(
        ("with learned port: " if residual_model else "")
        + "node at {requested_rate_hz:.0f} Hz (feeder in another process, {executor}, queue "
        "{input_queue_depth}): sent {sent_rate_hz:.0f} Hz, processed {processed_fraction:.2%}, "
        "published {output_rate_hz:.0f} Hz ({outputs_per_input:.4f} per input); in-node latency median "
        "{node_step_median_us:.0f} µs, p99 {node_step_p99_us:.0f} µs; callback CPU median "
        "{node_cpu_median_us:.0f} µs, p99 {node_cpu_p99_us:.0f} µs".format(**out)
    )
    node.destroy_node()
    rclpy.try_shutdown(context=ctx)
    return out


def _bench_node_rate_thread(duration: float, rate_hz: float) -> dict:
    import threading

    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from ros_lnn.nodes.dac_controller.node import DacControllerNode, start
    from ros_lnn.nodes.qos import SENSOR_QOS

    ctx = rclpy.Context()
    rclpy.init(args=[], context=ctx)
    from rclpy.parameter import Parameter

    node = DacControllerNode(
        namespace="/bench_dac",
        context=ctx,
        parameter_overrides=[Parameter("robot_description_timeout_s", value=0.0)],  # the shipped arm
    )
    if not start(node):
        raise RuntimeError(node.last_error)
    probe = rclpy.create_node("bench_dac_probe", context=ctx)
    received = []
    probe.create_subscription(
        Float64MultiArray,
        "/bench_dac/dac_controller/joint_effort_command",
        lambda m: received.append(time.perf_counter()),
        SENSOR_QOS,
    )
    pub = probe.create_publisher(JointState, "/bench_dac/joint_states", SENSOR_QOS)
    controller_exec, probe_exec = SingleThreadedExecutor(context=ctx), SingleThreadedExecutor(context=ctx)
    controller_exec.add_node(node)
    probe_exec.add_node(probe)
    stop = threading.Event()
    threads = [
        threading.Thread(
            target=lambda e=e: [e.spin_once(timeout_sec=0.01) for _ in iter(stop.is_set, True)], daemon=True
        )
        for e in (controller_exec, probe_exec)
    ]
    for t in threads:
        t.start()
    time.sleep(1.0)  # discovery
    msg = _arm_state(JointState)
    sent, _, elapsed = _send_paced(pub, msg, rate_hz, duration, _sleep_until)
    time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join(timeout=2)
    lat = np.array([v for _, v in node.stats.latencies]) * 1e6
    out: dict[str, Any] = {
        "feeder": "thread",
        "requested_rate_hz": rate_hz,
        "sent_rate_hz": sent / elapsed,
        "output_rate_hz": len(received) / elapsed,
        "outputs_per_input": len(received) / max(sent, 1),
        "node_step_median_us": float(np.median(lat)) if lat.size else float("nan"),
        "node_step_p99_us": float(np.percentile(lat, 99)) if lat.size else float("nan"),
    }
    print(
        "node at {requested_rate_hz:.0f} Hz (feeder in this process): sent {sent_rate_hz:.0f} Hz, "
        "published {output_rate_hz:.0f} Hz ({outputs_per_input:.2f} per input), per-message work median "
        "{node_step_median_us:.0f} µs, "
        "p99 {node_step_p99_us:.0f} µs".format(**out)
    )
    node.destroy_node()
    probe.destroy_node()
    rclpy.try_shutdown(context=ctx)
    return out


def shipped_residual_model():
    """models/dac_chain_residual.onnx: the learned port of the demo arm with the demo's plant mismatch."""
    from ros_lnn.inference.runtime import default_model_path

    return default_model_path("dac_chain_residual.onnx")


def port_call_time(path, reps: int = 3000) -> dict:
    """The learned port's ONNX Runtime call alone (one sample, I/O binding), µs."""
    from ros_lnn.inference.residual import ResidualRuntime

    port = ResidualRuntime(path)
    rng = np.random.default_rng(0)
    q, qd, qdd = rng.uniform(-1, 1, (3, port.n))
    return _timeit(lambda: port(q, qd, qdd), reps)


def bench_dac_node(args) -> dict:
    """``ros-lnn bench dac-node``: only the dac_controller node at 1 kHz (the demo arm, law III), joint
    states from another process: processed fraction, outputs per input, in-node latency and callback
    CPU per sample (median, p99) — with the certain model only, then with the learned port
    (``--model``, default the shipped models/dac_chain_residual.onnx), and with the port and a 10-deep
    queue. The node's default queue holds the newest state only (a late step skips to it), so its
    processed fraction counts superseded states as not processed; whether the node keeps up with every
    sample at 1 kHz is measured with the deep queue. ``--duration`` seconds per run (default 10; 3 with
    ``--quick``)."""
    import os

    duration = float(getattr(args, "duration", None) or (3.0 if getattr(args, "quick", False) else 10.0))
    model = getattr(args, "model", None) or str(shipped_residual_model())
    load = os.getloadavg()
    out: dict[str, Any] = {
        "model_only": bench_node_rate(duration),
        "learned_port": bench_node_rate(duration, residual_model=model),
        "learned_port_queue_10": bench_node_rate(duration, input_queue_depth=10, residual_model=model),
        "port_call": port_call_time(model, 300 if getattr(args, "quick", False) else 3000),
    }
    out["loadavg_before"] = load
    out["loadavg_after"] = os.getloadavg()
    a, b = out["model_only"]["node_cpu_median_us"], out["learned_port"]["node_cpu_median_us"]
    c = out["port_call"]["cpu_median_us"]
    print("load average before {:.2f}, after {:.2f}".format(load[0], out["loadavg_after"][0]))
    every = out["learned_port_queue_10"]["processed_fraction"]
    print(
        f"dac-node callback CPU per sample (median): model-only {a:.0f} µs, with learned port {b:.0f} µs "
        f"(+{b - a:.0f} µs; the ONNX call alone {c:.0f} µs); 1 kHz needs < 1000 µs and every state "
        f"processed with a 10-deep queue: {'met' if b < 1000.0 and every > 0.99 else 'not met'} "
        f"(processed {every:.2%})"
    )
    return out


def _demo_arm():
    from ros_lnn.shipped import demo_arm_path

    return demo_arm_path().read_text()


def simulator_rates(reps: int, dt: float = 2e-3) -> dict:
    """RK4 steps per second of the N = 5 demo arm: the maximal-coordinate model (KKT of eq 32 at every
    stage, Baumgarte α = β = 20 as the simulator node used) and Pinocchio's ABA in joint coordinates."""
    from ros_lnn.physics.multibody import forward_dynamics, update
    from ros_lnn.physics.multibody.kinematics import forward_kinematics, twist_map
    from ros_lnn.physics.multibody.pin import PinocchioModel
    from ros_lnn.physics.multibody.pin import forward_dynamics as aba
    from ros_lnn.physics.multibody.pin_sim import rk4_step as joint_rk4
    from ros_lnn.physics.multibody.sim import MultibodyState
    from ros_lnn.physics.multibody.sim import rk4_step as body_rk4
    from ros_lnn.physics.multibody.urdf import model_from_urdf

    arm = model_from_urdf(_demo_arm(), "demo arm")
    n = arm.n_bodies
    q, qd = np.array([0.1, -0.7, 1.3, 0.5, 0.3]), np.array([0.3, -0.2, 0.4, 0.1, -0.5])
    r, quat = forward_kinematics(arm, q)
    nu = twist_map(arm, update(arm, r, quat, np.zeros(6 * n))) @ qd
    state = MultibodyState(r, quat, nu)
    zero_port = np.zeros(6 * n)
    pm = PinocchioModel(arm)
    u = np.zeros(n)
    cases = {
        "present_step": lambda: body_rk4(arm, state, dt, None, (20.0, 20.0)),
        "pinocchio_step": lambda: joint_rk4(pm, q, qd, dt),
        "present_forward_dynamics": lambda: forward_dynamics(
            arm, update(arm, r, quat, nu), zero_port, (20.0, 20.0)
        ),
        "pinocchio_forward_dynamics": lambda: aba(pm, q, qd, u),
    }
    out = {name: 1e6 / _timeit(fn, reps)["median_us"] for name, fn in cases.items()}
    print(
        "simulator N = 5 (demo arm, RK4 = 4 forward dynamics): present model (maximal coordinates, KKT + "
        f"Baumgarte) {out['present_step']:.0f} steps/s, Pinocchio (pin.aba, joint coordinates) "
        f"{out['pinocchio_step']:.0f} steps/s ({out['pinocchio_step'] / out['present_step']:.1f}x); forward "
        f"dynamics alone {out['present_forward_dynamics']:.0f}/s vs {out['pinocchio_forward_dynamics']:.0f}/s"
    )
    return out


def law_ii_trajectory_against_law_iii(reps: int, dt: float = 1e-3) -> dict:
    """Per controller callback on the demo arm, timed interleaved in this process (median of ``reps``
    each): law II following a joint trajectory (a multi-sine path, the clock advancing ``dt`` per call so
    that every call asks for a new trajectory sample — no cache hit), the same law the plain way
    (:meth:`DacPipeline.step_body_twists`: the coordinate-free law on ``G``, ``Ġ`` and the target's
    kinematics through :func:`kinematics`), and law III on a fixed target. The two law II paths are
    compared first (port command and efforts, relative)."""
    from ros_lnn.control.closed_loop import multisine_joint_path
    from ros_lnn.control.dac import Gains
    from ros_lnn.control.pipeline import DacPipeline, JointTrajectorySampler
    from ros_lnn.physics.multibody.urdf import model_from_urdf

    arm = model_from_urdf(_demo_arm(), "demo arm")
    q0 = np.array([0.1, -0.7, 1.3, 0.5, 0.3])
    times, path = multisine_joint_path(q0, (0.35, 0.35, 0.3, 0.5, 0.6), 10.0, seed=3, ramp_s=0.5)
    law_ii = DacPipeline(arm, "pose", Gains(damping=0.05), ee_link="tool0")
    law_ii.set_joint_trajectory(times, path)
    law_iii = DacPipeline(arm, "end_effector", Gains(damping=0.05), ee_link="tool0")
    sample = JointTrajectorySampler(times, path)  # the states: near the path, off it by a little
    rng = np.random.default_rng(5)
    count = min(reps, 5000)
    t_k = (1.0 + dt * np.arange(count)).tolist()
    states = [
        (sample(t)[0] + rng.normal(size=5) * 0.02, sample(t)[1] + rng.normal(size=5) * 0.1) for t in t_k
    ]
    law_iii.set_ee_target(law_iii.step(*states[0]).ee_position + np.array([0.05, -0.03, 0.04]))
    diff = 0.0
    for k in range(0, count, max(1, count // 20)):
        fast, plain = law_ii.step(*states[k], t_k[k]), law_ii.step_body_twists(*states[k], t_k[k])
        for a, b in (
            (fast.result.tau_c, plain.result.tau_c),
            (fast.efforts.requested, plain.efforts.requested),
        ):
            diff = max(diff, float(np.abs(a - b).max() / np.abs(b).max()))
    if diff > 1e-9:
        raise RuntimeError(
            f"bench control: law II in joint coordinates and the plain law differ ({diff:.1e})"
        )
    cases = {
        "law_ii_trajectory": lambda k: law_ii.step(*states[k], t_k[k]),
        "law_ii_trajectory_plain": lambda k: law_ii.step_body_twists(*states[k], t_k[k]),
        "law_iii_target": lambda k: law_iii.step(*states[k]),
    }
    for k in range(min(50, count)):
        for fn in cases.values():
            fn(k)
    clock = time.perf_counter_ns
    samples = {name: np.empty(reps) for name in cases}
    for i in range(reps):
        k = i % count
        for name, fn in cases.items():
            t0 = clock()
            fn(k)
            samples[name][i] = clock() - t0
    med = {name: float(np.median(v) / 1e3) for name, v in samples.items()}
    out = {
        **{f"{name}_us": value for name, value in med.items()},
        "ratio_ii_iii": med["law_ii_trajectory"] / med["law_iii_target"],
        "ratio_plain_ii": med["law_ii_trajectory_plain"] / med["law_ii_trajectory"],
        "relative_difference": diff,
    }
    print(
        f"law II on a joint trajectory, N=5 demo arm ({reps} interleaved reps, a new trajectory sample every "
        f"call): {med['law_ii_trajectory']:.1f} us; the same law the plain way (G, Ġ and the target's "
        f"kinematics per call) {med['law_ii_trajectory_plain']:.1f} us ({out['ratio_plain_ii']:.2f}x); "
        f"efforts agree to {diff:.1e}"
    )
    print(
        f"law II trajectory / law III target per callback: {med['law_ii_trajectory']:.1f} / "
        f"{med['law_iii_target']:.1f} us, ratio = {out['ratio_ii_iii']:.2f} (goal <= 1.5: "
        f"{'met' if out['ratio_ii_iii'] <= 1.5 else 'not met'})"
    )
    return out


def law_iii_against_reference(reps: int) -> dict:
    """The pipeline's law III step (package) and the same law written plainly on Pinocchio (reference)
    on the demo arm at one state: efforts compared, then both timed interleaved (median of ``reps``
    each) — with an obstacle whose field holds some control points (every term of the law: the last
    line) and with one whose field holds none."""
    from ros_lnn.control.dac import Gains
    from ros_lnn.control.pinocchio_reference import ReferenceLawIII
    from ros_lnn.control.pipeline import DacPipeline
    from ros_lnn.physics.multibody.urdf import model_from_urdf

    text = _demo_arm()
    arm = model_from_urdf(text, "demo arm")
    q, qd = np.array([0.1, -0.7, 1.3, 0.5, 0.3]), np.array([0.3, -0.2, 0.4, 0.1, -0.5])
    gains = Gains(damping=0.05)
    probe = DacPipeline(arm, "end_effector", gains, ee_link="tool0").step(q, qd)
    target = probe.ee_position + np.array([0.05, -0.03, 0.04])
    results = {}
    for case, offset in (("field_empty", 0.5), ("obstacle_in_field", 0.07)):
        obstacle = (probe.data.r[3] + np.array([0.0, offset, 0.0]), 0.02)  # off link4's CoM; d₀ = 10 cm
        pipe = DacPipeline(
            arm,
            "end_effector",
            gains,
            ee_link="tool0",
            obstacles=[obstacle],
            obstacle_influence=0.1,
            obstacle_eta=5.0,
        )
        pipe.set_ee_target(target)
        ref = ReferenceLawIII(text, "tool0", target, gains, [obstacle], 0.1, 5.0, pipe.efforts.limits)
        out = pipe.step(q, qd)
        u_ref = ref(q, qd)[1]
        diff = float(np.abs(out.efforts.requested - u_ref).max() / np.abs(u_ref).max())
        if (out.result.obstacle_potential > 0) != (case == "obstacle_in_field") or diff > 1e-9:
            raise RuntimeError(
                f"bench control: reference and package disagree (relative {diff:.1e}, obstacle "
                f"potential {out.result.obstacle_potential:.3g})"
            )
        for _ in range(min(50, reps)):
            pipe.step(q, qd), ref(q, qd)
        t_pkg, t_ref = np.empty(reps), np.empty(reps)
        clock = time.perf_counter_ns
        for i in range(reps):
            t0 = clock()
            pipe.step(q, qd)
            t1 = clock()
            ref(q, qd)
            t_ref[i], t_pkg[i] = clock() - t1, t1 - t0
        p, r = float(np.median(t_pkg) / 1e3), float(np.median(t_ref) / 1e3)
        results[case] = {
            "package_us": p,
            "reference_us": r,
            "ratio": p / r,
            "efforts_relative_difference": diff,
        }
    empty = results["field_empty"]
    print(
        f"law III N=5, demo arm, no control point in the obstacle field ({reps} interleaved reps): package "
        f"{empty['package_us']:.1f} us, pinocchio-reference {empty['reference_us']:.1f} us, ratio "
        f"{empty['ratio']:.2f}; efforts agree to {empty['efforts_relative_difference']:.1e}"
    )
    full = results["obstacle_in_field"]
    print(
        f"(below: an obstacle 5 cm off link4, control points in its field, {reps} interleaved reps; "
        "efforts agree "
        f"to {full['efforts_relative_difference']:.1e})"
    )
    print(
        f"law III N=5 step: package {full['package_us']:.1f} us, pinocchio-reference "
        f"{full['reference_us']:.1f} us, "
        f"ratio P/R = {full['ratio']:.2f}"
    )
    return results

"""``ros-lnn bench node``: the estimator node in its own process, driven over DDS by this process.

For each input rate (1 kHz for ``--duration`` s, default 10; then 2 and 5 kHz for a shorter run) this
process publishes JointState messages stamped at send time and listens to ``~/driving_force``:
  * fraction processed: estimator outputs received / joint states sent (and what the node counted);
  * in-node latency: callback start to the last publish, per sample (the node's latency_log), in wall
    time and in the callback thread's CPU time (their difference: time the node was descheduled);
  * end-to-end latency: the input's stamp (taken just before publishing) to receipt of the output here;
  * CPU: the estimator process's user+system time over the run, in % of one core.

The last line compares, from the 1 kHz run, the callback's CPU time per sample with the CPU time of
the model evaluation inside that callback (the runtime's flat single-sample evaluation, timed in place
per sample; medians of both): ``per-sample CPU: callback C us, runtime.evaluate E us, ratio C/E = Y``.
Both are measured under the same conditions (a sample every millisecond, caches as the machine leaves
them between samples). The line before gives ``ServoLnnRuntime.evaluate`` timed back to back in the same
process at the end of the run, with warm caches.

Before the runs, the callback called directly on serialized messages (no DDS, no executor), and where
its time goes: reader, velocity filter, model, the rest of the estimator, the three publishes, and the
rest of the callback (:func:`callback_parts`); then C/E with only the parts no Python callback can skip
(:func:`ratio_floor`).

``--observer``: the effort_observer node instead (:mod:`ros_lnn_lab.bench.observer_node`).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import numpy as np

from ros_lnn.timing import machine_description, percentile, process_cpu_seconds

_cpu_seconds = process_cpu_seconds
_pct = percentile


def run_rate(model: str, rate_hz: float, duration_s: float, workdir: Path, domain_env: dict) -> dict:
    from sensor_msgs.msg import JointState

    from ros_lnn.nodes.qos import SENSOR_QOS
    from ros_lnn.nodes.stamps import ns_to_stamp
    from ros_lnn_lab.harness.node_bench import BenchDriver, deep_rx_qos, launch_node

    ns = f"/bench{os.getpid()}_{int(rate_hz)}"
    log = workdir / f"latency_{int(rate_hz)}.npz"
    params = [f"model_path:={model}", "autostart:=true", f"latency_log:={log}", "servo_command_type:=none"]
    proc = launch_node("ros_lnn.nodes.servo_lnn", ns, params, domain_env)
    driver = BenchDriver("bench_driver", ns, proc)
    node = driver.node
    node.create_subscription(
        JointState, "servo_lnn/driving_force", driver.on_stamped, deep_rx_qos(), raw=True
    )
    pub = node.create_publisher(JointState, "joint_states", SENSOR_QOS)
    driver.spin()
    try:
        driver.wait_matched(pub, f"{ns}/servo_lnn/driving_force", 30, "estimator")
        time.sleep(1.0)  # the estimator's subscription and our subscription matched
        names = ["pendulum_joint", "cart_joint"]
        period = 1.0 / rate_hz
        n = int(round(rate_hz * duration_s))
        sent = 0
        cpu0, wall0, driver0 = _cpu_seconds(proc.pid), time.monotonic(), time.process_time()
        t_next = time.monotonic()
        for k in range(n):
            t = k * period
            msg = JointState(
                name=names,
                position=[0.3 * np.sin(1.3 * t), 0.2 * np.sin(4.4 * t)],
                velocity=[0.39 * np.cos(1.3 * t), 0.88 * np.cos(4.4 * t)],
            )
            # sleep, never spin: on a 2-core machine a spinning driver takes the core the estimator
            # needs. Late wake-ups are caught up (published at once), so the mean rate holds.
            remaining = t_next - time.monotonic()
            if remaining > 0:
                time.sleep(remaining)
            msg.header.stamp = ns_to_stamp(time.time_ns())
            pub.publish(msg)
            sent += 1
            t_next += period
        send_wall = time.monotonic() - wall0
        time.sleep(0.5)  # let the last outputs arrive
        cpu = _cpu_seconds(proc.pid) - cpu0
        wall = time.monotonic() - wall0
        driver_cpu = time.process_time() - driver0
    finally:
        output = driver.close()
    if not log.is_file():
        raise RuntimeError(f"the estimator wrote no latency log; its output:\n{output[-2000:]}")
    data = np.load(log)
    with driver.lock:
        pairs = np.array(driver.received, dtype=np.int64).reshape(-1, 2)
    e2e_us = (pairs[:, 1] - pairs[:, 0]) / 1e3
    in_node_us = data["latency_s"][10:] * 1e6  # first samples include warm-up
    cpu_us = data["cpu_s"][10:] * 1e6 if "cpu_s" in data else np.array([])
    model_us = data["model_cpu_s"][10:] * 1e6 if "model_cpu_s" in data else np.array([])
    evaluate_us = data["evaluate_cpu_s"][100:] * 1e6 if "evaluate_cpu_s" in data else np.array([])
    return {
        "rate_hz": rate_hz,
        "duration_s": duration_s,
        "sent": sent,
        "send_rate_hz": sent / send_wall,
        "node_received": int(data["received"]),
        "node_processed": int(data["processed"]),
        "outputs_received": int(len(pairs)),
        "fraction_processed": int(data["processed"]) / sent,
        "fraction_outputs_received": len(pairs) / sent,
        "processed_rate_hz": int(data["processed"]) / send_wall,
        "in_node_median_us": _pct(in_node_us, 50),
        "in_node_p99_us": _pct(in_node_us, 99),
        "in_node_max_us": float(in_node_us.max()) if in_node_us.size else float("nan"),
        "in_node_cpu_median_us": _pct(cpu_us, 50),
        "in_node_cpu_p99_us": _pct(cpu_us, 99),
        "model_cpu_median_us": _pct(model_us, 50),
        "runtime_evaluate_warm_cpu_median_us": _pct(evaluate_us, 50),
        "e2e_median_us": _pct(e2e_us, 50),
        "e2e_p99_us": _pct(e2e_us, 99),
        "estimator_cpu_pct_of_one_core": 100 * cpu / wall,
        "driver_cpu_pct_of_one_core": 100 * driver_cpu / wall,
        "estimator_cpu_us_per_processed_sample": 1e6 * cpu / max(int(data["processed"]), 1),
    }


def callback_cost(model: str, n: int = 3000) -> dict:
    """The estimator's joint_states callback called directly (no DDS, no executor): what the node's
    own code costs per sample, apart from receiving the message."""
    import rclpy
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState

    from ros_lnn.nodes.servo_lnn.node import ServoLnnNode, start
    from ros_lnn.nodes.stamps import ns_to_stamp

    context = rclpy.Context()
    rclpy.init(args=[], context=context)
    node = ServoLnnNode(
        namespace=f"/bench_cb{os.getpid()}",
        context=context,
        parameter_overrides=[
            Parameter("model_path", value=model),
            Parameter("servo_command_type", value="none"),
            Parameter("max_input_age_s", value=0.0),
        ],
    )  # stamps run ahead
    try:
        if not start(node):
            raise RuntimeError(node.last_error)
        from rclpy.serialization import serialize_message

        base = time.time_ns()
        raws = []
        for k in range(n):
            t = k * 1e-3
            msg = JointState(
                name=["pendulum_joint", "cart_joint"],
                position=[0.3 * np.sin(1.3 * t), 0.2 * np.sin(4.4 * t)],
                velocity=[0.39 * np.cos(1.3 * t), 0.88 * np.cos(4.4 * t)],
            )
            msg.header.stamp = ns_to_stamp(base + k * 1_000_000)
            raws.append(serialize_message(msg))  # the node subscribes to the serialized bytes
        times = np.empty(n)
        for k, raw in enumerate(raws):
            t0 = time.perf_counter()
            node._on_joint_state(raw)
            times[k] = time.perf_counter() - t0
        us = times[100:] * 1e6
        out = {"callback_median_us": _pct(us, 50), "callback_p99_us": _pct(us, 99), "n": int(us.size)}
        assert node.estimator is not None  # started above
        node.estimator.reset()  # the same stamps again, as a new stream
        return out | {"parts_us": callback_parts(node, raws)}
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=context)


def callback_parts(node, raws) -> dict:
    """Where the callback's time goes: each part of the node's joint_states path wrapped with a
    thread-CPU timer (about 1 µs of overhead each), the samples fed once more; medians in µs. ``rest`` is
    the callback minus the parts: clock, stamp checks, the serialized messages filled, bookkeeping."""
    est = node.estimator
    parts = {
        "reader": (node.reader, "read"),
        "filter": (est.velocity_filter, "update"),
        "model": (est.runtime, "evaluate_flat"),
        "estimator": (est, "step_in_place"),
    } | {f"publish {name}": (pub, "publish") for name, pub in node._pubs.items()}
    spent: dict[str, list[int]] = {name: [] for name in parts}
    originals = []

    def timed(fn, sink):
        def call(*args, **kwargs):
            t0 = time.thread_time_ns()
            result = fn(*args, **kwargs)
            sink.append(time.thread_time_ns() - t0)
            return result

        return call

    for name, (obj, attr) in parts.items():
        originals.append((obj, attr, getattr(obj, attr)))
        setattr(obj, attr, timed(getattr(obj, attr), spent[name]))
    total = []
    try:
        for raw in raws:
            t0 = time.thread_time_ns()
            node._on_joint_state(raw)
            total.append(time.thread_time_ns() - t0)
    finally:
        for obj, attr, fn in originals:
            setattr(obj, attr, fn)
    med = {name: float(np.median(v[100:])) / 1e3 for name, v in spent.items() if len(v) > 100}
    out = {"callback": float(np.median(total[100:])) / 1e3}
    # the estimator's own share: its step without the filter and the model inside it
    est_own = med.pop("estimator") - med["filter"] - med["model"]
    out |= {"reader": med.pop("reader"), "filter": med.pop("filter"), "model": med.pop("model")}
    out |= {"estimator (rest)": est_own, "publishes": sum(med.values())}
    out["rest"] = out["callback"] - sum(v for k, v in out.items() if k != "callback")
    return out


def ratio_floor(parts: dict) -> float:
    """The smallest C/E a callback written in Python could reach with these parts: the model plus what
    no such callback can skip (reading the message, the q̈_e filter, the three publishes), with none of
    the node's own bookkeeping, over the model."""
    return (parts["model"] + parts["reader"] + parts["filter"] + parts["publishes"]) / parts["model"]


def bench_node(args) -> dict:
    from ros_lnn.inference.runtime import default_model_path
    from ros_lnn.nodes.process import executor_kind
    from ros_lnn_lab.harness.node_bench import bench_env

    model = str(getattr(args, "model", None) or default_model_path())
    duration = float(getattr(args, "duration", None) or (3.0 if getattr(args, "quick", False) else 10.0))
    short = min(duration, 3.0 if getattr(args, "quick", False) else 5.0)
    env = bench_env()
    rates = [
        (float(r), duration if i == 0 else short)
        for i, r in enumerate(getattr(args, "rates", None) or (1000, 2000, 5000))
    ]
    load = os.getloadavg()
    print(
        f"estimator node benchmark: {machine_description()}; load average {load[0]:.1f}; model "
        f"{Path(model).name}; "
        f"executor {executor_kind()}"
    )
    direct = callback_cost(model)
    print(
        f"callback called directly (no DDS/executor): median {direct['callback_median_us']:.0f} us, "
        f"p99 {direct['callback_p99_us']:.0f} us"
    )
    parts = direct["parts_us"]
    print(
        "  where it goes (thread CPU medians, each part timed): "
        + ", ".join(f"{k} {v:.0f}" for k, v in parts.items())
        + f" us; outside the model {parts['callback'] - parts['model']:.0f} us "
        f"(C/E of this direct call {parts['callback'] / parts['model']:.2f}; with only the reader, the "
        f"filter, the model and the publishes {ratio_floor(parts):.2f})"
    )
    print(
        f"{'rate':>6} {'sent/s':>7} {'processed':>10} {'outputs rx':>10} {'in-node med/p99 [us]':>21} "
        f"{'cb CPU med/p99 [us]':>20} {'e2e med/p99 [us]':>18} {'CPU %':>6} {'CPU us/sample':>13} "
        f"{'driver CPU %':>12}"
    )
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for rate, dur in rates:
            r = run_rate(model, rate, dur, Path(tmp), env)
            results.append(r)
            print(
                f"{rate:6.0f} {r['send_rate_hz']:7.0f} {100 * r['fraction_processed']:9.2f}% "
                f"{100 * r['fraction_outputs_received']:9.2f}% "
                f"{r['in_node_median_us']:10.0f}/{r['in_node_p99_us']:<10.0f} "
                f"{r['in_node_cpu_median_us']:9.0f}/{r['in_node_cpu_p99_us']:<10.0f} "
                f"{r['e2e_median_us']:8.0f}/{r['e2e_p99_us']:<9.0f} "
                f"{r['estimator_cpu_pct_of_one_core']:6.0f} "
                f"{r['estimator_cpu_us_per_processed_sample']:13.0f} {r['driver_cpu_pct_of_one_core']:12.0f}",
                flush=True,
            )
    first = results[0]
    verdict = (
        f"{first['rate_hz']:.0f} Hz: {100 * first['fraction_processed']:.2f} % processed (target >= 99.9 % "
        f"at 1 kHz), in-node p99 {first['in_node_p99_us']:.0f} us (target <= 1000 us)"
    )
    top = max(results, key=lambda r: r["processed_rate_hz"])
    print(verdict)
    print(
        f"highest processed rate: {top['processed_rate_hz']:.0f} Hz (driven at {top['rate_hz']:.0f} Hz); "
        "above it inputs are dropped in the best-effort queue; load average at the end "
        f"{os.getloadavg()[0]:.1f}"
    )
    callback, evaluate = first["in_node_cpu_median_us"], first["model_cpu_median_us"]
    print(
        f"ServoLnnRuntime.evaluate back to back in the node process after the run (warm caches): "
        f"{first['runtime_evaluate_warm_cpu_median_us']:.0f} us; ratio of the callback to it "
        f"{callback / first['runtime_evaluate_warm_cpu_median_us']:.2f}"
    )
    print(
        f"per-sample CPU: callback {callback:.0f} us, runtime.evaluate {evaluate:.0f} us, "
        f"ratio C/E = {callback / evaluate:.2f}"
    )
    process = first["estimator_cpu_us_per_processed_sample"]
    print(
        f"process CPU per sample at {first['rate_hz']:.0f} Hz: {process:.0f} us, "
        f"{process / callback:.2f} x the callback's {callback:.0f} us (goal <= 2)"
    )
    return {
        "machine": machine_description(),
        "load_average_1min": load[0],
        "model": Path(model).name,
        "callback_direct": direct,
        "executor": executor_kind(),
        "load_average_1min_end": os.getloadavg()[0],
        "runs": results,
        "saturation_processed_rate_hz": top["processed_rate_hz"],
        "callback_cpu_us": callback,
        "process_over_callback": process / callback,
        "runtime_evaluate_cpu_us": evaluate,
        "ratio": callback / evaluate,
    }

"""Live demo: the simulator and the estimator in one process on one rclpy executor (a supported
deployment mode: the same nodes also run as separate processes), printing a live table of input
rate, processing latency and estimated vs true Q_e, q̈_f and E.

Topics are the real ones (``/joint_states``, ``/servo_lnn/...``, ``/sim/ground_truth/...``) over DDS,
so ``ros2 topic echo`` from another shell sees the demo. By default the estimator takes the servo
accelerations from the simulator's ``/sim/servo_plan`` (commanded, as from a motion planner); with
``estimate_qdd=True`` it estimates them from the joint-state stream instead.
"""

from __future__ import annotations

import os
import sys
import time
from collections import deque

import numpy as np


class _Comparison:
    """Pairs estimator outputs with the simulator's ground truth by stamp."""

    def __init__(self, keep: int = 4000):
        self.est: dict = {}
        self.true: dict = {}
        self.pairs: deque = deque(maxlen=keep)

    def add(self, side: str, key: int, field: str, value) -> None:
        book = self.est if side == "est" else self.true
        entry = book.setdefault(key, {})
        entry[field] = np.asarray(value, dtype=float)
        other = (self.true if side == "est" else self.est).get(key)
        if other is not None and len(entry) == 3 and len(other) == 3:
            e, t = (entry, other) if side == "est" else (other, entry)
            self.pairs.append((time.monotonic(), e, t))
            self.est.pop(key, None)
            self.true.pop(key, None)
        if len(book) > 10000:  # unmatched leftovers (e.g. warm-up samples)
            for k in sorted(book)[:5000]:
                book.pop(k)

    def window(self, seconds: float):
        cut = time.monotonic() - seconds
        return [(e, t) for stamp, e, t in self.pairs if stamp >= cut]


#: The default joint-state rate: one executor thread runs the simulator (RK4 and four messages per step), the
#: estimator and the comparison, about 1.5 ms of CPU per step on a 2-core machine of the test kind; 250 Hz
#: leaves that thread more than half a core of headroom, so it holds on a loaded machine too.
DEFAULT_RATE_HZ = 250.0


def run_live_demo(
    duration_s: float = 10.0,
    model_path=None,
    rate_hz: float = DEFAULT_RATE_HZ,
    *,
    estimate_qdd: bool = False,
    print_period_s: float = 1.0,
    out=None,
    sim_overrides=None,
    estimator_overrides=None,
    summary: dict | None = None,
) -> int:
    """Run for ``duration_s`` seconds; returns 0 when the estimator produced outputs that were
    compared with the truth, 1 otherwise. ``out``: stream for the table (default stdout);
    ``summary``: a dict filled with the final counts and mean errors."""
    import rclpy
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from ..inference.runtime import default_model_path
    from ..nodes.messages import ENERGY_TYPE, PREDICTION_TYPE, energy_dict, prediction_arrays
    from ..nodes.process import EXECUTOR_ENV, make_executor
    from ..nodes.qos import SENSOR_QOS
    from ..nodes.servo_lnn.node import ServoLnnNode, start
    from ..nodes.sim.node import SimNode
    from ..nodes.stamps import stamp_ns

    out = out or sys.stdout
    model_path = str(model_path or default_model_path())
    context = rclpy.Context()
    rclpy.init(args=[], context=context)
    nodes: list[Node] = []
    try:
        sim_params = [Parameter("rate_hz", value=float(rate_hz))] + [
            Parameter(k, value=v) for k, v in (sim_overrides or {}).items()
        ]
        sim = SimNode(context=context, parameter_overrides=sim_params)
        nodes.append(sim)
        est_params = [
            Parameter("model_path", value=model_path),
            Parameter("servo_joints", value=list(sim.servo_names)),
            Parameter("free_joints", value=list(sim.free_names)),
        ] + [Parameter(k, value=v) for k, v in (estimator_overrides or {}).items()]
        remap = [] if estimate_qdd else ["--ros-args", "-r", "servo_commands:=/sim/servo_plan"]
        est = ServoLnnNode(context=context, parameter_overrides=est_params, cli_args=remap or None)
        nodes.append(est)
        if not start(est):
            print("live demo: the estimator could not be configured (see the error above)", file=sys.stderr)
            return 1
        probe = rclpy.create_node("live_demo_probe", context=context)
        nodes.append(probe)
        comp = _Comparison()
        assert est.runtime is not None  # start() configured it
        nf = est.runtime.n_f

        def sub(topic, msg_type, side, handler):
            probe.create_subscription(msg_type, topic, lambda m: handler(side, m), SENSOR_QOS)

        def on_pred(side, m):  # q̈ (q̈_f first), Q (Q_e last)
            stamp = stamp_ns(m.header.stamp)
            p = prediction_arrays(m)
            comp.add(side, stamp, "qdd_f", p["qdd"][:nf])
            comp.add(side, stamp, "Q_e", p["Q"][nf:])

        def on_energy(side, m):
            d = energy_dict(m)
            comp.add(side, int(d["stamp_sec"]) * 1_000_000_000 + int(d["stamp_nanosec"]), "E", d["E"])

        for side, prefix in (("est", "/servo_lnn"), ("true", "/sim/ground_truth")):
            sub(f"{prefix}/prediction", PREDICTION_TYPE, side, on_pred)
            sub(f"{prefix}/energy", ENERGY_TYPE, side, on_energy)

        # the demo's own inputs never flood: the cheaper EventsExecutor unless ROS_LNN_EXECUTOR says
        executor = make_executor(context, os.environ.get(EXECUTOR_ENV, "events"))
        for node in nodes:
            executor.add_node(node)
        qdd_src = "estimated from joint_states" if estimate_qdd else "commanded (/sim/servo_plan)"
        print(
            f"live demo: crane simulator at {rate_hz:.0f} Hz + servo_lnn estimator ({est.runtime.model_id}), "
            f"one process, {duration_s:.0f} s; q̈_e {qdd_src}",
            file=out,
        )
        header = (
            f"{'t[s]':>5} {'sim Hz':>6} {'rate[Hz]':>8} {'lat med/p99[us]':>16} | "
            f"{'Q_e est':>8} {'true':>8} {'|err|':>7} |"
            f" {'q̈_f est':>8} {'true':>8} {'|err|':>7} | {'E-E0 est':>8} {'true':>8} {'|err|':>7}"
        )
        print(header, file=out)
        print("-" * len(header), file=out)
        t_start = time.monotonic()
        cpu_start = time.process_time()
        published = [sim.counts["published"]]
        next_print = t_start + print_period_s
        total_pairs = 0
        errors: dict[str, list[float]] = {"Q_e": [], "qdd_f": [], "E": []}
        energy_zero = None
        while time.monotonic() - t_start < duration_s:
            executor.spin_once(timeout_sec=0.01)
            now = time.monotonic()
            if now >= next_print:
                next_print += print_period_s
                window = comp.window(print_period_s)
                total_pairs += len(window)
                diag = est.diagnostics_values()
                published.append(sim.counts["published"])
                sim_hz = (published[-1] - published[-2]) / print_period_s
                if not window:
                    print(
                        f"{now - t_start:5.1f} {sim_hz:6.0f} {diag['input_rate_hz']:8.1f}   (waiting for "
                        "outputs)",
                        file=out,
                    )
                    continue
                e, t = window[-1]
                row = [
                    f"{now - t_start:5.1f} {sim_hz:6.0f} {diag['input_rate_hz']:8.1f} "
                    f"{diag['latency_median_us']:7.0f}/{diag['latency_p99_us']:<8.0f}"
                ]
                if energy_zero is None:
                    energy_zero = (float(window[0][0]["E"]), float(window[0][1]["E"]))
                for key in ("Q_e", "qdd_f", "E"):
                    # E is compared as E − E₀ (first compared sample): a learned potential is defined
                    # only up to an additive constant.
                    z_e, z_t = energy_zero if key == "E" else (0.0, 0.0)
                    err = float(np.mean([np.max(np.abs((a[key] - z_e) - (b[key] - z_t))) for a, b in window]))
                    errors[key].append(err)
                    row.append(f"{e[key].ravel()[0] - z_e:8.3f} {t[key].ravel()[0] - z_t:8.3f} {err:7.4f}")
                print(" | ".join(row), file=out, flush=True)
        wall, cpu = time.monotonic() - t_start, time.process_time() - cpu_start
        achieved = sim.counts["published"] / wall
        print(rate_verdict(rate_hz, achieved, cpu / wall, sim.counts["skipped_publishes"]), file=out)
        diag = est.diagnostics_values()
        print(
            f"done: {diag['processed']} of {diag['received']} joint states processed "
            f"({diag['warming_up']} during filter warm-up), {total_pairs} "
            "outputs compared with the truth; mean |error| Q_e "
            f"{np.mean(errors['Q_e']) if errors['Q_e'] else float('nan'):.4g}, "
            f"q̈_f {np.mean(errors['qdd_f']) if errors['qdd_f'] else float('nan'):.4g}, "
            f"E-E0 {np.mean(errors['E']) if errors['E'] else float('nan'):.4g}",
            file=out,
        )
        if summary is not None:
            summary.update(diag)
            summary.update(
                compared=total_pairs,
                rows=len(errors["Q_e"]),
                achieved_rate_hz=achieved,
                cpu_fraction=cpu / wall,
                **{
                    f"mean_abs_error_{k}": float(np.mean(v)) if v else float("nan") for k, v in errors.items()
                },
            )
        if total_pairs == 0:
            print(
                "live demo: no estimator output could be compared with the simulator's truth", file=sys.stderr
            )
            return 1
        return 0
    finally:
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown(context=context)


def rate_verdict(rate_hz: float, achieved_hz: float, cpu_fraction: float, skipped: int) -> str:
    """What rate the demo held, and why not when it did not (with a rate that would hold here)."""
    import os

    if achieved_hz >= 0.95 * rate_hz:
        return (
            f"rate: the simulator held {rate_hz:.0f} Hz ({achieved_hz:.0f} Hz published); this process used "
            f"{100 * cpu_fraction:.0f} % of a core"
        )
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    holds = max(50, int(0.8 * achieved_hz // 50) * 50)
    return (
        f"rate: the simulator published {achieved_hz:.0f} Hz of the {rate_hz:.0f} Hz asked ({skipped} steps "
        "integrated without publishing): simulator, estimator and comparison share one executor thread, "
        "which "
        f"used {100 * cpu_fraction:.0f} % of a core, on a machine with load average {load:.1f} on {cores} "
        "cores; "
        f"--rate {holds} holds here"
    )


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--model", default=None)
    parser.add_argument("--rate", type=float, default=DEFAULT_RATE_HZ)
    parser.add_argument("--estimate-qdd", action="store_true")
    args = parser.parse_args(argv)
    return run_live_demo(args.duration, args.model, args.rate, estimate_qdd=args.estimate_qdd)


if __name__ == "__main__":
    sys.exit(main())

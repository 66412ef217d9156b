"""``ros-lnn bench flood``: servo_lnn, dac_controller and effort_observer (the URDF-nominal observer of
the shipped Panda), each in its own process on the executor of ``ROS_LNN_EXECUTOR`` (default
``intake``), under a ``joint_states`` flood (``--rate`` Hz, default 20 000, for ``--duration`` s,
default 30): the p99 latency of their get_parameters / lifecycle get_state services during the flood
(within 100 ms) and their resident memory before, at the peak and 5 s after it (within 10 % of the
start).
"""

from __future__ import annotations

import os


def bench_flood(args) -> dict:
    from ros_lnn.nodes.process import EXECUTOR_ENV, executor_kind
    from ros_lnn.timing import machine_description
    from ros_lnn_lab.harness import faults
    from ros_lnn_lab.harness.flood import effort_observer_target, measure_flood

    duration = float(getattr(args, "duration", None) or 30.0)
    rate = float(getattr(args, "rate", None) or 20000.0)
    env = dict(os.environ)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    env["ROS_DOMAIN_ID"] = os.environ["ROS_DOMAIN_ID"] = str(150 + os.getpid() % 80)
    model = getattr(args, "model", None) or ""
    print(
        f"joint_states flood: {machine_description()}; load average {os.getloadavg()[0]:.1f}; "
        f"{rate:.0f} Hz for {duration:.0f} s; {EXECUTOR_ENV} {executor_kind()} (the executor each node "
        "ran: on its line)",
        flush=True,
    )
    results = []
    targets = (
        (faults.servo_lnn_target(model), "crane"),
        (faults.dac_controller_target(), "arm"),
        (effort_observer_target(), "panda"),
    )
    for target, kind in targets:
        r = measure_flood(target, kind, rate_hz=rate, duration_s=duration, env=env)
        results.append(r)
        f = r["flood"]
        print(
            f"{r['node']:<15} executor {r['executor']}; sent {r['sent']} ({r['sent_rate_hz']:.0f} Hz), "
            f"node received {r['received']}, "
            f"processed {r['processed']}; services idle p99 {r['idle']['p99_ms']:.1f} ms, during the flood "
            f"p50 {f['p50_ms']:.1f} / p99 {f['p99_ms']:.1f} / max {f['max_ms']:.1f} ms ({f['calls']} calls, "
            f"{f['missed']} unanswered), after p99 {r['after']['p99_ms']:.1f} ms; "
            f"RSS {r['rss_start_mib']:.1f} → "
            f"peak {r['rss_peak_mib']:.1f} → {r['rss_after_mib']:.1f} MiB ({r['rss_after_ratio']:.3f}); "
            f"{'PASS' if r['passed'] else 'FAIL'}",
            flush=True,
        )
    return {"machine": machine_description(), "rate_hz": rate, "duration_s": duration, "nodes": results}

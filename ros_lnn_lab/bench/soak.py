"""``ros-lnn bench soak``: the nodes of a robot for ``--duration`` seconds (default 180; 1800 for the
half-hour figure), each in its own process, with faults of the fault harness at random intervals
(:mod:`ros_lnn_lab.harness.soak`), after one round of every case (a warm-up, its faults counted). Prints a
line a minute, every failed case, and last
``soak: S s, F faults injected, C crashed, H hung, M missed stops, RSS growth G %, latency p99
first/last 5 min A/B ms`` ("fifth (N s)" instead of "5 min" for a run under 25 minutes). Goals: G ≤ 2 %,
B ≤ 1.5 A, zeros elsewhere."""

from __future__ import annotations

import os

DEFAULT_DURATION_S = 180.0


def bench_soak(args) -> dict:
    from ros_lnn.timing import machine_description
    from ros_lnn_lab.harness.soak import run_soak

    duration = float(getattr(args, "duration", None) or DEFAULT_DURATION_S)
    rate = float(getattr(args, "rate", None) or 200.0)
    env = dict(os.environ)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    env["ROS_DOMAIN_ID"] = os.environ["ROS_DOMAIN_ID"] = str(150 + os.getpid() % 80)
    print(
        f"soak: {machine_description()}; load average {os.getloadavg()[0]:.1f}; {duration:.0f} s; crane "
        f"sim → servo_lnn and dac_chain_sim ← effort_watchdog ← dac_controller with effort_observer at "
        f"{rate:g} Hz, each its own process; a fault every 5 s on average",
        flush=True,
    )
    result = run_soak(duration, rate_hz=rate, env=env, report=lambda line: print(line, flush=True))
    failed = [v for v in result.verdicts if not v.passed]
    a, b = result.latency_p99_ms()
    distinct = len({(v.target, v.case) for v in result.verdicts})
    print(
        f"{len(result.verdicts)} faults ({distinct} distinct cases), {len(failed)} failed; RSS "
        f"{result.rss[0][1] / 2**20:.1f} -> {result.rss[-1][1] / 2**20:.1f} MiB; load average at the end "
        f"{os.getloadavg()[0]:.1f}"
    )
    by_node = result.rss_by_node()
    print(
        "RSS by process, end of the first window -> end: "
        + ", ".join(f"{name} {a / 2**20:.1f} -> {b / 2**20:.1f} MiB" for name, (a, b) in by_node.items())
    )
    line = result.line()
    print(line)
    return {
        "machine": machine_description(),
        "duration_s": duration,
        "faults": len(result.verdicts),
        "failed": [f"{v.target}: {v.case}: {v.detail.strip()[:200]}" for v in failed],
        "rss_growth_percent": result.rss_growth_percent(),
        "rss_by_node_mib": {name: [a / 2**20, b / 2**20] for name, (a, b) in by_node.items()},
        "latency_p99_ms": [a, b],
        "summary": line,
    }

"""``ros-lnn bench fault``: the fault-injection cases of ros_lnn_lab/harness/faults.py as a soak.

servo_lnn, sim, dac_controller, effort_watchdog and effort_observer run in their own processes on a ROS
domain of their own; every case
runs once, then rounds in random order until ``--duration`` seconds have passed (default 120; ``--quick``:
one round). Prints a line per case as it runs when it fails, the table of cases at the end, and as its
lines ``fault cases: N tried, C crashed, H hung, F non-finite outputs`` (N distinct cases) and
``safety: M missed stops, A accepted bad values, T tracebacks`` (issue 23: a stop that did not come in
time, a value that must be refused and was taken, traceback lines the nodes printed).
"""

from __future__ import annotations

import os
from collections import defaultdict


def bench_fault(args) -> dict:
    from ros_lnn.timing import machine_description
    from ros_lnn_lab.harness import fault_registry, faults

    quick = bool(getattr(args, "quick", False))
    duration = float(getattr(args, "duration", None) or (0.0 if quick else 120.0))
    env = dict(os.environ)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    env["ROS_DOMAIN_ID"] = os.environ["ROS_DOMAIN_ID"] = str(150 + os.getpid() % 80)
    model = getattr(args, "model", None) or ""
    targets = [
        faults.servo_lnn_target(model) if name == "servo_lnn" else build()
        for name, build in fault_registry.TARGETS.items()
    ]
    cases = [case for build in fault_registry.CASES.values() for case in build()]
    print(
        f"fault injection: {machine_description()}; load average {os.getloadavg()[0]:.1f}; "
        f"{len(cases)} cases on {', '.join(t.name for t in targets)}; "
        f"{'one round' if not duration else f'rounds for {duration:.0f} s'}",
        flush=True,
    )

    def report(verdict) -> None:
        if not verdict.passed:
            print(
                f"  FAILED {verdict.target}: {verdict.case}: crashed={verdict.crashed} hung={verdict.hung} "
                f"non_finite={verdict.non_finite} counted={verdict.counted} resumed={verdict.resumed} "
                f"{verdict.detail.strip()[:300]}",
                flush=True,
            )

    driver = faults.Driver(targets, env=env)
    try:
        summary = faults.run_cases(driver, cases, rounds=1, duration_s=duration, report=report)
    finally:
        driver.close()
    table = defaultdict(list)
    for verdict in summary.verdicts:
        table[(verdict.target, verdict.case)].append(verdict)
    expect = {(c.target, c.name): c.expect for c in cases}
    print(f"{'node':<15} {'case':<42} {'expect':<34} {'runs':>4} {'passed':>6} {'max s':>6}")
    for (target, name), runs in table.items():
        print(
            f"{target:<15} {name:<42} {expect[(target, name)]:<34} {len(runs):>4} "
            f"{sum(v.passed for v in runs):>6} {max(v.seconds for v in runs):6.2f}"
        )
    failed = sum(not v.passed for v in summary.verdicts)
    print(
        f"{len(summary.verdicts)} case runs, {failed} failed (not counted, not resumed or a wrong reply); "
        f"load average at the end {os.getloadavg()[0]:.1f}"
    )
    line, safety = summary.line(), summary.safety_line()
    print(line)
    print(safety)
    return {
        "machine": machine_description(),
        "runs": len(summary.verdicts),
        "failed": failed,
        "summary": line,
        "safety": safety,
        "cases": [
            {"node": t, "case": n, "runs": len(v), "passed": sum(x.passed for x in v)}
            for (t, n), v in table.items()
        ],
    }

"""``ros-lnn bench collision``: does an arm model identified from the robot's own recording detect
smaller collisions than the URDF's nominal model, at zero false alarms?

The generator (:mod:`ros_lnn.arm.simulation`): the Panda at 1 kHz whose true inertial parameters differ
from its URDF (masses ±20 %, centres of mass ±2 cm, inertias ±30 %), with joint friction outside the
model's law (Coulomb with a wider tanh, viscous, offset, a position ripple), sensor noise on q, q̇ and
τ, tracking multi-sine references with a PD loop through the URDF's mass matrix.

1. Train: a pulse-free recording (``--duration`` s, default 60) → :func:`ros_lnn.arm.training.train_arm`
   (least squares on the base parameters + friction, the learned residual if it helps on validation).
2. Calibrate: another pulse-free recording of the same length → the momentum observer (gain ``K``)
   of each model → per-joint thresholds for 0.1 false alarms per hour
   (:func:`ros_lnn.arm.observer.calibrate`), each observer its own.
3. Detect: a third recording with scripted external joint-torque pulses (one per joint at 4, 7 and
   12 % of its effort limit, 80–250 ms, random sign, every 4 s) and free motion between them; each
   observer + its thresholds. A pulse is detected when a collision begins within its duration + 0.1 s;
   any other onset is a false alarm (counted over the free time S: the run less the pulse windows).

Last line: ``collision detection: N pulses, detected D, false alarms F in S s, median delay T ms,
smallest detected P % of max torque; URDF-nominal observer: D0 detected, F0 false alarms``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from ros_lnn.arm.simulation import PANDA_JOINTS, panda_generator

GAIN = 150.0
FRACTIONS = (0.04, 0.07, 0.12)
SETTLE_S = 0.1
RATE_PER_H = 0.1


JOINTS = PANDA_JOINTS
generator = panda_generator


def bench_collision(args) -> dict:
    from ros_lnn.arm import observer as ob
    from ros_lnn.arm import simulation as sim
    from ros_lnn.arm.mapping import ArmMapping
    from ros_lnn.arm.model import ArmModel

    duration = float(args.duration or (20.0 if args.quick else 60.0))
    start = time.perf_counter()
    arm, truth, friction, noise = generator()
    kw = {"nominal": arm, "friction": friction, "noise": noise}

    def say(text):
        print(f"[{time.perf_counter() - start:6.1f} s] {text}", flush=True)

    say(f"generator: Panda URDF, true masses {_masses(truth)} kg vs URDF {_masses(arm)} kg; friction, noise")
    train_run = sim.simulate_arm(truth, duration, seed=11, **kw)
    say(f"training recording: {train_run.duration:.0f} s at 1 kHz, no pulses")
    from ros_lnn.arm.residual import ResidualOptions
    from ros_lnn.arm.training import train_arm

    mapping = ArmMapping(actuated_joints=JOINTS)
    with tempfile.TemporaryDirectory() as tmp:
        model_path = Path(args.model) if args.model else Path(tmp) / "panda_bench.onnx"
        if not args.model:
            options = ResidualOptions(epochs=40 if args.quick else 150, time_limit_s=20 if args.quick else 60)
            result = train_arm(
                [train_run.recording("train")], arm.urdf_text, mapping, out=model_path, options=options
            )
            rre = result.metrics["validation_torque_rre_percent_fit"]
            say(
                f"trained in {result.train_s:.0f} s: residual {'on' if result.residual_enabled else 'off'}; "
                f"validation torque error of the fit {np.round(rre, 1).tolist()} %"
            )
        model = ArmModel(model_path)
        observers = {"identified": ob.MomentumObserver(model, GAIN), "urdf": ob.MomentumObserver(arm, GAIN)}
        calib_run = sim.simulate_arm(truth, duration, seed=12, **kw)
        say(f"calibration recording: {calib_run.duration:.0f} s, no pulses")
        thresholds = {}
        for name, obs in observers.items():
            r = ob.run_observer(obs, calib_run.t, calib_run.q, calib_run.qd, calib_run.tau)
            keep = calib_run.t > 0.5
            thresholds[name] = ob.calibrate(
                [(calib_run.t[keep], r[keep], calib_run.qd[keep])], JOINTS, false_alarm_rate_per_h=RATE_PER_H
            )
            say(
                f"{name} observer thresholds (static N·m): {np.round(thresholds[name].static, 2).tolist()}, "
                f"slope {np.round(thresholds[name].velocity_slope, 2).tolist()}"
            )
        limits = arm.effort_limits()
        spacing = 4.0
        fractions = FRACTIONS
        count = len(fractions) * arm.n
        test_s = max(duration, 2.0 + count * spacing + 2.0) if not args.quick else 2.0 + count * spacing
        pulses = sim.pulse_schedule(limits, fractions, start=2.0, spacing=spacing, seed=13)
        test_run = sim.simulate_arm(truth, test_s, seed=13, pulses=pulses, **kw)
        say(f"test recording: {test_run.duration:.0f} s with {len(pulses)} pulses")
        found = {}
        for name, obs in observers.items():
            r = ob.run_observer(obs, test_run.t, test_run.q, test_run.qd, test_run.tau)
            keep = test_run.t > 0.5
            found[name] = ob.score_detection(
                test_run.t[keep], r[keep], test_run.qd[keep], thresholds[name], pulses, SETTLE_S
            )
    ident, urdf = found["identified"], found["urdf"]
    detected = [d is not None for d in ident["delays"]]
    delays_ms = [1e3 * d for d in ident["delays"] if d is not None]
    sizes = [100 * abs(p.magnitude) / limits[p.joint] for p in pulses]
    smallest = min((s for s, d in zip(sizes, detected) if d), default=float("nan"))
    for name, res in found.items():
        missed = [f"j{p.joint + 1} {s:.0f} %" for p, s, d in zip(pulses, sizes, res["delays"]) if d is None]
        say(f"{name}: missed {missed or 'none'}; false alarms at {res['false_alarm_times'] or 'none'}")
    figures = {
        "pulses": len(pulses),
        "detected": int(sum(detected)),
        "false_alarms": ident["false_alarms"],
        "free_s": ident["free_s"],
        "median_delay_ms": float(np.median(delays_ms)) if delays_ms else float("nan"),
        "smallest_detected_percent": smallest,
        "urdf_detected": int(sum(d is not None for d in urdf["delays"])),
        "urdf_false_alarms": urdf["false_alarms"],
        "gain": GAIN,
        "false_alarm_rate_per_h": RATE_PER_H,
        "thresholds": {k: v.to_dict() for k, v in thresholds.items()},
        "runtime_s": time.perf_counter() - start,
    }
    f = figures
    print(
        f"collision detection: {f['pulses']} pulses, detected {f['detected']}, false alarms "
        f"{f['false_alarms']} in {f['free_s']:.0f} s, median delay {f['median_delay_ms']:.1f} ms, "
        f"smallest detected {f['smallest_detected_percent']:.1f} % of max torque; URDF-nominal observer: "
        f"{f['urdf_detected']} detected, {f['urdf_false_alarms']} false alarms"
    )
    return figures


def _masses(arm) -> list:
    return [round(float(arm.body_parameters()[10 * i]), 2) for i in range(arm.n)]

"""``ros-lnn bench collision --at-rest``: a person pushing a *standing* arm with stiction — does the arm
model with friction memory detect smaller pushes than the least-squares fit, at zero false alarms?

The simulated Panda of ``bench collision`` (true parameters off the URDF, sensor noise, a PD loop with
the URDF's gravity compensation at 1 kHz), its joint friction the LuGre model
(:class:`ros_lnn.arm.simulation.StickyFriction`: presliding, breakaway, a torque held at rest that
remembers the last motion — not the model's law), running point-to-point programs: moves of several
sizes with reversals, each ending in a dwell of 1–3 s.

1. Train on an exciting multisine and a point-to-point program (two recordings, ``--duration`` s each):
   the *learned* model (:func:`ros_lnn.arm.training.train_arm`: fit + friction memory + residual) and
   the *least-squares fit* (the regressor fit with memoryless friction, no residual).
2. Calibrate each model's momentum observer (K = 50/s, 0.1 false alarms per hour) on another
   point-to-point recording without contact.
3. Push: a point-to-point recording with one push per dwell — every joint at 3, 4.5, 6, 8, 10 and
   12 % of its effort limit, 0.15–0.3 s, random sign, 0.2 s into the dwell; free motion and standing
   between them for the false alarms.

Per model, the missed pushes with how much of each changed the measured torque on its joint and how far
the joint moved (:func:`torque_reach`: a push stiction holds never reaches the drive's torque), and how
many of the pushes that reached it by at least the joint's rest threshold were detected.

Last line: ``collision detection at rest: N pushes; learned: detected D, false alarms F in S s,
smallest detected P %; least-squares fit: detected D0, false alarms F0, smallest detected P0 %; ratio
P/P0 = X``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from ros_lnn.arm.simulation import PANDA_JOINTS as JOINTS

RATE_PER_H = 0.1  # false alarms per hour the thresholds are calibrated for
SETTLE_S = 0.1  # a push counts as detected up to this long after it ended

#: the node's default gain: at rest the momentum observer's noise (measured q̇ through M(q)) grows with K
GAIN = 50.0

FRACTIONS = (0.03, 0.045, 0.06, 0.08, 0.10, 0.12)


def torque_reach(t, q, tau, push, before_s: float = 0.15) -> tuple[float, float]:
    """How much of ``push`` the sensors could see: the change of the measured torque on its joint (the
    mean over the push's second half against the mean over ``before_s`` before it; N·m, signed so that a
    push the drive takes up in full gives ``|push.magnitude|``) and the joint's largest displacement
    during the push (rad). A push that stiction holds without motion leaves the drive's torque — and so
    every torque-based observer — unchanged."""
    j = push.joint
    before = (t >= push.start - before_s) & (t < push.start)
    during = (t >= push.start + 0.5 * push.duration) & (t < push.end)
    window = (t >= push.start) & (t < push.end)
    if not (before.any() and during.any()):
        return float("nan"), float("nan")
    change = float(np.mean(tau[during, j]) - np.mean(tau[before, j]))
    moved = float(np.max(np.abs(q[window, j] - np.mean(q[before, j]))))
    return -change * float(np.sign(push.magnitude)), moved


def _program(gen_arm, duration: float, seed: int, dwell=(1.0, 3.0)):
    from ros_lnn.arm.fourier import Limits
    from ros_lnn.arm.programs import point_to_point

    lo, hi = gen_arm.position_limits()
    vel = gen_arm.velocity_limits()
    limits = Limits(lo, hi, vel, 3.0 * vel)
    return point_to_point(limits, duration, seed=seed, dwell=dwell, amplitudes=(0.002, 0.15), speed=0.4)


def _reference(prog):
    def ref(t: float):
        q, qd, _ = prog.evaluate(np.array([t]))
        return q[0], qd[0]

    return ref


def pushes_in_dwells(prog, effort_limits, fractions=FRACTIONS, seed: int = 0):
    """One push per dwell of ``prog`` (in order), every joint at every fraction of its effort limit in a
    shuffled order; as many as the program has dwells."""
    from ros_lnn.arm.simulation import Pulse

    rng = np.random.default_rng(seed)
    e = np.asarray(effort_limits, dtype=float)
    pairs = [(j, f) for f in fractions for j in range(e.size)]
    rng.shuffle(pairs)
    out = []
    for (start, end), (j, f) in zip(prog.stops(), pairs):
        length = min(float(rng.uniform(0.15, 0.3)), end - start - 0.6)
        if length > 0.05:
            out.append(Pulse(int(j), float(rng.choice([-1.0, 1.0]) * f * e[j]), start + 0.2, length))
    return out


def bench_collision_at_rest(args) -> dict:
    from ros_lnn.arm import observer as ob
    from ros_lnn.arm import simulation as sim
    from ros_lnn.arm.mapping import ArmMapping
    from ros_lnn.arm.model import ArmModel
    from ros_lnn.arm.residual import ResidualOptions
    from ros_lnn.arm.training import train_arm

    duration = float(args.duration or (30.0 if args.quick else 60.0))
    start = time.perf_counter()

    def say(text):
        print(f"[{time.perf_counter() - start:6.1f} s] {text}", flush=True)

    arm, truth, _, noise = sim.panda_generator()
    friction = sim.StickyFriction.like_a_real_arm(arm.effort_limits(), seed=5)
    lugre = friction.lugre
    say(
        "generator: Panda, true parameters off the URDF, LuGre friction: static "
        + " ".join(f"{v:.2f}" for v in lugre.static)
        + " N·m, presliding "
        + " ".join(f"{1e3 * c / k:.2f}" for c, k in zip(lugre.coulomb, lugre.stiffness))
        + " mrad"
    )
    kw = {"nominal": arm, "friction": friction, "noise": noise}
    excite = sim.simulate_arm(truth, duration, seed=21, **kw)
    ptp = _program(arm, duration, seed=22)
    stops = sim.simulate_arm(truth, ptp.duration, seed=22, reference=_reference(ptp), **kw)
    say(f"training recordings: {excite.duration:.0f} s multisine, {stops.duration:.0f} s point-to-point")
    mapping = ArmMapping(actuated_joints=JOINTS)
    options = ResidualOptions(epochs=40 if args.quick else 150, time_limit_s=20 if args.quick else 60)
    recordings = [excite.recording("excite"), stops.recording("ptp")]
    with tempfile.TemporaryDirectory() as tmp:
        paths = {"learned": Path(tmp) / "learned.onnx", "fit": Path(tmp) / "fit.onnx"}
        learned = train_arm(recordings, arm.urdf_text, mapping, out=paths["learned"], options=options)
        memory = learned.metrics["friction_memory"]
        say(
            f"learned model in {learned.train_s:.0f} s: friction memory on "
            f"{sum(memory.get('kept', {}).values())} of {arm.n} joints, residual "
            f"{'on' if learned.residual_enabled else 'off'}"
        )
        train_arm(
            recordings, arm.urdf_text, mapping, out=paths["fit"], residual="off", ripple="off",
            fast_torque="off", friction_memory="off",
        )  # fmt: skip
        models = {name: ArmModel(path) for name, path in paths.items()}
        calib_prog = _program(arm, duration, seed=23)
        calib = sim.simulate_arm(truth, calib_prog.duration, seed=23, reference=_reference(calib_prog), **kw)
        say(f"calibration recording: {calib.duration:.0f} s point-to-point, no contact")
        thresholds, observers = {}, {}
        for name, model in models.items():
            observers[name] = ob.MomentumObserver(model, GAIN)
            r = ob.run_observer(observers[name], calib.t, calib.q, calib.qd, calib.tau)
            keep = calib.t > 0.5
            thresholds[name] = ob.calibrate(
                [(calib.t[keep], r[keep], calib.qd[keep])], JOINTS, false_alarm_rate_per_h=RATE_PER_H
            )
            spread = ob.spread_by_motion([(calib.t[keep], r[keep], calib.qd[keep])], JOINTS)
            rest = [spread["joints"][j]["rest"]["p99"] or 0.0 for j in JOINTS]
            say(
                f"{name}: static thresholds " + " ".join(f"{v:.2f}" for v in thresholds[name].static)
                + " N·m; |r| at rest (99th percentile) " + " ".join(f"{v:.2f}" for v in rest)
            )  # fmt: skip
        limits = arm.effort_limits()
        count = len(FRACTIONS) * arm.n
        test_prog = _program(arm, max(duration, 3.2 * count), seed=24)
        pushes = pushes_in_dwells(test_prog, limits, seed=24)
        test = sim.simulate_arm(
            truth, test_prog.duration, seed=24, reference=_reference(test_prog), pulses=pushes, **kw
        )
        say(
            f"test recording: {test.duration:.0f} s point-to-point with {len(pushes)} pushes on a "
            "standing arm"
        )
        found = {}
        for name, observer in observers.items():
            r = ob.run_observer(observer, test.t, test.q, test.qd, test.tau)
            keep = test.t > 0.5
            found[name] = ob.score_detection(
                test.t[keep], r[keep], test.qd[keep], thresholds[name], pushes, SETTLE_S
            )
    sizes = np.array([100 * abs(p.magnitude) / limits[p.joint] for p in pushes])
    reach = [torque_reach(test.t, test.q, test.tau, p) for p in pushes]
    figures: dict = {
        "pushes": len(pushes),
        "fractions_percent": [100 * f for f in FRACTIONS],
        "reached_nm": [r for r, _ in reach],
        "moved_mrad": [1e3 * m for _, m in reach],
    }
    for name, res in found.items():
        hit = np.array([d is not None for d in res["delays"]])
        rest_th = thresholds[name].rest
        seen = np.array(
            [rest_th is not None and abs(r) >= rest_th[p.joint] for (r, _), p in zip(reach, pushes)]
        )
        missed = [
            f"j{p.joint + 1} {s:.1f} % ({abs(p.magnitude):.2f} N·m, reached the torque {r:+.2f}, moved "
            f"{1e3 * m:.2f} mrad)"
            for p, s, h, (r, m) in zip(pushes, sizes, hit, reach)
            if not h
        ]
        say(f"{name}: missed {missed or 'none'}; false alarms at {res['false_alarm_times'] or 'none'}")
        figures[name] = {
            "detected": int(hit.sum()),
            "false_alarms": res["false_alarms"],
            "free_s": res["free_s"],
            "smallest_detected_percent": float(sizes[hit].min()) if hit.any() else float("nan"),
            "median_delay_ms": float(np.median([1e3 * d for d in res["delays"] if d is not None]))
            if hit.any()
            else float("nan"),
            "thresholds": thresholds[name].to_dict(),
            # pushes whose change of the measured torque is at least the joint's rest threshold
            "reached_threshold": int(seen.sum()),
            "detected_of_reached": int((hit & seen).sum()),
        }
        say(
            f"{name}: {int(seen.sum())} pushes changed the measured torque by at least the rest threshold; "
            f"detected {int((hit & seen).sum())} of them"
        )
    figures["runtime_s"] = time.perf_counter() - start
    a, b = figures["learned"], figures["fit"]
    figures["ratio"] = a["smallest_detected_percent"] / b["smallest_detected_percent"]
    print(
        f"collision detection at rest: {len(pushes)} pushes; learned: detected {a['detected']}, false alarms "
        f"{a['false_alarms']} in {a['free_s']:.0f} s, smallest detected "
        f"{a['smallest_detected_percent']:.1f} %; "
        f"least-squares fit: detected {b['detected']}, false alarms {b['false_alarms']}, smallest detected "
        f"{b['smallest_detected_percent']:.1f} %; ratio P/P0 = {figures['ratio']:.2f}"
    )
    return figures

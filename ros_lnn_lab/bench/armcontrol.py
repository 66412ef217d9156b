"""``ros-lnn bench armcontrol``: the identified arm in the controller's loop. How well does a simulated
Panda track under feed-forward + PD when the feed-forward comes from (A) the URDF's nominal rigid body,
(B) an arm model identified from a recording of the same arm, (C) the arm's true parameters and friction?

The arm (:mod:`ros_lnn.arm.simulation`, the collision benchmark's): true inertial parameters off the URDF
(masses ±20 %, centres of mass ±2 cm, inertias ±30 %), joint friction outside the model's law (a wider
Coulomb tanh, an offset, a position ripple), noise on q and q̇; 500 Hz, the torque computed from one
sample acting over the next period (a one-period delay, as a robot's torque interface applies it).

1. Identify: a recording of the arm under its own PD (``--duration`` s, default 30; ``--quick`` 10 s,
   the fit alone) → :func:`ros_lnn.arm.training.train_arm`, what ``ros-lnn train --urdf`` runs.
2. Track: a rest-to-rest exciting trajectory (a Fourier series at half the velocity and acceleration
   limits) then a point-to-point program (minimum-jerk moves, 0.5 s stops) with ``dac_controller``'s
   pipeline, law ``feedforward_pd``, the same gains (:data:`ros_lnn.demos.arm_control.KP`, ``KD``) for
   A, B and C.
3. ``--dds``: the same loop for B over DDS, ``dac_controller`` (the arm model file) and ``arm_sim`` (the
   same arm) each in its own process at 500 Hz (:mod:`ros_lnn_lab.harness.arm_loop`), in real time, or with
   ``--lockstep`` the simulator stepping once per command on simulated time (a loaded machine's
   scheduling gaps then slow the run instead of delaying the commands). ``--output DIR`` keeps the
   identified model (``DIR/panda_identified.onnx``, for ``--model`` in a later run).

Last line: ``arm tracking RMS [mrad]: URDF-nominal A, identified B, true C; A/B = x, B/C = y`` (joint
position error, every joint and sample of both programs, measured positions).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np


def bench_armcontrol(args) -> dict:
    from ros_lnn.arm import simulation as sim
    from ros_lnn.arm.compensation import ArmCompensation, certain_model
    from ros_lnn.arm.model import ArmModel
    from ros_lnn.arm.tracking import exciting_program, point_to_point_program
    from ros_lnn.demos import arm_control as loop
    from ros_lnn.physics.multibody.urdf import model_from_pinocchio

    quick = bool(args.quick)
    duration = float(args.duration or (10.0 if quick else 30.0))
    start = time.perf_counter()

    def say(text):
        print(f"[{time.perf_counter() - start:6.1f} s] {text}", flush=True)

    arm, truth, friction, noise = sim.panda_generator()
    program = exciting_program(arm, 6.0 if quick else 12.0)
    p2p = point_to_point_program(arm, program.q[-1], moves=3 if quick else 6)
    whole = program.then(p2p)
    say(
        f"programs: exciting {program.duration:.1f} s, point-to-point {p2p.duration:.1f} s "
        f"({(len(p2p.times) - 1) // 2} moves, 0.5 s stops); gains K_p {list(loop.KP)}, K_d {list(loop.KD)}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.output) if getattr(args, "output", None) else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        path = (
            Path(args.model)
            if args.model
            else _identify(arm, truth, friction, noise, duration, quick, str(folder), say)
        )
        model = ArmModel(path)
        nominal = model_from_pinocchio(arm.model, "URDF")
        exact = truth.model.copy()
        exact.damping = np.zeros(exact.nv)
        controllers = {
            "URDF-nominal": loop.feedforward_pipeline(nominal),
            "identified": loop.feedforward_pipeline(certain_model(model), ArmCompensation(model)),
            "true": loop.feedforward_pipeline(
                model_from_pinocchio(exact, "true arm"), loop.TrueCompensation(friction)
            ),
        }
        runs = {}
        for name, pipeline in controllers.items():
            arm_sim = sim.SimulatedArm(sim.ArmPlant(truth, friction), whole.q[0], noise=noise, seed=31)
            runs[name] = loop.track(pipeline, arm_sim, whole)
            r = runs[name]
            exc = r.t <= program.duration
            say(
                f"{name:>12}: RMS {r.rms_mrad():.3f} mrad (exciting {r.rms_mrad(exc):.3f}, point-to-point "
                f"{r.rms_mrad(~exc):.3f}); per joint {np.round(r.rms_per_joint_mrad(), 3).tolist()}; "
                f"feed-forward share {100 * r.feedforward_share():.1f} %"
            )
        dds = None
        if getattr(args, "dds", False):
            from ros_lnn_lab.harness.arm_loop import dds_loop

            library = runs["identified"].rms_mrad()
            lockstep = bool(getattr(args, "lockstep", False))
            dds = dds_loop(path, whole, loop.KP, loop.KD, loop.RATE_HZ, library, say, lockstep)
    a, b, c = (runs[k].rms_mrad() for k in ("URDF-nominal", "identified", "true"))
    share = {k: r.feedforward_share() for k, r in runs.items()}
    figures = {
        "rms_mrad": {"urdf": a, "identified": b, "true": c},
        "a_over_b": a / b,
        "b_over_c": b / c,
        "feedforward_share": share,
        "per_joint_mrad": {k: r.rms_per_joint_mrad().tolist() for k, r in runs.items()},
        "gains": {"kp": list(loop.KP), "kd": list(loop.KD), "rate_hz": loop.RATE_HZ},
        "dds": dds,
        "runtime_s": time.perf_counter() - start,
    }
    print(
        "feed-forward share of the commanded torque: "
        + ", ".join(f"{k} {100 * v:.1f} %" for k, v in share.items())
    )
    print(
        f"arm tracking RMS [mrad]: URDF-nominal {a:.3f}, identified {b:.3f}, true {c:.3f}; "
        f"A/B = {a / b:.2f}, B/C = {b / c:.2f}"
    )
    return figures


def _identify(arm, truth, friction, noise, duration: float, quick: bool, folder: str, say) -> Path:
    """A recording of the arm under its own PD → ``train_arm`` (the residual too unless quick)."""
    from ros_lnn.arm import simulation as sim
    from ros_lnn.arm.mapping import ArmMapping
    from ros_lnn.arm.residual import ResidualOptions
    from ros_lnn.arm.training import train_arm

    run = sim.simulate_arm(truth, duration, nominal=arm, friction=friction, noise=noise, seed=11)
    say(f"identification recording: {run.duration:.0f} s at 1 kHz (the arm's own PD, multi-sine references)")
    out = Path(folder) / "panda_identified.onnx"
    result = train_arm(
        [run.recording("identification")],
        arm.urdf_text,
        ArmMapping(actuated_joints=arm.joints),
        out=out,
        residual="off" if quick else "auto",
        options=ResidualOptions(epochs=150, time_limit_s=60),
    )
    rre = np.round(result.metrics["validation_torque_rre_percent_fit"], 2).tolist()
    say(
        f"identified in {result.train_s:.0f} s (ros_lnn.arm.training.train_arm): residual "
        f"{'on' if result.residual_enabled else 'off'}; validation torque rre of the fit {rre} %"
    )
    return out

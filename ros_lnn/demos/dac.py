"""``ros-lnn demo --dac``: the DAC closed loop without ROS — the demo arm's tool traces a circle while
an obstacle sits on its wrist's path and a disturbance pushes the end link; the port is realised through
joint efforts ``u = Gᵀ τ_c`` with the URDF effort limits, the arm simulated in joint coordinates
(Pinocchio's ABA). Writes PNG figures and prints a summary.

``ros-lnn demo --dac --plant-mismatch``: the arm differs from its URDF as real arms do (joint friction,
an unknown payload at the tool, rotor inertia: :data:`DEMO_MISMATCH`); the data-assisted workflow end to
end — record the arm under the model-only controller (the task and excitations) to a rosbag, train the
learned port on it (``ros-lnn train --model dac_residual``), export ONNX, load it with ONNX Runtime — and
the same trajectory three times: certain model only, certain model + learned port, certain model + the
exact residual (the floor). Its last line: ``tracking rms [m]: model-only A, data-assisted B, exact-model C``.

This module is what the demo runs (simulation, figures, recording, training, comparison); its arguments
and printing are in ``commands/demo.py``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from ..shipped import demo_arm_path

CIRCLE_RADIUS, CIRCLE_PERIOD = 0.12, 4.0
Q_START = np.array([0.0, -0.8, 1.4, 0.6, 0.4])
OBSTACLE = (np.array([0.4636, 0.0991, 0.1080]), 0.02)
DISTURBANCE = (2.5, 2.7, np.array([0.0, 0.0, -8.0]))  # start, end, force on the last link [N]


def simulate_demo(duration: float = 6.0, dt: float = 4e-3, avoidance: bool = True, progress=None) -> dict:
    """Closed loop of the joint-state pipeline (law III) and the joint-space simulator (RK4 on Pinocchio's
    ABA; the controller is evaluated at every stage); returns time series (t, ee, target, error, V,
    clearance, ...)."""
    from ..control.dac import Gains, end_effector_state
    from ..control.obstacles import clearances
    from ..control.pipeline import DacPipeline, circle_path
    from ..physics.multibody.build import load_model
    from ..physics.multibody.pin_sim import port_efforts, rk4_step

    arm = load_model(demo_arm_path())
    pipe = DacPipeline(
        arm,
        "end_effector",
        Gains(lambda_position=5.0, damping=0.0),
        ee_link="tool0",
        obstacles=[OBSTACLE],
        obstacle_influence=0.1,
        obstacle_eta=5.0 if avoidance else 0.0,
    )
    field, ee = pipe.controller.obstacles, pipe.controller.end_effector
    assert field is not None  # the pipeline was given the obstacle
    p0 = end_effector_state(arm, pipe.kinematics(Q_START, np.zeros(arm.n_bodies)), ee)[0]
    path = circle_path(
        p0 - np.array([0, 0, CIRCLE_RADIUS]), CIRCLE_RADIUS, CIRCLE_PERIOD, (-1.0, 0.0, 0.0), np.pi
    )
    pipe.set_ee_path(path)
    n = arm.n_bodies
    push = np.zeros(6 * n)
    push[3 * (n - 1) : 3 * n] = DISTURBANCE[2]
    log: dict[str, list] = {
        k: [] for k in ("t", "ee", "target", "error", "V", "clearance", "saturation", "effort", "step_us")
    }

    def efforts(t, q, qd):
        u = pipe.step(q, qd, t).efforts.effort
        if DISTURBANCE[0] <= t < DISTURBANCE[1]:
            u = u + port_efforts(pipe.pinocchio, q, push)
        return u

    q, qd, t = Q_START.copy(), np.zeros(n), 0.0
    steps = round(duration / dt)
    for i in range(steps + 1):
        t0 = time.perf_counter()
        out = pipe.step(q, qd, t)  # the controller's view at the sample instant (logged)
        log["step_us"].append((time.perf_counter() - t0) * 1e6)
        res, cmd = out.result, out.efforts
        log["t"].append(t)
        log["ee"].append(out.ee_position.copy())
        log["target"].append(path(t).position)
        log["error"].append(np.linalg.norm(res.task_error))
        log["V"].append(res.lyapunov)
        log["clearance"].append(clearances(field, out.data).min())
        log["saturation"].append(cmd.saturation_ratio)
        log["effort"].append(cmd.effort)
        if i < steps:
            q, qd = rk4_step(pipe.pinocchio, q, qd, dt, efforts, t)
            t = (i + 1) * dt
        if progress is not None and i % 250 == 0:
            progress(i, steps)
    arrays: dict[str, Any] = {k: np.asarray(v) for k, v in log.items()}
    arrays["disturbance"] = DISTURBANCE[:2]
    return arrays


def summarize(out: dict) -> dict:
    t, e = out["t"], out["error"]
    d0, d1 = out["disturbance"]
    settled = (t > 1.0) & ((t < d0) | (t > d1 + 1.0))
    pushed = (t >= d0) & (t < d1 + 0.5)
    nan = float("nan")
    return {
        "tracking_error_max_after_1s_m": float(e[settled].max()) if settled.any() else nan,
        "tracking_error_final_m": float(e[-1]),
        "peak_error_under_disturbance_m": float(e[pushed].max()) if pushed.any() else nan,
        "min_clearance_m": float(out["clearance"].min()),
        "lyapunov_initial": float(out["V"][0]),
        "lyapunov_before_disturbance": float(out["V"][t < d0][-1]),
        "max_saturation_ratio": float(out["saturation"].max()),
        "controller_step_median_us": float(np.median(out["step_us"])),
    }


def write_figures(out: dict, folder: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    t = out["t"]
    d0, d1 = out["disturbance"]
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    ax[0].plot(out["target"][:, 1], out["target"][:, 2], "k--", label="desired")
    ax[0].plot(out["ee"][:, 1], out["ee"][:, 2], label="tool0")
    ax[0].set(xlabel="y [m]", ylabel="z [m]", title="end effector (y-z plane)", aspect="equal")
    ax[0].legend()
    ax[1].semilogy(t, out["error"] + 1e-16)
    ax[1].axvspan(d0, d1, color="r", alpha=0.2, label="disturbance")
    ax[1].set(xlabel="t [s]", ylabel="|e| [m]", title="tracking error (decays at rate Λ)")
    ax[1].legend()
    ax[2].plot(t, out["clearance"])
    ax[2].axhline(0.0, color="r", lw=0.8)
    ax[2].set(xlabel="t [s]", ylabel="clearance [m]", title="closest control point to the obstacle")
    fig.tight_layout()
    p1 = folder / "dac_tracking.png"
    fig.savefig(p1, dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
    ax[0].semilogy(t, out["V"] + 1e-30)
    ax[0].axvspan(d0, d1, color="r", alpha=0.2)
    ax[0].set(xlabel="t [s]", ylabel="V = ½ sᵀ M s [J]", title="Lyapunov function (V̇ = −2k V between pushes)")
    ax[1].plot(t, out["effort"])
    ax[1].set(xlabel="t [s]", ylabel="u [N m]", title="joint efforts u = Gᵀ τ_c (clamped)")
    fig.tight_layout()
    p2 = folder / "dac_lyapunov.png"
    fig.savefig(p2, dpi=110)
    plt.close(fig)
    return [p1, p2]


# ------------------------------------------------------------------------------------ plant mismatch
#: How the demo arm differs from config/dac_chain.urdf: joint friction (viscous, Coulomb), 0.3 kg at the
#: tool (5 cm beyond link5's centre of mass) and reflected rotor inertia.
DEMO_MISMATCH_VALUES = dict(
    viscous=(0.5, 0.5, 0.3, 0.2, 0.05),
    coulomb=(0.4, 0.4, 0.25, 0.15, 0.05),
    coulomb_velocity=0.05,
    payload_mass=0.3,
    payload_offset=(0.05, 0.0, 0.0),
    payload_inertia=(2e-4, 2e-4, 2e-4),
    rotor_inertia=(0.01, 0.01, 0.005, 0.003, 0.001),
)
SAMPLE_DT = 2e-3  # 500 Hz: the rate of dac_chain_sim in the ROS demo
TASK_SECONDS = 8.0
#: Recording the excitations: law II with stiffer gains, so that the arm follows the multi-sines widely.
EXCITATION_GAINS = dict(kd_linear=80.0, kd_angular=80.0, lambda_position=20.0, lambda_attitude=20.0)
EXCITATION_AMPLITUDE = (0.35, 0.35, 0.3, 0.5, 0.6)


def demo_plant():
    """``(arm, Plant)``: the certain model (the shipped URDF) and the arm with
    :data:`DEMO_MISMATCH_VALUES`."""
    from ..physics.multibody.build import load_model
    from ..physics.multibody.pin_plant import Plant, PlantMismatch

    arm = load_model(demo_arm_path())
    return arm, Plant(arm, PlantMismatch(**DEMO_MISMATCH_VALUES))


def law_ii(arm, residual=None, **gains):
    from ..control.dac import Gains
    from ..control.pipeline import DacPipeline

    pipe = DacPipeline(
        arm, "pose", Gains(**{"lambda_position": 5.0, "lambda_attitude": 5.0, **gains}), ee_link="tool0"
    )
    pipe.set_residual(residual)
    return pipe


def demo_task(
    arm,
    radius: float = CIRCLE_RADIUS,
    period: float = CIRCLE_PERIOD,
    shift=(0.0, 0.0, 0.0),
    normal=(-1.0, 0.0, 0.0),
    posture=None,
):
    """``(point(t), times, joint path)``: the demo's tool circle (from the start pose, in the y-z plane)
    and the joint path that traces it (damped least squares, the wrist held near the start posture)."""
    from ..control.closed_loop import end_effector_point, ik_joint_path
    from ..control.pipeline import circle_path

    pipe = law_ii(arm)
    p0 = end_effector_point(pipe, Q_START)
    path = circle_path(p0 - np.array([0.0, 0.0, radius]) + np.asarray(shift), radius, period, normal, np.pi)
    times, q = ik_joint_path(
        pipe,
        lambda t: path(t).position,
        TASK_SECONDS + 1.0,
        Q_START,
        posture=Q_START if posture is None else posture,
    )
    return (lambda t: path(t).position), times, q


def record_arm(arm, plant, quick: bool = False, seed: int = 0, progress=print) -> list:
    """Recordings of the mismatched arm under the model-only controller (law II, as a robot would run
    before anything is learned): the task, circles around it, and multi-sine joint excitations."""
    from ..control.closed_loop import multisine_joint_path, sampled_loop

    rng = np.random.default_rng(seed)
    logs = []
    _, times, q_task = demo_task(arm)
    pipe = law_ii(arm)
    pipe.set_joint_trajectory(times, q_task)
    logs.append(sampled_loop(pipe, q_task[0], TASK_SECONDS, SAMPLE_DT, dynamics=plant.forward_dynamics))
    for k in range(2 if quick else 6):
        radius, period = rng.uniform(0.08, 0.15), rng.uniform(3.0, 5.5)
        _, times, q = demo_task(
            arm,
            radius,
            period,
            rng.uniform(-0.03, 0.03, 3),
            np.array([-1.0, 0.0, 0.0]) + 0.3 * rng.normal(size=3),
            Q_START + 0.1 * rng.normal(size=5),
        )
        pipe = law_ii(arm)
        pipe.set_joint_trajectory(times, q)
        logs.append(sampled_loop(pipe, q[0], TASK_SECONDS, SAMPLE_DT, dynamics=plant.forward_dynamics))
        progress(f"  recorded circle {k + 1}")
    for k in range(3 if quick else 8):
        times, q = multisine_joint_path(q_task.mean(0), EXCITATION_AMPLITUDE, 10.0, seed=100 + seed + k)
        pipe = law_ii(arm, **EXCITATION_GAINS)
        pipe.set_joint_trajectory(times, q)
        logs.append(sampled_loop(pipe, q[0], 10.0, SAMPLE_DT, dynamics=plant.forward_dynamics))
        progress(f"  recorded excitation {k + 1}")
    return logs


def write_recordings_bag(
    path, logs, joint_names, effort_topic: str = "/dac_controller/joint_effort_command", gap_s: float = 1.0
) -> None:
    """The recordings as one rosbag2, as the robot's ``ros2 bag record /joint_states <effort topic>``
    writes them: ``joint_states`` with position, velocity and the effort held over the step before each
    stamp (NaN before the first), and the controller's effort commands as it publishes them."""
    from ..bags.writer import START_NS, BagWriter

    writer = BagWriter(path)
    start = START_NS
    for log in logs:
        stamps = start + np.round(log.t * 1e9).astype(np.int64)
        held = np.vstack([np.full((1, log.u.shape[1]), np.nan), log.u[:-1]])
        writer.joint_states("/joint_states", stamps, joint_names, log.q, log.qd, held)
        writer.float64_array(effort_topic, stamps + 200_000, joint_names, log.u)  # 0.2 ms after the state
        start = int(stamps[-1]) + int(gap_s * 1e9)
    writer.close()


def train_port(bag, folder: Path, epochs: int, progress=print) -> Path:
    """``ros-lnn train --model dac_residual --bag BAG --config config/dac_residual.yaml``, as a library
    call."""
    import os

    from ..training.effort_residuals import shipped_config
    from ..training.run import run
    from ..training.spec import RunSpec

    out = folder / "arm_residual.onnx"
    config = os.path.relpath(shipped_config())  # the recorded command line stays free of this machine's paths
    config = config if not config.startswith("..") else str(shipped_config())
    spec = RunSpec(
        family="dac_residual",
        bags=(str(bag),),
        bag_config=config,
        epochs=epochs,
        out=str(out),
        checkpoint_dir=str(folder / "arm_residual_checkpoints"),
        report=str(folder / "arm_residual_report"),
        log_every=max(1, epochs // 5),
        val_every=max(1, epochs // 30),  # the family exports the best validation's weights
    )
    result = run(spec, progress=progress)
    assert result is not None  # one process: it reports
    progress(result.test_summary)
    return out


def compare_three(arm, plant, residual, duration: float = TASK_SECONDS) -> dict:
    """The task with the certain model alone, with the learned port, and with the exact residual."""
    from ..control.closed_loop import sampled_loop

    point, times, q_task = demo_task(arm)
    out = {}
    for name, port in (("model-only", None), ("data-assisted", residual), ("exact-model", plant.residual)):
        pipe = law_ii(arm, port)
        pipe.set_joint_trajectory(times, q_task)
        log = sampled_loop(
            pipe, q_task[0], duration, SAMPLE_DT, dynamics=plant.forward_dynamics, target=point
        )
        out[name] = {"tracking_rms_m": log.tracking_rms(1.0), "log": log}
    return out

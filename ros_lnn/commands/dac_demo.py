"""``ros-lnn demo --dac``: the DAC closed loop without ROS — the demo arm's tool traces a circle while
an obstacle sits on its wrist's path and a disturbance pushes the end link; the port is realised through
joint efforts ``u = Gᵀ τ_c`` with the URDF effort limits, the arm simulated in joint coordinates
(Pinocchio's ABA). Writes PNG figures and prints a summary.
(``run_dac_demo(args)`` is wired into the CLI by the lead; ``add_dac_demo_arguments`` adds its options.)
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

CIRCLE_RADIUS, CIRCLE_PERIOD = 0.12, 4.0
Q_START = np.array([0.0, -0.8, 1.4, 0.6, 0.4])
OBSTACLE = (np.array([0.4636, 0.0991, 0.1080]), 0.02)
DISTURBANCE = (2.5, 2.7, np.array([0.0, 0.0, -8.0]))  # start, end, force on the last link [N]


def add_dac_demo_arguments(parser):
    parser.add_argument("--output", default="reports/dac_demo", help="folder for the figures and summary (default reports/dac_demo)")
    parser.add_argument("--duration", type=float, default=None, help="simulated seconds (default 6, quick 3)")
    parser.add_argument("--quick", action="store_true", help="shorter run")
    parser.add_argument("--no-avoidance", action="store_true", help="switch the obstacle potential off")


def simulate_demo(duration: float = 6.0, dt: float = 4e-3, avoidance: bool = True, progress=None) -> dict:
    """Closed loop of the joint-state pipeline (law III) and the joint-space simulator (RK4 on Pinocchio's
    ABA; the controller is evaluated at every stage); returns time series (t, ee, target, error, V,
    clearance, ...)."""
    from ..control.dac import Gains, end_effector_state
    from ..control.obstacles import clearances
    from ..control.pipeline import DacPipeline, circle_path
    from ..nodes.dac_controller import shipped_model_path
    from ..physics.multibody_build import load_model
    from ..physics.multibody_pin_sim import port_efforts, rk4_step

    arm = load_model(shipped_model_path())
    pipe = DacPipeline(arm, "end_effector", Gains(lambda_position=5.0, damping=0.0), ee_link="tool0",
                       obstacles=[OBSTACLE], obstacle_influence=0.1, obstacle_eta=5.0 if avoidance else 0.0)
    field, ee = pipe.controller.obstacles, pipe.controller.end_effector
    p0 = end_effector_state(arm, pipe.kinematics(Q_START, np.zeros(arm.n_bodies)), ee)[0]
    path = circle_path(p0 - np.array([0, 0, CIRCLE_RADIUS]), CIRCLE_RADIUS, CIRCLE_PERIOD, (-1.0, 0.0, 0.0), np.pi)
    pipe.set_ee_path(path)
    n = arm.n_bodies
    push = np.zeros(6 * n)
    push[3 * (n - 1):3 * n] = DISTURBANCE[2]
    log: dict[str, list] = {k: [] for k in ("t", "ee", "target", "error", "V", "clearance", "saturation",
                                            "effort", "step_us")}

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
        log["t"].append(t), log["ee"].append(out.ee_position.copy())
        log["target"].append(path(t).position), log["error"].append(np.linalg.norm(res.task_error))
        log["V"].append(res.lyapunov), log["clearance"].append(clearances(field, out.data).min())
        log["saturation"].append(cmd.saturation_ratio), log["effort"].append(cmd.effort)
        if i < steps:
            q, qd = rk4_step(pipe.pinocchio, q, qd, dt, efforts, t)
            t = (i + 1) * dt
        if progress is not None and i % 250 == 0:
            progress(i, steps)
    out = {k: np.asarray(v) for k, v in log.items()}
    out["disturbance"] = DISTURBANCE[:2]
    return out


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


def run_dac_demo(args) -> int:
    import json

    duration = getattr(args, "duration", None) or (3.0 if getattr(args, "quick", False) else 6.0)
    folder = Path(getattr(args, "output", None) or "reports/dac_demo")
    print(f"DAC demo: demo arm, law III, circle r = {CIRCLE_RADIUS} m, obstacle on the wrist path, "
          f"{duration:.1f} s simulated")
    out = simulate_demo(duration, avoidance=not getattr(args, "no_avoidance", False),
                        progress=lambda i, n: print(f"  step {i}/{n}", end="\r", flush=True))
    print()
    summary = summarize(out)
    paths = write_figures(out, folder)
    (folder / "dac_summary.json").write_text(json.dumps(summary, indent=2))
    for k, v in summary.items():
        print(f"  {k:38s} {v:.4g}")
    print("figures: " + ", ".join(str(p) for p in paths))
    return 0

"""The examples of the partial-Lagrangian paper (docs/papers.md; EQUATIONS.md §5) as simulations of
:class:`ros_lnn.physics.chain.PlanarChain`: 1, 2, 3 and 10 links with viscous joint damping, PD/PID
control of joint targets, and the revolute → prismatic reconstruction of the second link.

Conventions (ours, stated where the paper is silent):
  * damping is viscous per joint, ``Q_damp = −d ⊙ q̇`` (the paper's Listing A1 uses a Rayleigh term
    of the tip velocity; for one link that is joint damping ``c l²``);
  * the paper measures the first angle from the horizontal x-axis (``x = l cos θ``, ``y = l sin θ``), the
    chain measures it from the downward vertical, so ``q_1 = θ_1 + 90°``; later joints are relative;
  * the paper's triple and 10-link parameters are not printed: link 3 repeats link 2 (m = 1, l = 1),
    the 10-link chain uses m = 1, l = 0.5, d = 0.5 per link; the PID gains of the prismatic link are ours.

Every simulation integrates ``w(t) = ∫ q̇ᵀ(Q_damp + Q_ctrl) dt`` alongside the state, so the first law
``E(t) − E(0) = w(t)`` can be checked to integrator tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp

from ros_lnn.physics.chain import Link, PlanarChain
from ros_lnn_lab.studies.config import StudyConfig
from ros_lnn_lab.studies.figures import pyplot, save_figure

DEG = np.pi / 180.0
#: ``ros-lnn bench zoo examples``: 10 s per simulation (``--quick``: 3 s).
DEFAULTS = StudyConfig(duration=10.0)
QUICK = DEFAULTS.replace(quick=True, duration=3.0)


@dataclass(frozen=True)
class JointPID:
    """``Q_ctrl = K_p (q_ref − q) + K_i ∫(q_ref − q) dt − K_d q̇`` per joint (``K_i = 0``: PD).
    Arrays of length n; a zero row leaves that joint uncontrolled."""

    target: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    ki: np.ndarray | None = None

    def force(self, q, qd, integral):
        ki = 0.0 if self.ki is None else np.asarray(self.ki, float)
        err = np.asarray(self.target, float) - q
        return np.asarray(self.kp, float) * err + ki * integral - np.asarray(self.kd, float) * qd


def simulate_chain(
    chain: PlanarChain,
    duration: float,
    q0,
    qd0=None,
    *,
    damping=None,
    controller: JointPID | None = None,
    n_samples: int = 501,
    rtol=1e-9,
    atol=1e-9,
    method: str = "DOP853",
) -> dict:
    """Integrate the free chain (every joint free) under damping and joint control.

    Returns t (N,), q, qd, qdd (N, n), E (N,), work (N,) = ∫ q̇ᵀ(Q_damp + Q_ctrl) dt, Q_damp, Q_ctrl
    (N, n), and the integral of the control error (N, n). ``method``: a ``solve_ivp`` method (LSODA for
    the stiff high-gain examples)."""
    n = chain.n
    if chain.partition.servo:
        chain = chain.with_servo([])
    d = np.zeros(n) if damping is None else np.broadcast_to(np.asarray(damping, float), (n,))
    q0 = np.asarray(q0, float).reshape(n)
    qd0 = np.zeros(n) if qd0 is None else np.asarray(qd0, float).reshape(n)
    no_servo = np.zeros(0)

    def applied(y):
        q, qd, integral = y[:n], y[n : 2 * n], y[2 * n : 3 * n]
        Q_damp = -d * qd
        Q_ctrl = np.zeros(n) if controller is None else controller.force(q, qd, integral)
        return q, qd, Q_damp, Q_ctrl

    def rhs(t, y):
        q, qd, Q_damp, Q_ctrl = applied(y)
        qdd = chain.dynamics(q, qd, qdd_e=no_servo, Q_f=Q_damp + Q_ctrl)["qdd"]
        err = np.zeros(n) if controller is None else np.asarray(controller.target, float) - q
        return np.concatenate([qd, qdd, err, [qd @ (Q_damp + Q_ctrl)]])

    y0 = np.concatenate([q0, qd0, np.zeros(n), [0.0]])
    t_eval = np.linspace(0.0, duration, n_samples)
    sol = solve_ivp(rhs, (0.0, duration), y0, method=method, t_eval=t_eval, rtol=rtol, atol=atol)
    if not sol.success:
        raise RuntimeError(f"chain simulation failed at t={sol.t[-1]:.4g}: {sol.message}")
    Y = sol.y.T
    parts = [applied(y) for y in Y]
    q, qd = Y[:, :n], Y[:, n : 2 * n]
    Q_damp = np.stack([p[2] for p in parts])
    Q_ctrl = np.stack([p[3] for p in parts])
    out = chain.dynamics(q, qd, qdd_e=np.zeros((len(q), 0)), Q_f=Q_damp + Q_ctrl)
    return {
        "t": sol.t,
        "q": q,
        "qd": qd,
        "qdd": out["qdd"],
        "E": out["E"],
        "work": Y[:, -1],
        "Q_damp": Q_damp,
        "Q_ctrl": Q_ctrl,
        "integral": Y[:, 2 * n : 3 * n],
        "chain": chain,
    }


def pd_equilibrium(chain: PlanarChain, controller: JointPID, q_guess=None, iters: int = 50):
    """The rest point of a PD-controlled chain: ``K_p (q_ref − q) = ∂V/∂q`` (Newton on the exact
    gradient and a finite-difference Hessian). With gravity it differs from ``q_ref``; PID removes it."""
    q = np.asarray(controller.target if q_guess is None else q_guess, float).copy()
    kp = np.asarray(controller.kp, float)
    for _ in range(iters):
        r = kp * (controller.target - q) - chain.potential_gradient(q)
        h = 1e-6
        J = np.stack(
            [
                (kp * (controller.target - q - h * e) - chain.potential_gradient(q + h * e) - r) / h
                for e in np.eye(chain.n)
            ],
            axis=1,
        )
        step = np.linalg.solve(J, -r)
        q += step
        if np.max(np.abs(step)) < 1e-13:
            break
    return q


# -- the paper's examples -------------------------------------------------------------------------
def paper_angle(theta_deg, first: bool):
    """The paper's angle (degrees; the first from the horizontal) → this chain's joint angle (rad)."""
    return (theta_deg + (90.0 if first else 0.0)) * DEG


def one_link():
    chain = PlanarChain([Link("joint_1", mass=3.0, length=2.0)])
    pd = JointPID(np.array([paper_angle(110, True)]), np.array([200.0]), np.array([50.0]))
    return chain, np.array([1.0]), pd


def two_links():
    chain = PlanarChain([Link("joint_1", mass=3.0, length=2.0), Link("joint_2", mass=1.0, length=1.0)])
    pd = JointPID(
        np.array([paper_angle(80, True), paper_angle(30, False)]),
        np.array([100.0, 50.0]),
        np.array([50.0, 20.0]),
    )
    return chain, np.array([1.0, 1.0]), pd


def three_links():
    chain = two_links()[0].append_link(Link("joint_3", mass=1.0, length=1.0))
    pd = JointPID(
        np.array([paper_angle(125, True), paper_angle(30, False), paper_angle(30, False)]),
        np.array([1000.0, 1000.0, 500.0]),
        np.array([200.0, 200.0, 100.0]),
    )
    return chain, np.array([1.0, 1.0, 1.0]), pd


def ten_links():
    """Ten links, grown from one by repeated extension (``append_link``)."""
    chain = PlanarChain([Link("joint_1", mass=1.0, length=0.5)])
    for i in range(2, 11):
        chain = chain.append_link(Link(f"joint_{i}", mass=1.0, length=0.5))
    return chain, np.full(10, 0.5), None


def prismatic_reconstruction():
    """The triple pendulum with link 2 rebuilt as a prismatic joint (``replace_link``), PID-driven from
    its nominal length 1 to 0.1 (coordinate = extension, target −0.9); joints 1 and 3 only damped."""
    chain = three_links()[0].replace_link(1, Link("joint_2", "prismatic", mass=1.0, length=1.0))
    pid = JointPID(
        np.array([0.0, 0.1 - 1.0, 0.0]),
        np.array([0.0, 200.0, 0.0]),
        np.array([0.0, 50.0, 0.0]),
        ki=np.array([0.0, 100.0, 0.0]),
    )
    return chain, np.array([1.0, 0.0, 1.0]), pid


EXAMPLES = {
    "1 link": one_link,
    "2 links": two_links,
    "3 links": three_links,
    "10 links": ten_links,
    "prismatic reconstruction": prismatic_reconstruction,
}


def run_examples(duration: float = 10.0, n_samples: int = 1001, method: str = "LSODA") -> dict:
    """Every example, damped free motion from a displaced start and (where the paper has it) controlled
    motion from rest hanging down (the reconstruction from its displaced start).
    Returns name → {"damped": sim | None, "controlled": sim | None}."""
    results = {}
    for name, make in EXAMPLES.items():
        chain, damping, ctrl = make()
        q0 = np.where([link.kind == "revolute" for link in chain.links], 60 * DEG, 0.0)
        q0[1:] = np.where(np.asarray(q0[1:]) != 0, 20 * DEG, 0.0)
        # the prismatic link has no spring: uncontrolled it would just slide out, so only its PID run
        entry = {
            "damped": None
            if name == "prismatic reconstruction"
            else simulate_chain(chain, duration, q0, damping=damping, n_samples=n_samples, method=method)
        }
        # PD examples start hanging at rest; in the reconstruction the uncontrolled revolute joints
        # start displaced so that they show their damped swing while link 2 retracts (the paper's Fig. 4)
        start = q0 if ctrl is not None and ctrl.ki is not None else np.zeros(chain.n)
        entry["controlled"] = (
            None
            if ctrl is None
            else simulate_chain(
                chain, duration, start, damping=damping, controller=ctrl, n_samples=n_samples, method=method
            )
        )
        results[name] = entry
    return results


def run_study(config: StudyConfig = DEFAULTS, *, n_samples: int | None = None) -> dict:
    """:func:`run_examples` over ``config.duration`` (``n_samples``: default 301 for a quick config, else
    1001): per example and mode its start and end energy, largest first-law residual, end state; each
    example's line through ``config.progress``, the plot into ``config.output``."""
    import json

    n_samples = n_samples or (301 if config.quick else 1001)
    sims = run_examples(duration=config.duration, n_samples=n_samples)
    result = {}
    for name, entry in sims.items():
        row = {}
        for mode, sim in entry.items():
            if sim is None:
                continue
            row[mode] = {
                "E0": float(sim["E"][0]),
                "E_end": float(sim["E"][-1]),
                "first_law_residual": float(np.abs(sim["E"] - sim["E"][0] - sim["work"]).max()),
                "q_end": sim["q"][-1].tolist(),
                "qd_end_max": float(np.abs(sim["qd"][-1]).max()),
            }
        result[name] = row
        config.progress(f"{name} {json.dumps(row)}")
    if config.output:
        plot_examples(sims, config.output)
    return result


def plot_examples(sims: dict, out) -> str:
    """Joint angles of every example (columns), damped and controlled (rows):
    ``out/partial_lagrangian_examples.png``."""
    from pathlib import Path

    plt = pyplot()

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(2, len(sims), figsize=(3.6 * len(sims), 5.5), squeeze=False)
    for col, (name, entry) in enumerate(sims.items()):
        for row, mode in enumerate(("damped", "controlled")):
            ax, sim = axes[row, col], entry[mode]
            if sim is None:
                ax.axis("off")
                continue
            ax.plot(sim["t"], sim["q"])
            ax.set_title(f"{name}: {mode}", fontsize=9)
            ax.set_xlabel("t [s]")
    return save_figure(fig, out / "partial_lagrangian_examples.png", dpi=100)


__all__ = [
    "JointPID",
    "simulate_chain",
    "pd_equilibrium",
    "paper_angle",
    "one_link",
    "two_links",
    "three_links",
    "ten_links",
    "prismatic_reconstruction",
    "EXAMPLES",
    "run_examples",
    "run_study",
    "plot_examples",
]

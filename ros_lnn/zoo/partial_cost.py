"""Cost of the chain dynamics against the number of links (partial-Lagrangian paper §4.1: O(n⁴) for the whole
Lagrangian, O(n³) when the partial Lagrangians are evaluated in parallel).

Two implementations are timed for n = 1..10 revolute links, each in three ways:
  * ``whole``: the generalised force ``Q`` of the whole Lagrangian in one evaluation;
  * ``partial_sum``: every column ``D_k 𝓛_i`` evaluated one after the other and summed (Table 1);
  * ``critical_path``: the costliest single column (link n's), i.e. the time with one worker per link,
    the paper's parallel bound.
``numpy``: the analytic :class:`PlanarChain` (whole = ``dynamics``, columns = ``link_terms`` + machinery).
``autograd``: the paper's method, torch autograd of a hand-written Lagrangian (whole: 𝓛 of all links
differentiated in all n coordinates; partial: 𝓛_i differentiated in its own first i coordinates).
Exponents are least-squares slopes of log(time) against log(n).
"""
from __future__ import annotations

import time

import numpy as np

from ..physics.chain import PlanarChain
from ..physics.lagrangian import NUMPY, dynamics


def _time(fn, min_time=0.05, max_reps=2000) -> float:
    """Median seconds of one call (calls repeated for at least ``min_time``)."""
    fn()
    times, spent = [], 0.0
    while not times or (spent < min_time and len(times) < max_reps):
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        times.append(dt)
        spent += dt
    return float(np.median(times))


def numpy_column(chain: PlanarChain, q, qd, qdd, i):
    M, dM, V, dV = chain.link_terms(q, i)
    return dynamics(NUMPY, M, dM, V, dV, qd, chain.partition, qdd=qdd)["Q"]


def torch_link_lagrangian(chain: PlanarChain, i: int):
    """``𝓛_i(q_1..q_{i+1}, q̇_1..q̇_{i+1})`` of revolute link i (0-based) in torch, written from the
    posture operator as the paper does: ``p_i = Σ_{j<i} l_j e(φ_j) + c_i e(φ_i)``, ``ṗ_i = Σ ... ė``."""
    import torch

    links = chain.links[:i + 1]
    if any(link.kind != "revolute" for link in links):
        raise ValueError("the autograd cost model covers revolute chains only")
    reach = torch.tensor([link.length for link in links[:-1]] + [links[-1].com_offset], dtype=torch.float64)
    m, inertia, g = links[-1].mass, links[-1].inertia, chain.g

    def lagrangian(q, qd):  # (..., i+1) -> (...)
        phi, phid = torch.cumsum(q, -1), torch.cumsum(qd, -1)
        y = -(reach * torch.cos(phi)).sum(-1)
        vx = (reach * torch.cos(phi) * phid).sum(-1)
        vy = (reach * torch.sin(phi) * phid).sum(-1)
        return 0.5 * m * (vx * vx + vy * vy) + 0.5 * inertia * phid[..., -1] ** 2 - m * g * y

    return lagrangian


def torch_euler_lagrange(lagrangian, q, qd, qdd):
    """``D 𝓛 = d/dt ∂𝓛/∂q̇ − ∂𝓛/∂q``, the time derivative as one forward-over-reverse product
    ``(∂²𝓛/∂q̇∂q) q̇ + (∂²𝓛/∂q̇²) q̈`` (torch.func.jvp of the gradient; no Hessian is formed)."""
    from torch.func import grad, jvp

    p = grad(lagrangian, argnums=1)
    _, p_dot = jvp(p, (q, qd), (qd, qdd))
    return p_dot - grad(lagrangian, argnums=0)(q, qd)


def autograd_forces(chain: PlanarChain):
    """(whole(q, q̇, q̈), column(i, q, q̇, q̈)) in torch; the whole Lagrangian is the sum of all links'."""
    parts = [torch_link_lagrangian(chain, i) for i in range(chain.n)]

    def whole_lagrangian(q, qd):
        return sum(part(q[:i + 1], qd[:i + 1]) for i, part in enumerate(parts))

    def whole(q, qd, qdd):
        return torch_euler_lagrange(whole_lagrangian, q, qd, qdd)

    def column(i, q, qd, qdd):
        return torch_euler_lagrange(parts[i], q[:i + 1], qd[:i + 1], qdd[:i + 1])

    return whole, column


def measure(ns=range(1, 11), batch: int = 1, seed: int = 0, autograd: bool = True, min_time=0.05) -> dict:
    """Seconds per evaluation of ``Q`` at ``batch`` random states for each n, and a check that the
    whole, partial-sum and autograd forces agree."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in ns:
        chain = PlanarChain.uniform(n, mass=1.0, length=0.5, com=0.25, inertia=0.02)
        q, qd, qdd = (rng.normal(size=(batch, n)) for _ in range(3))
        row = {"n": n,
               "numpy_whole": _time(lambda: chain.dynamics(q, qd, qdd=qdd)["Q"], min_time),
               "numpy_partial_sum": _time(lambda: chain.partial_forces(q, qd, qdd).sum(-1), min_time),
               "numpy_critical_path": _time(lambda: numpy_column(chain, q, qd, qdd, n - 1), min_time)}
        Q = chain.dynamics(q, qd, qdd=qdd)["Q"]
        row["numpy_max_diff"] = float(np.abs(chain.partial_forces(q, qd, qdd).sum(-1) - Q).max())
        if autograd:
            import torch

            whole, column = autograd_forces(chain)
            tq, tqd, tqdd = (torch.as_tensor(x[0]) for x in (q, qd, qdd))

            def partial_sum():
                total = torch.zeros(n, dtype=torch.float64)
                for i in range(n):
                    total[:i + 1] += column(i, tq, tqd, tqdd)
                return total

            row["autograd_whole"] = _time(lambda: whole(tq, tqd, tqdd), min_time)
            row["autograd_partial_sum"] = _time(partial_sum, min_time)
            row["autograd_critical_path"] = _time(lambda: column(n - 1, tq, tqd, tqdd), min_time)
            row["autograd_max_diff"] = float(max((whole(tq, tqd, tqdd).numpy() - Q[0]).__abs__().max(),
                                                 (partial_sum().numpy() - Q[0]).__abs__().max()))
        rows.append(row)
    return {"batch": batch, "rows": rows, "exponents": fit_exponents(rows)}


def fit_exponents(rows, n_min: int = 3) -> dict:
    """Slope of log(time) vs log(n) for every timed column, over n >= n_min."""
    sel = [r for r in rows if r["n"] >= n_min]
    if len(sel) < 2:
        return {}
    logn = np.log([r["n"] for r in sel])
    keys = [k for k in sel[0] if k not in ("n",) and not k.endswith("max_diff")]
    return {k: float(np.polyfit(logn, np.log([r[k] for r in sel]), 1)[0]) for k in keys}


def format_table(result: dict) -> str:
    rows = result["rows"]
    keys = [k for k in rows[0] if k != "n" and not k.endswith("max_diff")]
    lines = ["n  " + "".join(f"{k:>24}" for k in keys)]
    for r in rows:
        lines.append(f"{r['n']:<3}" + "".join(f"{1e6 * r[k]:>21.1f} us" for k in keys))
    lines.append("exp" + "".join(f"{result['exponents'].get(k, float('nan')):>24.2f}" for k in keys))
    return "\n".join(lines)


__all__ = ["measure", "fit_exponents", "format_table", "autograd_forces", "torch_link_lagrangian",
           "torch_euler_lagrange", "numpy_column"]

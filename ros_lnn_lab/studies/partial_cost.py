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
from typing import TYPE_CHECKING, Any

import numpy as np

from ros_lnn.physics.chain import PlanarChain
from ros_lnn.physics.lagrangian import NUMPY, dynamics
from ros_lnn_lab.studies.config import StudyConfig
from ros_lnn_lab.studies.figures import pyplot, save_figure

#: The study: seed 0; ``quick`` times each evaluation for 0.02 s instead of 0.2 s and the parallel columns
#: for n = 1 … 5 instead of 1 … 10, 12, 16, 24, 32.
DEFAULTS = StudyConfig(seeds=(0,))
QUICK = DEFAULTS.replace(quick=True)

if TYPE_CHECKING:
    import torch


def _time(fn, min_time=0.05, max_reps=2000) -> float:
    """Median seconds of one call (calls repeated for at least ``min_time``)."""
    fn()
    times: list[float]
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

    links = chain.links[: i + 1]
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
        return sum(part(q[: i + 1], qd[: i + 1]) for i, part in enumerate(parts))

    def whole(q, qd, qdd):
        return torch_euler_lagrange(whole_lagrangian, q, qd, qdd)

    def column(i, q, qd, qdd):
        return torch_euler_lagrange(parts[i], q[: i + 1], qd[: i + 1], qdd[: i + 1])

    return whole, column


def measure(ns=range(1, 11), batch: int = 1, seed: int = 0, autograd: bool = True, min_time=0.05) -> dict:
    """Seconds per evaluation of ``Q`` at ``batch`` random states for each n, and a check that the
    whole, partial-sum and autograd forces agree."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in ns:
        chain = PlanarChain.uniform(n, mass=1.0, length=0.5, com=0.25, inertia=0.02)
        q, qd, qdd = (rng.normal(size=(batch, n)) for _ in range(3))
        row = {
            "n": n,
            "numpy_whole": _time(lambda: chain.dynamics(q, qd, qdd=qdd)["Q"], min_time),
            "numpy_partial_sum": _time(lambda: chain.partial_forces(q, qd, qdd).sum(-1), min_time),
            "numpy_critical_path": _time(lambda: numpy_column(chain, q, qd, qdd, n - 1), min_time),
        }
        Q = chain.dynamics(q, qd, qdd=qdd)["Q"]
        row["numpy_max_diff"] = float(np.abs(chain.partial_forces(q, qd, qdd).sum(-1) - Q).max())
        if autograd:
            import torch

            whole, column = autograd_forces(chain)
            tq, tqd, tqdd = (torch.as_tensor(x[0]) for x in (q, qd, qdd))

            def partial_sum():
                total = torch.zeros(n, dtype=torch.float64)
                for i in range(n):
                    total[: i + 1] += column(i, tq, tqd, tqdd)
                return total

            row["autograd_whole"] = _time(lambda: whole(tq, tqd, tqdd), min_time)
            row["autograd_partial_sum"] = _time(partial_sum, min_time)
            row["autograd_critical_path"] = _time(lambda: column(n - 1, tq, tqd, tqdd), min_time)
            row["autograd_max_diff"] = float(
                max(
                    (whole(tq, tqd, tqdd).numpy() - Q[0]).__abs__().max(),
                    (partial_sum().numpy() - Q[0]).__abs__().max(),
                )
            )
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


# -- the columns in parallel ----------------------------------------------------------------------
#: Timed evaluations of :func:`measure_parallel`: torch.func (whole, serial, critical path, batched with
#: vmap) and the autograd engine (serial and on threads: torch.func is not thread-safe).
TIMED = ("whole", "serial", "critical_path", "batched", "serial_engine", "threads")


def padded_link_parameters(
    chain: PlanarChain,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every link's Lagrangian written over all n coordinates (reach zero past the link), stacked:
    ``reach`` (n, n), ``mass`` (n,), ``inertia`` (n,), ``own`` (n, n) one-hot of the link's own angle."""
    import torch

    n = chain.n
    if any(link.kind != "revolute" for link in chain.links):
        raise ValueError("the autograd cost model covers revolute chains only")
    reach = torch.zeros(n, n, dtype=torch.float64)
    for i, link in enumerate(chain.links):
        reach[i, :i] = torch.tensor([lk.length for lk in chain.links[:i]], dtype=torch.float64)
        reach[i, i] = link.com_offset
    mass = torch.tensor([lk.mass for lk in chain.links], dtype=torch.float64)
    inertia = torch.tensor([lk.inertia for lk in chain.links], dtype=torch.float64)
    return reach, mass, inertia, torch.eye(n, dtype=torch.float64)


def batched_columns(chain: PlanarChain):
    """``columns(q, q̇, q̈) -> (n, n)``: row i is ``D 𝓛_i`` (zero past coordinate i), every link's column
    in one vectorised evaluation (``torch.func.vmap`` over the links of the padded Lagrangians)."""
    import torch
    from torch.func import vmap

    params = padded_link_parameters(chain)
    g = chain.g

    def column(reach, m, inertia, own, q, qd, qdd):
        def lagrangian(q, qd):
            phi, phid = torch.cumsum(q, -1), torch.cumsum(qd, -1)
            y = -(reach * torch.cos(phi)).sum(-1)
            vx = (reach * torch.cos(phi) * phid).sum(-1)
            vy = (reach * torch.sin(phi) * phid).sum(-1)
            w = (own * phid).sum(-1)
            return 0.5 * m * (vx * vx + vy * vy) + 0.5 * inertia * w * w - m * g * y

        return torch_euler_lagrange(lagrangian, q, qd, qdd)

    over_links = vmap(column, in_dims=(0, 0, 0, 0, None, None, None))
    return lambda q, qd, qdd: over_links(*params, q, qd, qdd)


def engine_euler_lagrange(lagrangian, q, qd, qdd):
    """:func:`torch_euler_lagrange` through ``torch.autograd.grad`` (thread-safe; ``torch.func``'s transforms
    keep a process-global stack and fail when two threads run them): ``∂𝓛/∂q̇`` with a graph, then the
    forward product ``(∂p/∂q) q̇ + (∂p/∂q̇) q̈`` as the derivative of the vector–Jacobian product ``Jᵀu``
    with respect to ``u``."""
    import torch

    q, qd = q.detach().requires_grad_(True), qd.detach().requires_grad_(True)
    L = lagrangian(q, qd)
    dL_dq, p = torch.autograd.grad(L, (q, qd), create_graph=True)
    u = torch.zeros_like(p, requires_grad=True)
    Jt_u = torch.autograd.grad(p, (q, qd), grad_outputs=u, create_graph=True)
    p_dot = torch.autograd.grad(Jt_u, u, grad_outputs=(qd.detach(), qdd))[0]
    return (p_dot - dL_dq).detach()


def engine_column(chain: PlanarChain):
    """``column(i, q, q̇, q̈)``: link i's ``D 𝓛_i`` through the autograd engine (thread-safe)."""
    parts = [torch_link_lagrangian(chain, i) for i in range(chain.n)]

    def column(i, q, qd, qdd):
        return engine_euler_lagrange(parts[i], q[: i + 1], qd[: i + 1], qdd[: i + 1])

    return column


def threaded_columns(column, n: int, pool):
    """``columns(q, q̇, q̈) -> [D 𝓛_i]``: the serial columns submitted to a thread pool, gathered in order."""

    def columns(q, qd, qdd):
        futures = [pool.submit(column, i, q, qd, qdd) for i in range(n)]
        return [f.result() for f in futures]

    return columns


def parallel_row(n: int, rng, pool, min_time: float) -> dict:
    """One row of :func:`measure_parallel`: the timings and agreement checks for an n-link chain."""
    import torch

    chain = PlanarChain.uniform(n, mass=1.0, length=0.5, com=0.25, inertia=0.02)
    q, qd, qdd = (torch.as_tensor(rng.normal(size=n)) for _ in range(3))
    whole, column = autograd_forces(chain)
    batched = batched_columns(chain)
    engine = engine_column(chain)
    threaded = threaded_columns(engine, n, pool)

    def summed(columns):
        total = torch.zeros(n, dtype=torch.float64)
        for i, c in enumerate(columns):
            total[: i + 1] += c
        return total

    def serial_sum(column):
        return summed(column(i, q, qd, qdd) for i in range(n))

    serial_cols = [column(i, q, qd, qdd) for i in range(n)]
    engine_cols = [engine(i, q, qd, qdd) for i in range(n)]
    batch_cols, thread_cols = batched(q, qd, qdd), threaded(q, qd, qdd)
    past_own = [batch_cols[i, i + 1 :].abs().max() for i in range(n - 1)] or [torch.zeros(())]
    return {
        "n": n,
        "whole": _time(lambda: whole(q, qd, qdd), min_time),
        "serial": _time(lambda: serial_sum(column), min_time),
        "critical_path": _time(lambda: column(n - 1, q, qd, qdd), min_time),
        "batched": _time(lambda: batched(q, qd, qdd).sum(0), min_time),
        "serial_engine": _time(lambda: serial_sum(engine), min_time),
        "threads": _time(lambda: summed(threaded(q, qd, qdd)), min_time),
        "batched_vs_serial_max_diff": float(
            max((batch_cols[i, : i + 1] - serial_cols[i]).abs().max() for i in range(n))
        ),
        "batched_above_own_max": float(max(past_own)),
        "threads_vs_serial_max_diff": float(
            max((thread_cols[i] - engine_cols[i]).abs().max() for i in range(n))
        ),
        "engine_vs_func_max_diff": float(
            max((engine_cols[i] - serial_cols[i]).abs().max() for i in range(n))
        ),
        "sum_vs_whole_max_diff": float((batch_cols.sum(0) - whole(q, qd, qdd)).abs().max()),
    }


def measure_parallel(
    ns=(*range(1, 11), 12, 16, 24, 32),
    *,
    workers: int | None = None,
    min_time=0.05,
    seed: int = 0,
    plot_dir=None,
) -> dict:
    """Seconds per evaluation of ``Q`` (one state, torch autograd, the paper's method) for each n:
    ``whole`` (one Lagrangian), ``serial`` (columns one after the other, summed), ``critical_path`` (the
    costliest column: the bound with one worker per link), ``batched`` (every column in one vectorised
    evaluation, summed), and through the thread-safe autograd engine ``serial_engine`` and ``threads``
    (the columns on a pool of ``workers`` threads, summed). Also the largest difference of the parallel
    columns from the serial ones, and of their sum from the whole-system force."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    import torch

    workers = workers or os.cpu_count() or 1
    rng = np.random.default_rng(seed)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        rows = [parallel_row(n, rng, pool, min_time) for n in ns]
    timed = TIMED
    result: dict[str, Any] = {
        "workers": workers,
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "rows": rows,
        "exponents": fit_exponents([{k: r[k] for k in ("n", *timed)} for r in rows]),
        "exponents_n_ge_6": fit_exponents([{k: r[k] for k in ("n", *timed)} for r in rows], n_min=6),
    }
    if plot_dir:
        result["plot"] = plot_parallel(result, plot_dir)
    return result


def format_parallel(result: dict) -> str:
    timed = TIMED
    lines = [f"| n | {' | '.join(timed)} (µs per evaluation of Q) |", "| --- |" + " --- |" * len(timed)]
    for r in result["rows"]:
        lines.append(f"| {r['n']} | " + " | ".join(f"{1e6 * r[k]:.0f}" for k in timed) + " |")
    for key, label in (("exponents", "n ≥ 3"), ("exponents_n_ge_6", "n ≥ 6")):
        if result[key]:
            lines.append(
                f"| exponent ({label}) | " + " | ".join(f"{result[key][k]:.2f}" for k in timed) + " |"
            )
    return "\n".join(lines)


def plot_parallel(result: dict, plot_dir) -> str:
    from pathlib import Path

    plt = pyplot()

    Path(plot_dir).mkdir(parents=True, exist_ok=True)
    n = np.asarray([r["n"] for r in result["rows"]])
    fig, ax = plt.subplots(figsize=(6, 4.2))
    for key in TIMED:
        ax.loglog(
            n,
            [1e3 * r[key] for r in result["rows"]],
            "o-",
            ms=3,
            label=f"{key.replace('_', ' ')} (n^{result['exponents'].get(key, float('nan')):.2f})",
        )
    ax.set_xlabel("links n")
    ax.set_ylabel("ms per evaluation of Q (torch autograd, one state)")
    ax.set_title(f"partial Lagrangian columns in parallel ({result['workers']} threads)")
    ax.legend(fontsize=8)
    return save_figure(fig, Path(plot_dir) / "partial_lagrangian_parallel.png")


__all__ = [
    "measure",
    "fit_exponents",
    "format_table",
    "autograd_forces",
    "torch_link_lagrangian",
    "torch_euler_lagrange",
    "numpy_column",
    "padded_link_parameters",
    "batched_columns",
    "threaded_columns",
    "parallel_row",
    "measure_parallel",
    "format_parallel",
    "plot_parallel",
]


def run_study(config: StudyConfig = DEFAULTS) -> dict:
    """The whole study: :func:`measure` at batch 1 (with autograd) and 256 for n = 1 … 10, then
    :func:`measure_parallel` (plotted into ``config.output``); each table through ``config.progress``."""
    min_time = 0.02 if config.quick else 0.2
    result = {}
    for batch in (1, 256):
        r = measure(range(1, 11), batch=batch, seed=config.seed, autograd=(batch == 1), min_time=min_time)
        config.progress(
            f"batch {batch}: seconds per evaluation of Q (microseconds), exponents fitted over n = 3..10"
        )
        config.progress(format_table(r))
        result[f"batch_{batch}"] = r
    ns = range(1, 6) if config.quick else (*range(1, 11), 12, 16, 24, 32)
    parallel = measure_parallel(ns, min_time=min_time, seed=config.seed, plot_dir=config.output)
    config.progress(format_parallel(parallel))
    result["parallel"] = parallel
    return result

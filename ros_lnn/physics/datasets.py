"""Data sets of reference trials: the crane trials of the ServoLNN paper (Sec. 5) and small chain
excitation trials.

The paper does not publish its 11 input functions, only their kinds (Fig. 4): cosines, some with
several frequencies, some decaying, one stationary cart, and 4 force-driven trials replayed as
position input. The functions below are ours, of those kinds, with ``x(0) = 0`` and ``θ(0) ∈ {0, 1}``.
Samples are taken at the accepted steps of Dormand–Prince RK45 at rtol = atol = 1e-10, like the
paper's ode45 run (about 1 100 samples per 20 s trial; the paper's 5 test trials held 5 864).

Split (``paper_split``): train on stationary, cosine_a, multi_b, decay_b, force_a, force_b (θ(0) = 1
three times, 0 three times); test on cosine_b, multi_a, decay_a, force_c, force_d. The test trials'
ranges of q, q̇ and q̈ lie inside the training trials' ranges, so the test measures interpolation.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.integrate import solve_ivp

from ..errors import DataError
from .chain import PlanarChain
from .crane import Crane
from .simulate import CosineServo, SimulationError, equations_of_motion, simulate, stationary_servo
from .trials import Trial, load_trials, save_trials

DURATION = 20.0
TOLERANCE = 1e-10
CACHE_VERSION = 2


@dataclass(frozen=True)
class CraneTrialSpec:
    """One paper-like trial. ``kind`` "position": ``x(t) = Σ a (1 − e^{−λt} cos ωt)`` (so x(0) = 0).
    ``kind`` "force": cart force ``F(t) = Σ a e^{−λt} cos ωt`` on the all-free crane from rest,
    then the recorded ``x(t)`` replayed as the servo input."""

    name: str
    kind: str
    theta0: float
    amplitude: tuple = ()
    omega: tuple = ()
    decay: tuple = ()


# Which trials train and which test is fixed here (see paper_split).
PAPER_TRIALS = (
    CraneTrialSpec("stationary", "position", 1.0),
    CraneTrialSpec("cosine_a", "position", 0.0, (0.4,), (1.3,), (0.0,)),
    CraneTrialSpec("cosine_b", "position", 1.0, (0.25,), (2.9,), (0.0,)),
    CraneTrialSpec("multi_a", "position", 0.0, (0.3, 0.08), (0.9, 3.7), (0.0, 0.0)),
    CraneTrialSpec("multi_b", "position", 1.0, (-0.35, 0.1, 0.04), (1.7, 0.6, 5.1), (0.0, 0.0, 0.0)),
    CraneTrialSpec("decay_a", "position", 0.0, (0.5,), (2.2,), (0.25,)),
    CraneTrialSpec("decay_b", "position", 1.0, (0.3, -0.15), (1.1, 3.3), (0.1, 0.3)),
    CraneTrialSpec("force_a", "force", 0.0, (0.3,), (1.5,), (0.0,)),
    CraneTrialSpec("force_b", "force", 1.0, (0.2, 0.12), (0.8, 2.6), (0.0, 0.0)),
    CraneTrialSpec("force_c", "force", 0.0, (0.6,), (2.0,), (0.15,)),
    CraneTrialSpec("force_d", "force", 1.0, (-0.25, 0.2), (1.2, 3.1), (0.05, 0.2)),
)
PAPER_TEST_TRIALS = ("cosine_b", "multi_a", "decay_a", "force_c", "force_d")
PAPER_TRAIN_TRIALS = tuple(s.name for s in PAPER_TRIALS if s.name not in PAPER_TEST_TRIALS)


def position_servo(spec: CraneTrialSpec) -> CosineServo:
    a = np.array(spec.amplitude, dtype=float)
    return CosineServo(
        amplitude=-a[None],
        omega=np.array(spec.omega)[None],
        decay=np.array(spec.decay)[None],
        offset=np.array([a.sum()]),
    )


def force_function(spec: CraneTrialSpec):
    a, w, lam = (np.array(v, dtype=float) for v in (spec.amplitude, spec.omega, spec.decay))
    return lambda t: float(np.sum(a * np.exp(-lam * t) * np.cos(w * t)))


def force_driven_replay(crane: Crane, spec: CraneTrialSpec, **solver) -> Trial:
    """Simulate the all-free crane under the cart force, then replay its cart motion as servo input.

    The replay's servo trajectory is the force-driven solution's dense output (x, ẋ) with ẍ from the
    force-driven equations at that state, so its exact ``Q_e`` reproduces the applied force.
    """
    force = force_function(spec)
    rhs, _ = equations_of_motion(crane.with_servo([]), force=lambda t, q, qd: [0.0, force(t)])
    rtol, atol = solver.get("rtol", TOLERANCE), solver.get("atol", TOLERANCE)
    method = solver.get("method", "RK45")
    y0 = np.array([spec.theta0, 0.0, 0.0, 0.0])
    sol = solve_ivp(rhs, (0.0, DURATION), y0, method=method, rtol=rtol, atol=atol, dense_output=True)
    if not sol.success:
        raise SimulationError(f"crane force-driven trial '{spec.name}': {sol.message}")

    def servo(t):
        y = sol.sol(t)
        return y[1:2], y[3:4], rhs(t, y)[3:4]

    attrs = {"force_driven": True, "force_steps": int(len(sol.t) - 1)}
    trial = _simulate_spec(crane, spec, servo, method=method, rtol=rtol, atol=atol, attrs=attrs)
    trial.attrs["applied_force"] = "F(t) = sum a exp(-lambda t) cos(omega t)"
    return trial


def _simulate_spec(crane: Crane, spec: CraneTrialSpec, servo, **options) -> Trial:
    """The crane's trial ``spec`` over :data:`DURATION` from rest at ``spec.theta0`` under ``servo``."""
    return simulate(crane, DURATION, [spec.theta0], [0.0], servo=servo, name=spec.name, **options)


def crane_trial(crane: Crane, spec: CraneTrialSpec, **solver) -> Trial:
    attrs = {
        "spec": spec.__dict__
        | {"amplitude": list(spec.amplitude), "omega": list(spec.omega), "decay": list(spec.decay)}
    }
    if spec.kind == "force":
        trial = force_driven_replay(crane, spec, **solver)
    elif spec.kind == "position":
        servo = position_servo(spec) if spec.amplitude else stationary_servo([0.0])
        trial = _simulate_spec(crane, spec, servo, **{"rtol": TOLERANCE, "atol": TOLERANCE} | solver)
    else:
        raise SimulationError(f"crane trial '{spec.name}': unknown kind '{spec.kind}'")
    trial.attrs.update(attrs)
    return trial


def default_cache_dir() -> Path:
    """``$ROS_LNN_CACHE``, else the user's own cache folder (``$XDG_CACHE_HOME/ros_lnn`` or
    ``~/.cache/ros_lnn``): never a shared, predictable path that another user could fill first."""
    if os.environ.get("ROS_LNN_CACHE"):
        return Path(os.environ["ROS_LNN_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "ros_lnn"


def private_cache_dir(path: Path) -> bool:
    """Create ``path`` (mode 0700) if needed; True when it is a folder this user owns that nobody else
    may write to, so what is found in it can be trusted. (Where the platform has no uids, True.)"""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.stat()
    except OSError:
        return False
    if not hasattr(os, "getuid"):
        return path.is_dir()
    return path.is_dir() and st.st_uid == os.getuid() and not st.st_mode & 0o022


def _trusted_file(path: Path) -> bool:
    if not hasattr(os, "getuid"):
        return path.is_file()
    try:
        st = path.stat()
    except OSError:
        return False
    return path.is_file() and st.st_uid == os.getuid() and not st.st_mode & 0o022


def _cache_key(crane: Crane, specs, solver) -> str:
    blob = json.dumps(
        {
            "v": CACHE_VERSION,
            "crane": [crane.m1, crane.m2, crane.L, crane.g],
            "specs": [s.__dict__ for s in specs],
            "solver": solver,
            "T": DURATION,
        },
        sort_keys=True,
        default=list,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def paper_crane_trials(
    crane: Crane | None = None,
    *,
    cache: bool | str | os.PathLike = True,
    specs=PAPER_TRIALS,
    progress=None,
    **solver,
) -> list[Trial]:
    """The 11 crane trials (20 s each), sampled at the accepted RK45 steps at 1e-10.

    ``cache``: True = a file keyed by the parameters in :func:`default_cache_dir` (used only when that
    folder and the file belong to this user and nobody else may write them), a path = that file, False
    = always regenerate. The key covers the crane, the specs, the solver options and ``CACHE_VERSION``
    (bump it when the simulation itself changes). ``progress(name)`` is called before each trial.
    """
    crane = crane or Crane()
    path = None
    if cache is True:
        folder = default_cache_dir()
        if private_cache_dir(folder):
            path = folder / f"crane_trials_{_cache_key(crane, specs, solver)}.npz"
    elif cache:
        path = Path(cache)
    if path is not None and _trusted_file(path):
        try:
            return load_trials(path)
        except DataError:
            pass  # a damaged cache file is regenerated below
    trials = []
    for spec in specs:
        if progress:
            progress(spec.name)
        trials.append(crane_trial(crane, spec, **solver))
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        save_trials(path, trials)
        path.chmod(0o600)
    return trials


SAMPLE_KEYS = ("t", "q", "qd", "qdd", "Q", "T", "V", "E", "M")


def split_record(train: dict, test: dict, seed: int) -> dict:
    """The run's ``split`` entry for a train/test split: each side's trial names and sample count
    (samples counted by ``q``), and the seed that drew it."""
    return {
        "train_trials": train["names"],
        "test_trials": test["names"],
        "n_train": len(train["q"]),
        "n_test": len(test["q"]),
        "split_seed": seed,
    }


def split_trials(trials, test_names, n_train: int | None = None, seed: int = 0) -> tuple[dict, dict]:
    """Train on the trials not in ``test_names`` (every sample, or ``n_train`` drawn without replacement
    with ``seed``), test on every sample of the ``test_names`` trials. Each side is a dict of stacked
    arrays plus ``trial`` (index into ``trials``) and ``names``. The callers check the names."""
    names = [tr.name for tr in trials]

    def pool(idx):
        out = {k: np.concatenate([getattr(trials[i], k) for i in idx]) for k in SAMPLE_KEYS}
        out["trial"] = np.concatenate([np.full(len(trials[i]), i) for i in idx])
        return out

    train_idx = [i for i, n in enumerate(names) if n not in test_names]
    test_idx = [i for i, n in enumerate(names) if n in test_names]
    train = pool(train_idx)
    total = len(train["t"])
    if n_train is not None and n_train < total:
        pick = np.sort(np.random.default_rng(seed).choice(total, n_train, replace=False))
        train = {k: v[pick] for k, v in train.items()}
    test = pool(test_idx)
    train["names"] = [names[i] for i in train_idx]
    test["names"] = [names[i] for i in test_idx]
    return train, test


def paper_split(
    trials, n_train_samples: int = 4096, seed: int = 0, test_names=PAPER_TEST_TRIALS
) -> tuple[dict, dict]:
    """Train: ``n_train_samples`` random samples (without replacement) pooled from the trials not in
    ``test_names`` (the paper's 6); test: every sample of the ``test_names`` trials (the paper's 5).
    Each side is a dict of stacked arrays plus ``trial`` (index into ``trials``) and ``names``
    (:func:`split_trials`)."""
    names = [tr.name for tr in trials]
    missing = [n for n in test_names if n not in names]
    if missing:
        raise SimulationError(f"paper_split: test trials {missing} are not among {names}")
    total = sum(len(tr) for tr in trials if tr.name not in test_names)
    if n_train_samples > total:
        raise SimulationError(
            f"paper_split: {n_train_samples} training samples requested, "
            f"the training trials hold only {total}"
        )
    return split_trials(trials, test_names, n_train_samples, seed)


def chain_trials(
    chain: PlanarChain | None = None,
    *,
    n_trials: int = 3,
    duration: float = 5.0,
    seed: int = 0,
    rtol: float = 1e-9,
    atol: float = 1e-9,
    **solver,
) -> list[Trial]:
    """A few excitation trials of a chain: servo joints follow random two-frequency cosines about
    their start, free joints start at small random angles/extensions at rest."""
    chain = chain or PlanarChain.uniform(2, servo_joints=("joint_1",))
    rng = np.random.default_rng(seed)
    n_f, n_e = len(chain.partition.free), len(chain.partition.servo)
    trials = []
    for k in range(n_trials):
        servo = None
        if n_e:
            a = rng.uniform(-0.4, 0.4, (n_e, 2))
            servo = CosineServo(
                amplitude=a, omega=rng.uniform(0.5, 3.0, (n_e, 2)), phase=rng.uniform(0, 2 * np.pi, (n_e, 2))
            )
        q0 = rng.uniform(-0.5, 0.5, n_f)
        trials.append(
            simulate(
                chain,
                duration,
                q0,
                np.zeros(n_f),
                servo=servo,
                rtol=rtol,
                atol=atol,
                name=f"chain_{k}",
                attrs={"links": chain.describe()},
                **solver,
            )
        )
    return trials

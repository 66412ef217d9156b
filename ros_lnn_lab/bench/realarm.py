"""``ros-lnn bench realarm``: a fully actuated arm's held-out torque error — the learned model
(least-squares fit + residual + gear ripple + fast torque) against the one-second regressor
least-squares fit and the URDF's nominal parameters, trained on ``--bag`` and tested on
``--test-bag`` (or on the last ``--test-fraction`` of each training recording).

Without a URDF (no ``--urdf``, no ``robot_description``) the learned model is the DeLaN with joint
friction (:mod:`ros_lnn.arm.delan`), compared with predicting zero torque and with the friction-only
model (per-joint least squares of viscous, Coulomb and offset)."""

from __future__ import annotations

import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from ros_lnn.errors import ConfigError


def _mapping(args):
    from ros_lnn.arm.mapping import ArmMapping

    if not args.config:
        raise ConfigError("bench realarm needs --config: a YAML whose bag: section lists actuated_joints")
    mapping = ArmMapping.from_yaml(args.config)
    urdf = args.urdf or mapping.robot_description
    if not urdf:
        return mapping, None
    if not args.urdf and not Path(urdf).is_absolute():
        urdf = str(Path(args.config).parent / urdf)
    return mapping, urdf


def _split(args, mapping):
    from ros_lnn.arm.recording import read_arm_bag

    recordings = [read_arm_bag(b, mapping) for b in args.bag]
    if args.test_bag:
        train = recordings
        test = [read_arm_bag(b, mapping) for b in args.test_bag]
        split = f"test recordings {', '.join(r.name for r in test)}"
    else:
        frac = args.test_fraction
        if not 0 < frac < 0.9:
            raise ConfigError(f"--test-fraction {frac}: give a value in (0, 0.9)")
        train = [r.part(0.0, 1.0 - frac, f"{r.name}[:{1 - frac:.0%}]") for r in recordings]
        test = [r.part(1.0 - frac, 1.0, f"{r.name}[{1 - frac:.0%}:]") for r in recordings]
        split = f"first {1 - frac:.0%} of each recording for training, last {frac:.0%} held out"
    print(f"bench realarm: {mapping.describe()}; {split}")
    return train, test


class _Table:
    """Rows of held-out torque rre per joint, overall and while moving, standing and near reversals
    (:func:`ros_lnn.arm.evaluation.motion_phases`)."""

    def __init__(self, samples) -> None:
        from ros_lnn.arm.evaluation import motion_phases

        self.tau = samples.tau
        self.phases = motion_phases(samples.t, samples.qd, samples.starts)
        self.rows: list[dict] = []

    def row(self, name, pred, seconds) -> float:
        from ros_lnn.arm import identification as idn
        from ros_lnn.arm.evaluation import phase_rre

        rre = idn.relative_error_percent(self.tau, pred)
        phases = phase_rre(self.tau, pred, self.phases)
        self.rows.append(
            {
                "model": name,
                "rre": rre.tolist(),
                "mean": float(np.nanmean(rre)),
                "worst": float(np.nanmax(rre)),
                "train_s": seconds,
                **{f"{k}_rre": v["rre"].tolist() for k, v in phases.items()},
                **{f"{k}_mean": _nanmean(v["rre"]) for k, v in phases.items()},
            }
        )
        return float(np.nanmean(rre))

    def print(self, joints) -> None:
        from ros_lnn.arm.evaluation import PHASES, REVERSAL_WINDOW_S, STILL_VELOCITY

        width = max(len(r["model"]) for r in self.rows)
        print(f"\nheld-out torque rre per joint [%] ({', '.join(joints)})")
        print(f"{'model':<{width}}  {'mean':>6}  {'worst':>6}  {'train s':>8}  per joint")
        for r in self.rows:
            secs = "—" if r["train_s"] is None else f"{r['train_s']:.1f}"
            print(
                f"{r['model']:<{width}}  {r['mean']:6.1f}  {r['worst']:6.1f}  {secs:>8}  "
                + " ".join(f"{v:5.1f}" for v in r["rre"])
            )
        share = {k: self.phases[k].mean(axis=0) for k in PHASES}
        print(
            f"\nby what the joint does (standing: |q̇| < {STILL_VELOCITY:g} rad/s; reversing: moving within "
            f"{REVERSAL_WINDOW_S:g} s of a change of q̇'s sign; moving: the rest); share of samples per joint:"
            " " + "; ".join(f"{k} " + " ".join(f"{v:.2f}" for v in share[k]) for k in PHASES)
        )
        print(f"{'model':<{width}}  {'phase':<9}  {'mean':>6}  per joint")
        for r in self.rows:
            for k in PHASES:
                mean = r[f"{k}_mean"]
                print(
                    f"{r['model']:<{width}}  {k:<9}  {'—' if mean is None else f'{mean:.1f}':>6}  "
                    + " ".join("    —" if not np.isfinite(v) else f"{v:5.1f}" for v in r[f"{k}_rre"])
                )


def _nanmean(values) -> float | None:
    values = np.asarray(values, dtype=float)
    return float(np.nanmean(values)) if np.isfinite(values).any() else None


def fast_band(s) -> dict:
    """What the filter takes from the raw torque: per joint its share of the torque (100·‖τ − τ_f‖/‖τ‖)
    and its mean magnitude-squared coherence with the logged velocity between the cutoff and 100 Hz
    (or 0.4 × the sample rate) — the part a model of the measured motion can still predict."""
    from scipy.signal import coherence

    fast = s.tau_raw - s.tau
    share = 100.0 * np.linalg.norm(fast, axis=0) / np.linalg.norm(s.tau_raw, axis=0)
    lo, hi = s.cutoff_hz, min(100.0, 0.4 * s.rate_hz)
    coh = []
    for j in range(fast.shape[1]):
        f, c = coherence(fast[:, j], s.qd_measured[:, j], s.rate_hz, nperseg=min(1024, len(fast) // 4))
        inside = (f > lo) & (f < hi)
        coh.append(float(np.mean(c[inside])) if inside.any() else float("nan"))
    return {"share_percent": share.tolist(), "coherence": coh, "band_hz": (lo, hi)}


def _filtered_split(train, test, mapping):
    """The training and held-out samples filtered as ``mapping`` says (the held-out torque left raw) and
    :func:`fast_band` of the held-out recordings, each described in a printed line: ``(tr, te, band)``."""
    from ros_lnn.arm.samples import filtered_samples

    tr = filtered_samples(train, mapping.filter_cutoff_hz, mapping.gap_factor)
    te = filtered_samples(test, mapping.filter_cutoff_hz, mapping.gap_factor, raw_tau=True)
    print(f"{len(tr)} training samples, {len(te)} test samples at {te.rate_hz:.0f} Hz")
    band = fast_band(filtered_samples(test, mapping.filter_cutoff_hz, mapping.gap_factor))
    print(
        f"held out, above the {te.cutoff_hz:g} Hz filter: torque share [%] "
        + " ".join(f"{v:.1f}" for v in band["share_percent"])
        + f"; coherence with the logged velocity ({band['band_hz'][0]:g}–{band['band_hz'][1]:g} Hz mean) "
        + " ".join(f"{v:.2f}" for v in band["coherence"])
    )
    return tr, te, band


def bench_realarm(args) -> dict:
    from ros_lnn.arm import friction
    from ros_lnn.arm import identification as idn
    from ros_lnn.arm.model import ArmModel
    from ros_lnn.arm.rigid_body import ArmRigidBody
    from ros_lnn.arm.training import train_arm

    if not args.bag:
        raise ConfigError("bench realarm needs --bag TRAIN... (and --test-bag TEST, or --test-fraction)")
    mapping, urdf = _mapping(args)
    if urdf is None:
        return bench_realarm_delan(args, mapping)
    train, test = _split(args, mapping)
    arm = ArmRigidBody.from_urdf(urdf, mapping.actuated_joints)
    tr, te, band = _filtered_split(train, test, mapping)
    table = _Table(te)
    row = table.row
    rows = table.rows
    from ros_lnn.arm.evaluation import filter_floor

    floor = filter_floor(te)

    nominal = arm.inverse_dynamics(te.q, te.qd, te.qdd)
    n_mean = row("URDF nominal parameters, no fit", nominal, None)
    row("zero torque", np.zeros_like(te.tau), None)
    t0 = time.perf_counter()
    A = friction.regressor(tr.qd, mapping.coulomb_velocity)
    nom_tr = arm.inverse_dynamics(tr.q, tr.qd, tr.qdd)
    w = 1.0 / np.std(tr.tau, axis=0)
    Aw, bw = idn.weighted_rows(A, tr.tau - nom_tr, w)
    phi = np.linalg.lstsq(Aw, bw, rcond=None)[0]
    row(
        "URDF nominal + friction fitted",
        nominal + friction.torque(phi, te.qd, mapping.coulomb_velocity),
        time.perf_counter() - t0,
    )
    t0 = time.perf_counter()
    fit = idn.identify(arm, tr.q, tr.qd, tr.qdd, tr.tau, coulomb_velocity=mapping.coulomb_velocity)
    ols_s = time.perf_counter() - t0
    r_mean = row(
        "regressor least squares + friction (baseline)", idn.predict(arm, fit, te.q, te.qd, te.qdd), ols_s
    )
    print(
        f"least squares: {fit.base_count} base parameters, condition number "
        f"{fit.condition_number:.1f}, {ols_s:.1f} s"
    )
    friction_laws(arm, tr, te, mapping, row)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.output or tmp) / "realarm_model.onnx"
        t0 = time.perf_counter()
        from ros_lnn.arm.residual import ResidualOptions

        options = ResidualOptions(seed=getattr(args, "seed", 0) or 0)
        if args.epochs:
            options = replace(options, epochs=args.epochs)
        result = train_arm(train, urdf, mapping, out=out, options=options, progress=lambda s: print(f"  {s}"))
        learned_s = time.perf_counter() - t0
        model = ArmModel(out)
        if model.memory is not None:
            row(
                "learned, its friction memory taken out (ablation)",
                model.torque_of(te) - _held(model, te),
                None,
            )
        if model.fast.active:
            row("learned, without its fast torque", model.torque_of(te, fast=False), None)
        l_mean = row(
            "learned: fit + residual + gear ripple + fast torque (ros_lnn)",
            model.torque_of(te),
            learned_s,
        )
    table.print(mapping.actuated_joints)
    print(
        "raw torque against its own filtered copy (what no model of the filtered motion follows) [%]: "
        f"mean {np.nanmean(floor):.1f}, per joint " + " ".join(f"{v:.1f}" for v in floor)
    )
    ratio = l_mean / r_mean
    ls, rs = rows[-1]["standing_mean"], next(r for r in rows if "baseline" in r["model"])["standing_mean"]
    standing = (
        "standing: no joint stands long enough in the held-out data"
        if ls is None or rs is None
        else f"standing: learned {ls:.2f}, regressor-OLS {rs:.2f}, ratio Ls/Rs = {ls / rs:.3f}"
    )
    print(
        f"held-out torque rre [%]: learned {l_mean:.2f}, regressor-OLS {r_mean:.2f}, "
        f"URDF-nominal {n_mean:.2f}, ratio L/R = {ratio:.3f}; {standing}"
    )
    return {
        "rows": rows,
        "joints": list(mapping.actuated_joints),
        "learned": l_mean,
        "regressor_ols": r_mean,
        "urdf_nominal": n_mean,
        "ratio": ratio,
        "standing_learned": ls,
        "standing_regressor_ols": rs,
        "standing_ratio": None if ls is None or rs is None else ls / rs,
        "filter_floor": floor.tolist(),
        "train_s": learned_s,
        "residual": result.metrics["residual"],
        "friction_memory": result.metrics["friction_memory"],
        "ripple": result.metrics["ripple"],
        "fast_torque": result.metrics["fast_torque"],
        "above_filter": band,
    }


def bench_realarm_delan(args, mapping) -> dict:
    """No URDF: zero torque, the friction-only model and DeLaN + friction on the held-out data."""
    from ros_lnn.arm import friction
    from ros_lnn.arm.delan import DelanOptions, friction_least_squares, train_delan_recordings

    train, test = _split(args, mapping)
    print("no URDF (no --urdf, no robot_description): the learned model is DeLaN + joint friction")
    tr, te, _ = _filtered_split(train, test, mapping)
    table = _Table(te)
    table.row("zero torque", np.zeros_like(te.tau), None)
    t0 = time.perf_counter()
    phi = friction_least_squares(tr.qd, tr.tau, mapping.coulomb_velocity)
    f_mean = table.row(
        "friction only (least squares per joint)",
        friction.torque(phi, te.qd, mapping.coulomb_velocity),
        time.perf_counter() - t0,
    )
    options = DelanOptions(epochs=args.epochs) if args.epochs else DelanOptions()
    t0 = time.perf_counter()
    result = train_delan_recordings(train, mapping, options, progress=lambda s: print(f"  {s}", flush=True))
    learned_s = time.perf_counter() - t0
    l_mean = table.row("DeLaN + friction (ros_lnn, no URDF)", result.predict(te.q, te.qd, te.qdd), learned_s)
    table.print(mapping.actuated_joints)
    ratio = l_mean / f_mean
    print(
        f"held-out torque rre [%]: learned {l_mean:.2f}, friction-only {f_mean:.2f}, ratio L/F = {ratio:.3f}"
    )
    return {
        "rows": table.rows,
        "joints": list(mapping.actuated_joints),
        "learned": l_mean,
        "friction_only": f_mean,
        "ratio": ratio,
        "train_s": learned_s,
        "delan": {
            "epochs_planned": result.epochs_planned,
            "epochs_run": result.epochs_run,
            "best_epoch": result.best_epoch,
            "stopped_early": result.stopped_early,
            "timed_out": result.timed_out,
            "validation_error": result.val_error,
            "validation_error_friction_only": result.val_error_start,
        },
    }


def friction_laws(arm, tr, te, mapping, row) -> None:
    """Friction with memory, compared by measurement: the regressor least squares with each candidate
    law's columns beside the rigid body and the memoryless friction — the sign of the last motion (one
    stop operator of 0.1 mrad), one smooth Dahl element (LuGre's bristle; its width chosen on the last
    20 % of the training samples), and the package's bank of stop operators (Maxwell-slip)."""
    from ros_lnn.arm import identification as idn
    from ros_lnn.arm.presliding import WIDTHS, FrictionMemory, dahl_outputs

    def bank(widths):
        m = FrictionMemory(np.asarray(widths), np.zeros((arm.n, len(widths))))
        return lambda s: m.outputs(s.q_measured, s.starts)

    def dahl(width):
        return lambda s: dahl_outputs(s.q_measured, width, s.starts)[:, :, None]

    def fit_and_predict(outputs, on, at):
        fitted = idn.identify(
            arm, on.q, on.qd, on.qdd, on.tau, coulomb_velocity=mapping.coulomb_velocity,
            memory_outputs=outputs(on),
        )  # fmt: skip
        return idn.predict(arm, fitted, at.q, at.qd, at.qdd, outputs(at))

    cut = int(0.8 * len(tr))
    head, tail = _subset(tr, 0, cut), _subset(tr, cut, len(tr))
    scores = {
        w: float(np.mean(idn.relative_error_percent(tail.tau, fit_and_predict(dahl(w), head, tail))))
        for w in WIDTHS
    }
    best = min(scores, key=scores.__getitem__)
    for name, outputs in (
        ("fit + sign of the last motion (one 0.1 mrad stop)", bank([1e-4])),
        (f"fit + one smooth Dahl element ({1e3 * best:g} mrad)", dahl(best)),
        (f"fit + Maxwell-slip, {len(WIDTHS)} stop operators", bank(WIDTHS)),
    ):
        t0 = time.perf_counter()
        pred = fit_and_predict(outputs, tr, te)
        row(name, pred, time.perf_counter() - t0)


def _subset(s, a: int, b: int):
    """Samples ``a:b`` of ``s`` (the pieces that start inside)."""
    from dataclasses import fields

    values = {f.name: getattr(s, f.name) for f in fields(s)}
    for key, v in values.items():
        if isinstance(v, np.ndarray) and len(v) == len(s):
            values[key] = v[a:b]
    values["starts"] = (0, *(x - a for x in s.starts if a < x < b))
    return type(s)(**values)


def _held(model, samples) -> np.ndarray:
    """The memory torque of ``model`` along ``samples`` (their logged positions, pieces started neutral)."""
    return model.memory.torque(samples.q_measured, samples.starts)

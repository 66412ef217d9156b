"""Train an arm model: least squares on the base parameters (seconds), then the learned residual
(torch), then the ONNX file with its metadata. See :mod:`ros_lnn.arm.identification` and
:mod:`ros_lnn.arm.residual`."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import __version__
from ..errors import DataError
from . import identification as idn
from . import presliding
from .fast_torque import FastTorque, fit_fast_torque
from .mapping import ArmMapping
from .model import arm_metadata
from .presliding import FrictionMemory
from .recording import ArmRecording
from .rigid_body import ArmRigidBody
from .samples import Samples, filtered_samples

#: weights of the URDF prior tried (0: plain least squares on the base parameters)
PRIOR_WEIGHTS = (0.0, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)
#: a joint keeps its friction memory where it lowers the validation torque error by this fraction
MEMORY_MIN_GAIN = 0.01


@dataclass
class ArmTrainResult:
    path: Path | None
    fit: idn.ArmFit
    residual_enabled: bool
    metrics: dict
    log: list = field(default_factory=list)
    train_s: float = 0.0


def split_validation(recordings: list[ArmRecording], fraction: float) -> tuple[list, list]:
    """The last ``fraction`` of each recording (a contiguous stretch) for validation."""
    if not 0.0 < fraction < 0.9:
        raise DataError(f"validation fraction {fraction}: give a value in (0, 0.9)")
    train = [r.part(0.0, 1.0 - fraction, f"{r.name}[train]") for r in recordings]
    val = [r.part(1.0 - fraction, 1.0, f"{r.name}[val]") for r in recordings]
    return train, val


def train_arm(
    train: list[ArmRecording],
    urdf,
    mapping: ArmMapping,
    *,
    out=None,
    validation: list[ArmRecording] | None = None,
    val_fraction: float = 0.2,
    residual: str = "auto",
    ripple: str = "auto",
    fast_torque: str = "auto",
    friction_memory: str | None = None,
    options=None,
    progress=None,
) -> ArmTrainResult:
    """``residual`` / ``ripple`` / ``fast_torque`` / ``friction_memory``: auto (trained, kept where it
    helps on validation) or off; ``friction_memory`` None: the mapping's."""
    import torch

    from .residual import ResidualEnsemble, ResidualNet, ResidualOptions, export_arm_onnx, train_residual
    from .ripple import Ripple, fit_ripple

    log: list[str] = []

    def say(text):
        log.append(text)
        if progress:
            progress(text)

    start = time.perf_counter()
    options = options or ResidualOptions()
    arm = ArmRigidBody.from_urdf(urdf, mapping.actuated_joints)
    if arm.locked:
        say(f"URDF joints locked at their neutral position (not actuated): {', '.join(arm.locked)}")
    if validation is None:
        train, validation = split_validation(train, val_fraction)
        say(f"validation: the last {val_fraction:.0%} of each training recording")
    else:
        say(f"validation: {', '.join(r.name for r in validation)}")
    tr = filtered_samples(train, mapping.filter_cutoff_hz, mapping.gap_factor)
    va = filtered_samples(validation, mapping.filter_cutoff_hz, mapping.gap_factor)
    say(
        f"{len(tr)} training, {len(va)} validation samples at {tr.rate_hz:.0f} Hz; "
        f"zero-phase Butterworth {tr.cutoff_hz:g} Hz on q, q̇ (→ q̈) and τ; {mapping.describe()}"
    )
    every = tr + va
    t0 = time.perf_counter()
    memory = _memory_outputs(tr, va, friction_memory or mapping.friction_memory, say)
    fit, best_gamma, choice, memory_report = _least_squares(arm, tr, va, mapping, memory, say)
    fit_s = time.perf_counter() - t0
    say(f"least-squares fit: {fit_s:.1f} s")
    for joint, m in fit.report["masses_kg"].items():
        say(f"  body of {joint}: mass {m:.3f} kg (URDF {fit.report['urdf_masses_kg'][joint]:.3f})")
    bank = None if fit.memory is None or memory is None else FrictionMemory(memory.widths, fit.memory)
    s_tr, s_va = (None, None) if bank is None or memory is None else memory.kept_outputs(bank.weights)
    fit_tr = idn.predict(arm, fit, tr.q, tr.qd, tr.qdd, s_tr)
    fit_va = idn.predict(arm, fit, va.q, va.qd, va.qdd, s_va)
    prismatic = [
        arm.model.joints[arm.model.getJointId(j)].shortname().startswith("JointModelP") for j in arm.joints
    ]
    net: ResidualNet | ResidualEnsemble
    if residual == "off":
        n = arm.n
        with torch.random.fork_rng(devices=[]):  # unused weights, but the same file for the same data
            torch.manual_seed(options.seed)
            net = ResidualNet(
                n,
                options.inputs,
                prismatic,
                4,
                np.zeros((n, 4)),
                np.ones((n, 4)),
                np.ones(n),
                mapping.coulomb_velocity,
            )
        net.enabled.fill_(0.0)
        res_info = {"enabled": False, "reason": "residual: off"}
        enabled = False
        say("residual: off (the least-squares fit alone)")
    else:
        res = train_residual(
            tr.q,
            tr.qd,
            tr.tau - fit_tr,
            va.q,
            va.qd,
            va.tau - fit_va,
            prismatic,
            mapping.coulomb_velocity,
            options,
            say,
        )
        net, enabled = res.net, res.enabled
        res_info = {
            "enabled": enabled,
            "inputs": options.inputs,
            "epochs_run": res.epochs_run,
            "members": res.members,
            "best_epoch": res.best_epoch,
            "validation_gain_percent": res.gain_percent,
            "train_s": res.train_s,
        }
        verdict = "kept" if enabled else f"switched off (gain below {100 * options.min_gain:g} %)"
        say(
            f"residual ({options.inputs} inputs): validation error {res.val_error:.4g} vs fit alone "
            f"{res.val_error_fit:.4g} ({res.gain_percent:+.1f} %) after {res.epochs_run} epochs: {verdict}"
        )
    if ripple == "off":
        rip = Ripple.none(arm.n)
        say("gear ripple: off")
    else:
        # the ripple lives above the filter's cutoff: fitted to what the filter removed from τ
        rip = fit_ripple(every.q, every.qd, every.tau_raw - every.tau, every.rate_hz)
        for j, info in rip.report["joints"].items():
            if info["kept"]:
                say(
                    f"gear ripple {arm.joints[j]} ({info['variant']}): "
                    f"strongest line {info['strongest_k']:.1f} rad⁻¹, "
                    f"cross-validated error of the raw torque {-info['validation_gain_percent']:+.1f} %"
                )
        off = [arm.joints[j] for j, info in rip.report["joints"].items() if not info["kept"]]
        if off:
            say(f"gear ripple off for {', '.join(off)} (no gain on validation or not resolvable)")
    fast = _fit_fast(tr, va, fit_tr, fit_va, net if enabled else None, rip, fast_torque, say)
    enabled = enabled or bool(np.any(rip.k))  # the graph's residual output; the fast torque is apart
    metrics = {
        "validation_torque_rre_percent_fit": idn.relative_error_percent(va.tau, fit_va).tolist(),
        "training_samples": len(tr),
        "validation_samples": len(va),
        "rate_hz": tr.rate_hz,
        "cutoff_hz": tr.cutoff_hz,
        "fit_s": fit_s,
        "prior_weight": best_gamma,
        "prior_weight_validation_rre": {f"{g:g}": e for e, g in choice},
        "residual": res_info,
        "ripple": {arm.joints[j]: info for j, info in rip.report["joints"].items()},
        "fast_torque": {arm.joints[j]: info for j, info in fast.report["joints"].items()},
        "friction_memory": memory_report,
    }
    result = ArmTrainResult(None, fit, enabled, metrics, log)
    result.train_s = time.perf_counter() - start
    if out is not None:
        meta = arm_metadata(
            arm,
            fit.pi,
            fit.phi,
            mapping.coulomb_velocity,
            enabled,
            identification={k: v for k, v in fit.report.items() if k != "bodies"},
            metrics=metrics,
            mapping={k: (list(v) if isinstance(v, tuple) else v) for k, v in mapping.arm_dict().items()},
            data={
                "train": [r.name for r in train],
                "validation": [r.name for r in validation],
                "sha256": sorted({r.sha256 for r in train + validation if r.sha256}),
            },
            package_version=__version__,
            train_s=result.train_s,
            fast_torque=fast.to_metadata(),
            friction_memory=None if bank is None else bank.to_metadata(),
        )
        result.path = export_arm_onnx(out, fit.phi, mapping.coulomb_velocity, net, rip, meta, bank)
        say(f"wrote {result.path}")
    return result


@dataclass
class _Memory:
    """The stop operators' outputs along the training and validation samples (each piece started
    neutral) and, per training sample and joint, whether the state there is known."""

    widths: np.ndarray
    s_tr: np.ndarray  # (N, n, K)
    s_va: np.ndarray
    known_tr: np.ndarray  # (N, n)

    @property
    def k(self) -> int:
        return len(self.widths)

    def kept_outputs(self, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The outputs with the joints whose memory is off (zero weights) set to zero."""
        kept = np.any(weights != 0, axis=1)[None, :, None]
        return self.s_tr * kept, self.s_va * kept


def _memory_outputs(tr: Samples, va: Samples, mode: str, say) -> _Memory | None:
    if mode == "off":
        say("friction memory: off")
        return None
    bank = FrictionMemory(np.asarray(presliding.WIDTHS), np.zeros((tr.q.shape[1], len(presliding.WIDTHS))))
    known = bank.known(tr.q_measured, tr.starts)
    warm = int(np.count_nonzero(~known.all(axis=1)))
    say(
        f"friction memory: {bank.k} stop operators per joint (widths "
        + ", ".join(f"{w:g}" for w in bank.widths)
        + f" rad) on the logged positions; {warm} training samples before every joint's state is known "
        "(warm-up) are left out of the joints still unknown"
    )
    return _Memory(
        bank.widths, bank.outputs(tr.q_measured, tr.starts), bank.outputs(va.q_measured, va.starts), known
    )


def _least_squares(arm, tr: Samples, va: Samples, mapping: ArmMapping, memory: _Memory | None, say):
    """The weighted least-squares fit (URDF prior weight chosen on validation, the physically consistent
    refit) with friction memory kept per joint where validation says it helps. Returns ``(fit, prior
    weight, [(validation rre, weight)], memory report)``."""
    cv = mapping.coulomb_velocity
    n_rigid = arm.n_params + 3 * arm.n
    base0 = idn.structural_base(arm)
    K = 0 if memory is None else memory.k
    base = base0.with_memory(arm.n * K)
    s_tr = None if memory is None else memory.s_tr
    s_va = None if memory is None else memory.s_va
    A_tr = idn.full_regressor(arm, tr.q, tr.qd, tr.qdd, cv, s_tr)
    rows = None if memory is None else memory.known_tr
    problem = idn.weighted_problem(A_tr, tr.tau, base, rows)  # shared by every prior weight and the refit

    def val_rre(fit, outputs):
        return idn.relative_error_percent(va.tau, idn.predict(arm, fit, va.q, va.qd, va.qdd, outputs))

    fits: dict[float, idn.ArmFit] = {}
    choice: list[tuple[float, float]] = []
    for gamma in PRIOR_WEIGHTS:
        trial = idn.identify(
            arm, tr.q, tr.qd, tr.qdd, tr.tau, coulomb_velocity=cv, base=base, prior_weight=gamma,
            regressor=A_tr, problem=problem, memory_outputs=s_tr, progress=say if gamma == 0 else None,
        )  # fmt: skip
        choice.append((float(np.mean(val_rre(trial, s_va))), gamma))
        fits[gamma] = trial
    gamma = min(choice)[1]
    say(
        "URDF prior weight on validation (mean torque rre %): "
        + ", ".join(f"{g:g}: {e:.2f}" for e, g in choice)
        + f" → {gamma:g}"
        + (" (plain least squares)" if gamma == 0 else "")
    )
    consistent = fits[gamma].report["physically_consistent"]
    say(
        f"physically consistent bodies in the fit: {sum(consistent.values())} of {arm.n}"
        + (
            ""
            if all(consistent.values())
            else f"; not: {', '.join(j for j, ok in consistent.items() if not ok)}"
        )
    )

    def refit(fit, A, prob, outputs):
        if not mapping.physically_consistent:
            return fit
        t1 = time.perf_counter()
        out = idn.identify_consistent(arm, fit, A, tr.tau, gamma, prob)
        say(
            f"physically consistent refit (log-Cholesky, {out.report['consistent_fit']['iterations']} "
            f"evaluations, {time.perf_counter() - t1:.1f} s): validation torque rre "
            f"{np.mean(val_rre(out, outputs)):.2f} % (unconstrained {np.mean(val_rre(fit, outputs)):.2f} %); "
            f"consistent bodies {sum(out.report['physically_consistent'].values())} of {arm.n}"
        )
        return out

    fit = refit(fits[gamma], A_tr, problem, s_va)
    if memory is None:
        return fit, gamma, choice, {"enabled": False, "reason": "friction memory: off"}
    base_m0 = base.without_memory(n_rigid)
    problem0 = problem.first(n_rigid, base_m0)
    plain = idn.identify(
        arm, tr.q, tr.qd, tr.qdd, tr.tau, coulomb_velocity=cv, base=base_m0, prior_weight=gamma,
        regressor=A_tr, problem=problem0,
    )  # fmt: skip
    plain = refit(plain, A_tr, problem0, None)
    with_memory, without = val_rre(fit, s_va), val_rre(plain, None)
    kept = with_memory < (1.0 - MEMORY_MIN_GAIN) * without
    say(
        "friction memory, validation torque rre per joint with / without [%]: "
        + ", ".join(f"{a:.2f}/{b:.2f}" for a, b in zip(with_memory, without))
        + f"; kept on {int(kept.sum())} of {arm.n} joints"
    )
    report = {
        "enabled": bool(kept.any()),
        "widths": memory.widths.tolist(),
        "kept": {j: bool(k) for j, k in zip(arm.joints, kept)},
        "validation_rre_with": with_memory.tolist(),
        "validation_rre_without": without.tolist(),
        "warm_up_samples": int(np.count_nonzero(~memory.known_tr.all(axis=1))),
    }
    if not kept.any():
        return plain, gamma, choice, report
    if not kept.all():
        A_k = A_tr.copy()
        for j in np.flatnonzero(~kept):
            A_k[:, j, n_rigid + K * j : n_rigid + K * (j + 1)] = 0.0
        s_k = memory.s_tr * kept[None, :, None]
        problem_k = idn.weighted_problem(A_k, tr.tau, base, rows)
        trial = idn.identify(
            arm, tr.q, tr.qd, tr.qdd, tr.tau, coulomb_velocity=cv, base=base, prior_weight=gamma,
            regressor=A_k, problem=problem_k, memory_outputs=s_k,
        )  # fmt: skip
        fit = refit(trial, A_k, problem_k, memory.s_va * kept[None, :, None])
        assert fit.memory is not None
        fit.memory[~kept] = 0.0  # their columns were zero: nothing determined them
    return fit, gamma, choice, report


def _fit_fast(tr: Samples, va: Samples, fit_tr, fit_va, net, rip, mode: str, say) -> FastTorque:
    """The fast torque (:mod:`ros_lnn.arm.fast_torque`) on what fit, residual and ripple leave of the
    raw torque."""
    from .residual import predict_residual

    n = tr.q.shape[1]
    if mode == "off":
        say("fast torque: off")
        return FastTorque.none(n)

    def remainder(s: Samples, fit):
        rest = s.tau_raw - fit - rip.torque(s.q, s.qd)
        return rest if net is None else rest - predict_residual(net, s.q, s.qd)

    fast = fit_fast_torque(
        tr.qd_measured, tr.starts, remainder(tr, fit_tr), va.qd_measured, va.starts, remainder(va, fit_va),
        tr.rate_hz,
    )  # fmt: skip
    gains = ", ".join(f"{info['validation_gain_percent']:+.1f} %" for info in fast.report["joints"].values())
    kept = sum(info["kept"] for info in fast.report["joints"].values())
    say(
        f"fast torque (causal filter of the measured velocity's last {fast.report['history']} steps at "
        f"{tr.rate_hz:.0f} Hz): validation gain per joint {gains}; kept on {kept} of {n} joints"
    )
    return fast


def samples_for(recordings, mapping: ArmMapping, raw_tau: bool) -> Samples:
    return filtered_samples(recordings, mapping.filter_cutoff_hz, mapping.gap_factor, raw_tau=raw_tau)

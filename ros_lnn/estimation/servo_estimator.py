"""The estimator's step without ROS: one joint state in, driving forces, prediction and energies out.

    est = ServoEstimator(runtime, qdd_filter_window=9, command_timeout_s=0.5)
    sample = est.step(stamp_ns, q, qd, Q_f)        # model order; None when skipped (est.skipped says why)
    sample[est.layout["Q_e"]], sample[est.layout["energy"]], ...

``runtime`` is a :class:`ros_lnn.inference.runtime.ServoLnnRuntime` (anything with its ``joints``,
``n_f``, ``n_e``, ``input_layout``, ``output_layout``, ``evaluate_flat`` and ``evaluate``).

What one step does:

* ``q̈_e``: from the servo command in force when it carries accelerations (a plan from
  :meth:`set_plan`, interpolated like joint_trajectory_controller, or the rows of :meth:`set_command`),
  unless it is stale (``command_timeout_s`` after a plan's last point or after the joint state that
  was newest when an array command arrived); otherwise estimated by a causal least-squares fit of the
  last ``qdd_filter_window`` servo velocities (degree 2; when a stream carries no velocities, a fit
  of degree 3 to positions gives ``q̇`` and ``q̈_e``).
* ``Q_f``: the given free-joint efforts when finite, else ``free_joint_forces`` (zeros by default).
* the model, once, and the outputs gathered into one float64 vector (:attr:`layout`):
  ``q | q̇ | q̈ (q̈_f predicted, q̈_e used) | Q (Q_f then Q_e) | T, V, E, Ṫ, V̇, Ė, q̇ᵀQ``.

Stamps are integer nanoseconds. A stamp that is not after the last one is skipped (``out_of_order``);
``RESTART_AFTER`` such stamps in a row are taken as a restarted stream (a replayed bag, a clock
jump back): the filter starts again from them, so one bogus future stamp cannot freeze the estimator.
"""

from __future__ import annotations

import math
import time

import numpy as np

from .derivative import CausalPolyDerivative
from .rollout import rollout_free
from .trajectory import ServoPlan, SplicedPlan

#: Energy entries of the sample vector, in order (runtime output names).
ENERGY_NAMES = ("T", "V", "E", "T_dot", "V_dot", "E_dot", "power")
#: Consecutive out-of-order stamps after which the stream counts as restarted.
RESTART_AFTER = 10
#: Why :meth:`ServoEstimator.step` returned None.
SKIP_REASONS = ("non_finite", "out_of_order", "warming_up", "non_finite_output")


class ServoEstimator:
    """The estimator of the ``servo_lnn`` node as a plain object (see the module docstring)."""

    def __init__(
        self,
        runtime,
        *,
        qdd_filter_window: int = 9,
        command_timeout_s: float = 0.5,
        free_joint_forces=(),
        counts: dict | None = None,
    ):
        window = int(qdd_filter_window)
        if window < 3:
            raise ValueError(f"qdd_filter_window {window}: the quadratic fit needs at least 3 samples")
        self.runtime = runtime
        self.joints = list(runtime.joints)
        self.free_joints, self.servo_joints = self.joints[: runtime.n_f], self.joints[runtime.n_f :]
        n, n_f, n_e = len(self.joints), runtime.n_f, runtime.n_e
        self.n, self.n_f, self.n_e = n, n_f, n_e
        self.command_timeout_s = float(command_timeout_s)
        self.free_joint_forces = free_joint_forces
        self.velocity_filter = CausalPolyDerivative(window=window, degree=2, order=1)
        self.position_filter = CausalPolyDerivative(window=max(window, 5), degree=3, order=2)
        inputs, outputs = runtime.input_layout, runtime.output_layout
        # One vector holds the model's input [q | q̇ | q̈_e | Q_f] and, after it, the outputs the estimator
        # publishes [q̈ | Q | T, V, E, Ṫ, V̇, Ė, q̇ᵀQ]: a step writes nothing twice.
        m = inputs["Q_f"].stop
        self.size = m + 2 * n + len(ENERGY_NAMES)
        self._sample = np.zeros(self.size)
        self._x, self._outputs = self._sample[:m], self._sample[m:]
        self.joint_state = self._sample[: 2 * n]  # [q | q̇]: where step_in_place reads them
        self._q, self._qd = self._x[inputs["q"]], self._x[inputs["qd"]]
        self._qd_e, self._qdd_e, self._Q_f = self._qd[n_f:], self._x[inputs["qdd_e"]], self._x[inputs["Q_f"]]
        self.layout = {
            "q": slice(0, n),
            "qd": slice(n, 2 * n),
            "qdd": slice(m, m + n),
            "Q": slice(m + n, m + 2 * n),
            "Q_f": slice(m + n, m + n + n_f),
            "Q_e": slice(m + n + n_f, m + 2 * n),
            "energy": slice(m + 2 * n, self.size),
        }
        self.layout.update({name: m + 2 * n + i for i, name in enumerate(ENERGY_NAMES)})
        spans = [outputs["qdd"][0], outputs["Q"][0]] + [outputs[name][0] for name in ENERGY_NAMES]
        self._gather = np.concatenate([np.arange(s.start, s.stop) for s in spans])
        self._zeros = np.zeros(self.size)
        self._finite_q, self._finite_qqd = (
            (self._sample[:n], self._zeros[:n]),
            (self._sample[: 2 * n], self._zeros[: 2 * n]),
        )
        self._zeros_f, self._zeros_out = self._zeros[:n_f], self._zeros[: self._outputs.size]
        self._default_in_x = False
        self.profile, self.model_cpu_s = False, 0.0  # profile: time the model call (model_cpu_s)
        # what the estimator skipped or chose, counted into ``counts`` when given (a node's counters)
        self.counts = counts if counts is not None else {}
        for key in SKIP_REASONS + ("stale_command", "velocity_estimated", "stream_restarts"):
            self.counts.setdefault(key, 0)
        self.plan: SplicedPlan | None = None
        # an array command: (rows (k, n_e), the sample time it took effect, None until the next sample)
        self._command: tuple[np.ndarray, float | None] | None = None
        self.origin_ns: int | None = None
        self.reset()

    # -- settings ---------------------------------------------------------------------------------
    @property
    def free_joint_forces(self) -> np.ndarray:
        """Q_f when a joint state carries no finite efforts of the free joints."""
        return self._default_Q_f

    @free_joint_forces.setter
    def free_joint_forces(self, values) -> None:
        values = np.asarray(values, dtype=float).ravel()
        if values.size == 0:
            values = np.zeros(self.n_f)
        if values.size != self.n_f or not np.isfinite(values).all():
            raise ValueError(f"free_joint_forces needs {self.n_f} finite values for {self.free_joints}")
        self._default_Q_f = values
        self._default_in_x = False

    def reset(self) -> None:
        """Forget the stream (filters, last stamp); commands and the time origin stay."""
        self.velocity_filter.reset()
        self.position_filter.reset()
        self.last_ns: int | None = None
        self._behind = 0
        self._from_positions = False
        self.skipped = ""
        self.command_state = "none"
        self.last_t: float | None = None

    def seconds(self, stamp_ns: int) -> float:
        """A stamp in the estimator's time base (seconds since the first stamp it saw)."""
        if self.origin_ns is None:
            self.origin_ns = int(stamp_ns)
        return (int(stamp_ns) - self.origin_ns) * 1e-9

    # -- servo commands ---------------------------------------------------------------------------
    def set_plan(self, times_ns, positions, velocities=None, accelerations=None) -> None:
        """A servo plan (points at absolute stamps, servo joints in model order) that takes over at its
        first point; before that the previous plan still applies. ValueError for a malformed plan."""
        times = [self.seconds(t) for t in times_ns]
        plan = ServoPlan(times, positions, velocities, accelerations)
        if plan.q.shape[1] != self.n_e:
            raise ValueError(f"a plan needs {self.n_e} servo positions per point, got {plan.q.shape[1]}")
        self.plan = SplicedPlan(self.plan, plan)
        self._command = None

    def cancel_plan(self) -> None:
        self.plan = None

    def set_command(self, rows) -> None:
        """Array command: rows (k, n_e) of positions[, velocities[, accelerations]] of the servo joints,
        in force from the newest joint state (or the next one)."""
        rows = np.asarray(rows, dtype=float).reshape(-1, self.n_e)
        if rows.shape[0] not in (1, 2, 3) or not np.isfinite(rows).all():
            raise ValueError(f"a command needs 1, 2 or 3 finite rows of {self.n_e} values")
        self._command = (rows, self.last_t)
        self.plan = None

    def _commanded_acceleration(self, t: float):
        """The commanded q̈_e at t, or None (no command, stale, or one without accelerations)."""
        plan = self.plan
        if plan is not None:
            if t > plan.end_time + self.command_timeout_s:
                self.command_state = "stale"
                self.counts["stale_command"] += 1
                return None
            self.command_state = "commanded"
            sample = plan.sample(t)
            return sample.qdd if sample.commanded_acceleration else None
        assert self._command is not None  # the caller checked
        rows, since = self._command
        if since is None:
            since = t
            self._command = (rows, t)
        if t - since > self.command_timeout_s:
            self.command_state = "stale"
            self.counts["stale_command"] += 1
            return None
        self.command_state = "commanded"
        return rows[2] if rows.shape[0] == 3 else None

    # -- the step ---------------------------------------------------------------------------------
    def step(self, stamp_ns: int, q, qd=None, Q_f=None) -> np.ndarray | None:
        """One joint state (model order; ``qd``/``Q_f`` may be None; ``stamp_ns`` an int). Returns the
        sample vector (the estimator's own buffer, overwritten by the next step) or None with the reason
        in ``skipped``."""
        n = self.n
        self.joint_state[:n] = q
        if qd is not None:
            self.joint_state[n:] = qd
        return self.step_in_place(stamp_ns, qd is not None, Q_f)

    def step_in_place(self, stamp_ns: int, has_velocity: bool, Q_f=None) -> np.ndarray | None:
        """:meth:`step` for a caller that wrote q (and q̇ when ``has_velocity``) into ``joint_state``."""
        # one product decides finiteness: 0 · NaN and 0 · inf are NaN, 0 · (any finite x) is 0
        values, zeros = self._finite_qqd if has_velocity else self._finite_q
        if not math.isfinite(values.dot(zeros)):
            return self._skip("non_finite")
        last = self.last_ns
        if last is not None and stamp_ns <= last:
            self._behind += 1
            if self._behind < RESTART_AFTER:
                return self._skip("out_of_order")
            self.counts["stream_restarts"] += 1
            self.reset()
        self._behind = 0
        self.last_ns = stamp_ns
        if self.origin_ns is None:
            self.origin_ns = stamp_ns
        t = self.last_t = (stamp_ns - self.origin_ns) * 1e-9
        if has_velocity:
            if self._from_positions:
                self.position_filter.reset()
                self._from_positions = False
            d = self.velocity_filter.update(t, self._qd_e)
            qdd_e = None if d is None else d[0]
        else:
            if not self._from_positions:
                self.velocity_filter.reset()
                self._from_positions = True
            self.counts["velocity_estimated"] += 1
            d = self.position_filter.update(t, self._q)
            if d is None:
                return self._skip("warming_up")
            self._qd[:] = d[0]
            qdd_e = d[1][self.n_f :]
        if self.plan is not None or self._command is not None:
            commanded = self._commanded_acceleration(t)
            if commanded is not None:
                qdd_e = commanded
        if qdd_e is None:
            return self._skip("warming_up")
        self._qdd_e[:] = qdd_e
        if Q_f is not None and math.isfinite(Q_f.dot(self._zeros_f)):
            self._Q_f[:] = Q_f
            self._default_in_x = False
        elif not self._default_in_x:
            self._Q_f[:] = self._default_Q_f
            self._default_in_x = True
        if self.profile:
            cpu = time.thread_time()
            y = self.runtime.evaluate_flat(self._x)
            self.model_cpu_s = time.thread_time() - cpu
        else:
            y = self.runtime.evaluate_flat(self._x)
        outputs = self._outputs
        outputs[:] = y[self._gather]
        if not math.isfinite(outputs.dot(self._zeros_out)):
            return self._skip("non_finite_output")
        self.skipped = ""
        return self._sample

    def _skip(self, reason: str) -> np.ndarray | None:
        self.counts[reason] += 1
        self.skipped = reason
        return None

    @property
    def last_sample(self) -> np.ndarray:
        """The newest published sample vector (valid after a step that returned one)."""
        return self._sample

    # -- prediction -------------------------------------------------------------------------------
    def predict_free_motion(self, horizon_s: float, dt_s: float, max_steps: int = 500):
        """RK4 rollout of the free joints with the model from the newest sample over the servo plan.
        Returns ``(tau, q, q̇, q̈)``: times since the sample (k,) and model-order rows (k, n), or None
        without a plan or when less than one step of the plan is left. At most ``max_steps`` steps."""
        plan, t = self.plan, self.last_t
        if plan is None or t is None or not dt_s > 0:
            return None
        horizon = min(float(horizon_s), max(plan.end_time - t, 0.0), max_steps * dt_s)
        if horizon < dt_s:
            return None
        n_f, rt = self.n_f, self.runtime
        zeros = np.zeros(n_f)

        def accel(x, v, q_e, qd_e, qdd_e):
            return rt.evaluate(np.concatenate([x, q_e]), np.concatenate([v, qd_e]), qdd_e, zeros)["qdd_f"]

        def servo(ts):
            s = plan.sample(ts)
            return s.q, s.qd, s.qdd

        q, qd = self._sample[self.layout["q"]], self._sample[self.layout["qd"]]
        taus, xs, vs, accs = rollout_free(accel, servo, t, q[:n_f], qd[:n_f], horizon, dt_s)
        servo_rows = [plan.sample(t + tau) for tau in taus]
        positions = np.hstack([xs, [s.q for s in servo_rows]])
        velocities = np.hstack([vs, [s.qd for s in servo_rows]])
        accelerations = np.hstack([accs, [s.qdd for s in servo_rows]])
        return taus, positions, velocities, accelerations

"""``effort_observer``: lifecycle node that watches a fully actuated arm's joint states for torques
nobody commanded — a person pushing the arm, a collision, a changed payload.

configure   load the arm model (``model_path``: an ``.onnx`` from ``ros-lnn train`` with an arm config)
            or, with ``model_path`` empty, the URDF-nominal dynamics of the robot's description (no
            friction); the description: the ``robot_description`` parameter, else the topic
            (transient local, :mod:`.robot_description`), else the URDF in the arm model — one that
            does not match the model's is refused; the thresholds YAML of ``ros-lnn
            calibrate-observer``; check every parameter (one error line when any does not fit; the
            node stays unconfigured)
activate    subscribe ``joint_states`` (position, velocity and effort of every model joint; effort =
            measured joint torque, or motor current × ``effort_gains``); every sample is observed
            and checked for collisions; published with the input's stamp, at ``output_rate_hz``
            (chosen by the stamps; 0: every sample):
              ~/model_effort     sensor_msgs/JointState      model joints: q, q̇, effort = τ̂(q, q̇, q̈_f)
              ~/external_effort  sensor_msgs/JointState      model joints: q, q̇, effort = estimated τ_ext
              ~/external_wrench  geometry_msgs/WrenchStamped at ``wrench_frame`` (its own axes), when set
            and, when ``thresholds`` is set, at once:
              ~/collision        sensor_msgs/JointState      one message at each collision onset: name =
                                 the joints whose |τ_ext| crossed their threshold at that sample, effort =
                                 their τ_ext (signed, N·m), position = their threshold at that sample
              ~/collision_marker visualization_msgs/Marker   a red sphere on the link of the joint that
                                 crossed its threshold most, shown for ``collision_hold_s`` (RViz)
              /diagnostics       ERROR while a collision lasts, WARN for ``collision_hold_s`` after it
                                 ended (and for bad inputs), else OK; the last collision's joint, peak
                                 and stamp among the values
deactivate  stop the subscription; cleanup drops the model.

``τ_ext``: the generalized-momentum observer (``method: momentum``, De Luca; no accelerations) or the
direct residual ``τ̂(q, q̇, q̈_f) − τ`` (``method: direct``), both a first-order lag of gain ``gains``
(1/s) per joint (:mod:`ros_lnn.arm.observer`). Every output is reliable (a default-QoS subscriber
receives it); the input is subscribed best effort. No torch: Pinocchio and ONNX Runtime.

Every joint state queued at a wake-up is handled as one batch (:meth:`MomentumObserver.update_batch`:
one ONNX Runtime call, Pinocchio per state, the integration and the detection per sample, the same
values as sample by sample); on the default ``intake`` executor (:mod:`.intake`) a thread of its own
takes them, at most once per ``input_batch_period_s``.
"""

from __future__ import annotations

import itertools
import sys
import time
from typing import TYPE_CHECKING

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import WrenchStamped
from rclpy.lifecycle import Node as LifecycleNode
from rclpy.lifecycle import State, TransitionCallbackReturn
from sensor_msgs.msg import JointState
from visualization_msgs.msg import Marker

from ...errors import ConfigError, RosLnnError
from .. import compat, lifecycle
from ..diagnostics import (
    CountWindow,
    RateLatency,
    diagnostic_status,
    guarded,
    input_status,
    report_error,
    status_name,
    warn_throttled,
)
from ..intake import InputLock
from ..joint_state_reader import NOT_REJECTED, READ_REASONS, JointStateReader, merge_window_ns
from ..lifecycle import LifecycleTeardown, configure_and_activate
from ..process import node_main
from ..qos import COMMAND_QOS, output_publisher
from ..robot_description import RobotDescription
from ..serialized import PackedMessages, PackersByFrame
from .messages import OutputRate, collision_marker, output_builders
from .parameters import PARAMETERS

if TYPE_CHECKING:
    from ...arm.observer import CollisionDetector, DirectObserver, MomentumObserver

INVALID_REASONS = READ_REASONS + ("no_velocity", "no_effort", "non_finite")
COUNTED = (
    "received",
    "processed",
    "collisions",
    "internal_error",
    "parameter_refused",
    "restarts",
    "non_finite_output",
)


def build_observer(values: dict, description=lambda: ("", "")):
    """(observer, joints, effort gains, thresholds or None, wrench estimator or None, description, the
    link each joint moves) from the node's parameter values; ``description()``: the robot's URDF and where
    it came from (its parameter or topic; ``("", "")``: none). Raises RosLnnError with the reason."""
    from ...arm import observer as ob
    from ...arm.description import child_links
    from ...arm.rigid_body import ArmRigidBody

    model = None
    if values["model_path"]:
        from ...arm.description import description_mismatch
        from ...arm.model import ArmModel
        from ..model_params import model_file, model_limits

        model = ArmModel(model_file(values), threads=values["model_threads"], limits=model_limits(values))
        joints = tuple(values["joints"] or model.joints)
        if joints != model.joints:
            raise ConfigError(f"parameter joints {list(joints)} differ from the model's {list(model.joints)}")
        urdf, source = description()
        if urdf and (reason := description_mismatch(urdf, model.meta["urdf"], joints)):
            raise ConfigError(
                f"robot_description ({source}) does not match the arm model {model.path.name}: {reason}"
            )
        dynamics: ArmModel | ArmRigidBody
        dynamics, described = model, model.describe() + (f"; kinematics from the {source}" if urdf else "")
        mapping = model.meta.get("mapping") or {}
        scale = mapping.get("effort_scale") or {}
        default_gains = (
            [float(scale.get(j, 1.0)) for j in joints] if mapping.get("effort") == "motor_current" else None
        )
    else:
        if not values["joints"]:
            raise ConfigError("parameter joints: the URDF-nominal observer needs the actuated joints")
        urdf, source = description()
        if not urdf:
            raise ConfigError(
                "give model_path (an arm model) or robot_description (parameter or topic: the URDF-nominal "
                "observer)"
            )
        joints = tuple(values["joints"])
        dynamics = ArmRigidBody.from_urdf(urdf, joints)
        described = f"URDF-nominal dynamics of {len(joints)} joints (no friction) from the {source}"
        default_gains = None
    n = len(joints)
    gains = values["gains"]
    if len(gains) not in (1, n):
        raise ConfigError(f"parameter gains has {len(gains)} values; give 1 or {n} (one per joint)")
    effort_gains = values["effort_gains"] or default_gains or [1.0] * n
    if len(effort_gains) != n or not all(np.isfinite(effort_gains)) or 0.0 in effort_gains:
        raise ConfigError(f"parameter effort_gains needs {n} finite, non-zero values (or none)")
    observer = ob.make_observer(
        dynamics,
        values["method"],
        gains if len(gains) == n else gains[0],
        values["qdd_filter_window"],
        values["effort_timing"],
    )
    ob.friction_state_start(observer, values["friction_state_start"])
    thresholds = None
    if values["thresholds"]:
        thresholds = ob.Thresholds.load(values["thresholds"]).reordered(joints)
        made_for = thresholds.info.get("observer") or {}
        wanted = {"method": values["method"], "gains": [float(g) for g in gains]}
        if "effort_timing" in made_for:  # thresholds calibrated before it was recorded: sampled
            wanted["effort_timing"] = values["effort_timing"]
        if made_for and {k: made_for.get(k) for k in wanted} != wanted:
            raise ConfigError(
                f"thresholds {values['thresholds']} were calibrated for the {_observer_text(made_for)}; "
                f"this node runs the {_observer_text(wanted)} (calibrate again, or set them as calibrated)"
            )
    wrench = None
    if values["wrench_frame"]:
        kin = ArmRigidBody.from_urdf(urdf, joints) if urdf else model.nominal if model is not None else None
        if kin is None:
            raise ConfigError("wrench_frame needs a URDF")
        wrench = ob.WrenchEstimator(kin, values["wrench_frame"], values["wrench_damping"])
    links = child_links(urdf or (model.meta["urdf"] if model is not None else ""))
    return observer, joints, np.asarray(effort_gains, dtype=float), thresholds, wrench, described, links


def _observer_text(observer: dict) -> str:
    text = f"{observer.get('method')} observer with gains {observer.get('gains')}"
    return text + (f", effort_timing {observer['effort_timing']}" if "effort_timing" in observer else "")


class EffortObserverNode(LifecycleTeardown, LifecycleNode):
    _configured_attribute = "observer"

    def __init__(self, node_name: str = "effort_observer", **kwargs):
        super().__init__(node_name, **kwargs)
        self.observer: MomentumObserver | DirectObserver | None = None
        self.detector: CollisionDetector | None = None
        self._t0_ns: int | None = None
        self._last_t: float | None = None  # stamp of the last sample taken [s from _t0_ns]
        self.last_error = ""
        self._subs, self._timers, self._pubs = [], [], {}
        self.input_lock = InputLock()  # the joint_states path against the diagnostics timer
        self.counts = dict.fromkeys(INVALID_REASONS + COUNTED, 0)
        self.values = PARAMETERS.attach(self, configured=lambda: self.observer is not None)
        self.description = RobotDescription(self)
        self._links: dict[str, str] = {}  # joint -> the link it moves (the collision marker's frame)
        self.stats = RateLatency()
        self.window = CountWindow()
        self.last_input: float | None = None
        self.last_collision: dict = {}
        self._collision_end: float | None = None
        self._output_rate = OutputRate()

    # -- lifecycle ------------------------------------------------------------------------------
    def on_configure(self, state: State) -> TransitionCallbackReturn:
        try:
            PARAMETERS.check(self)
            built = build_observer(self.values, self._description)
            self.observer, self.joints, self.effort_gains, self.thresholds, self.wrench = built[:5]
            described, self._links = built[5:]
        except Exception as exc:  # noqa: BLE001 - configure must always say why it failed, whatever failed
            self.observer = None
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            self.last_error = text if isinstance(exc, RosLnnError) else f"{type(exc).__name__}: {text}"
            self.get_logger().error(f"configure failed: {self.last_error}")
            return TransitionCallbackReturn.FAILURE
        from ...arm.observer import CollisionDetector

        n = len(self.joints)
        self.reader = JointStateReader(
            self.joints, n, merge_window_ns=merge_window_ns(self.values["joint_state_merge_window_s"])
        )
        self.detector = CollisionDetector(self.thresholds) if self.thresholds is not None else None
        wrench_frame = self.wrench.frame if self.wrench is not None else None
        self._packers = PackersByFrame(
            lambda frame: PackedMessages(output_builders(frame, list(self.joints), wrench_frame), 4 * n + 6)
        )
        self._sample = np.zeros(4 * n + 6)
        pub = self.create_lifecycle_publisher
        self._pubs = {
            "model_effort": output_publisher(pub, JointState, "~/model_effort"),
            "external_effort": output_publisher(pub, JointState, "~/external_effort"),
            "collision": output_publisher(pub, JointState, "~/collision", COMMAND_QOS),
            "collision_marker": pub(Marker, "~/collision_marker", COMMAND_QOS),
            "diagnostics": pub(DiagnosticArray, "/diagnostics", COMMAND_QOS),
        }
        if self.wrench is not None:
            self._pubs["external_wrench"] = output_publisher(pub, WrenchStamped, "~/external_wrench")
        detection = (
            "thresholds " + self.values["thresholds"] if self.detector else "no thresholds: no detection"
        )
        self.get_logger().info(
            f"configured: {described}; {self.values['method']} observer, K {self.values['gains']} 1/s; "
            + detection
        )
        return TransitionCallbackReturn.SUCCESS

    def _description(self) -> tuple[str, str]:
        """The robot's URDF and where it came from: the parameter, the deprecated ``urdf`` file, the
        topic (waited for up to ``robot_description_timeout_s``); ``("", "")`` when none."""
        text, path = self.values["robot_description"], self.values["urdf"]
        if path:
            self.get_logger().warning(
                "parameter urdf is deprecated: set robot_description (the URDF's text) or publish it on "
                f"{self.description.resolved}"
                + (
                    "; robot_description is set and taken"
                    if text
                    else f"; reading {path} as robot_description"
                )
            )
            if not text:
                from ...arm.rigid_body import urdf_text

                return urdf_text(path), f"file {path} (parameter urdf)"
        return self.description.take(text, float(self.values["robot_description_timeout_s"]))

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        if not lifecycle.activate_io(self, self._open_io):
            return TransitionCallbackReturn.FAILURE
        return super().on_activate(state)

    def _open_io(self) -> None:
        lifecycle.subscribe_joint_states(
            self, self.values["input_queue_depth"], self.values["input_batch_period_s"]
        )
        self._timers.append(self.create_timer(self.values["diagnostics_period_s"], self._publish_diagnostics))
        assert self.observer is not None  # activate follows a successful configure
        self.observer.reset()
        if self.detector is not None:
            self.detector.reset()
        self._t0_ns = self._last_t = None
        self._output_rate.reset()
        lifecycle.restart_input(self)

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        self._drop_io()
        return super().on_deactivate(state)

    # -- per sample -----------------------------------------------------------------------------
    def _on_joint_states(self, raws: list) -> None:
        """Every joint state queued at one wake-up, in order (one at a time through an executor)."""
        try:
            self._process(raws)
        except Exception as exc:  # noqa: BLE001 - never into the executor: counted, logged, the stream goes on
            report_error(self, "joint_states", exc)

    def _reject(self, reason: str, detail: str, count: int = 1) -> None:
        self.counts[reason] += count
        if reason not in NOT_REJECTED:
            warn_throttled(self, reason, f"joint_states skipped ({reason}): {detail}")

    def _read(self, raws: list):
        """(stamps, frames, [q | q̇ | τ] (B, 3n)) of the messages that give a joint state, in order (the
        rest counted)."""
        reader, n = self.reader, len(self.joints)
        states = np.empty((len(raws), 3 * n))
        stamps: list[int] = []
        frames: list[str] = []
        for raw in raws:
            try:
                reason = reader.read(raw)
            except Exception as exc:  # noqa: BLE001 - one unreadable message never costs the batch
                report_error(self, "joint_states", exc)
                continue
            if reader.merge is not None and reader.merge.dropped:
                detail = reader.merge.detail
                self.counts["missing_joint"] += reader.take_dropped()
                warn_throttled(self, "missing_joint", f"joint_states part dropped: {detail}")
            if reason:
                self._reject(reason, reader.detail)
            elif reader.qd is None:
                self._reject("no_velocity", "the observer needs the joint velocities")
            elif reader.effort_free is None:
                self._reject("no_effort", "the observer needs the measured joint efforts")
            else:
                row = states[len(stamps)]
                row[:n], row[n : 2 * n] = reader.q, reader.qd
                np.multiply(reader.effort_free, self.effort_gains, out=row[2 * n :])
                stamps.append(reader.stamp_ns)
                frames.append(reader.frame_id)
        states = states[: len(stamps)]
        finite = np.isfinite(states).all(axis=1)
        if not finite.all():
            self._reject(
                "non_finite", "NaN or inf in the joints' position, velocity or effort", int((~finite).sum())
            )
            keep = np.flatnonzero(finite)
            stamps, frames, states = [stamps[i] for i in keep], [frames[i] for i in keep], states[keep]
        return stamps, frames, states

    def _process(self, raws: list) -> None:
        t_start = time.perf_counter()
        self.counts["received"] += len(raws)
        self.stats.arrivals.extend(itertools.repeat(t_start, len(raws)))
        self.last_input = t_start
        stamps, frames, states = self._read(raws)
        if not stamps:
            return
        n = len(self.joints)
        q, qd, tau = states[:, :n], states[:, n : 2 * n], states[:, 2 * n :]
        t, t0 = np.empty(len(stamps)), self._t0_ns
        for k, ns in enumerate(stamps):
            if t0 is None or ns < t0:  # a stamp before the first restarts the observer's time
                t0 = ns
            t[k] = (ns - t0) * 1e-9
        self._t0_ns = t0
        observer = self.observer
        assert observer is not None  # subscriptions live from activate to deactivate
        # a gap longer than restart_gap_s before a sample restarts the integration there (_restart)
        before = np.empty_like(t)
        before[0] = t[0] if self._last_t is None else self._last_t
        before[1:] = t[:-1]
        gaps = np.flatnonzero(t - before > self.values["restart_gap_s"]).tolist()
        self._last_t = float(t[-1])
        if not gaps:  # the usual batch: one stretch
            r = observer.update_batch(t, q, qd, tau)
            efforts = observer.model_efforts
            if self.detector is not None:
                self._detect(t, stamps, frames, r, qd, t_start)
        else:
            r, efforts = np.empty_like(q), np.empty_like(q)
            for a, b in itertools.pairwise(sorted({0, len(t), *gaps})):
                if a in gaps:
                    self._restart(float(t[a] - before[a]))
                r[a:b] = observer.update_batch(t[a:b], q[a:b], qd[a:b], tau[a:b])
                efforts[a:b] = observer.model_efforts
                if self.detector is not None:
                    self._detect(t[a:b], stamps[a:b], frames[a:b], r[a:b], qd[a:b], t_start)
        finite = np.isfinite(r).all(axis=1) & np.isfinite(efforts).all(axis=1)
        if not finite.all():
            kept = self._drop_non_finite(finite, stamps, frames, q, qd, r, efforts)
            stamps, frames, q, qd, r, efforts = kept
        self._publish_outputs(stamps, frames, q, qd, r, efforts)
        self.counts["processed"] += len(stamps)
        latency = time.perf_counter() - t_start
        self.stats.latencies.extend(itertools.repeat((time.perf_counter(), latency), len(stamps)))

    def _drop_non_finite(self, finite, stamps, frames, *arrays):
        """A sample whose residual or model effort is not finite is never published: counted
        (``non_finite_output``), logged, and the integration restarted — a non-finite r would stay in
        the observer's state for good."""
        bad = int((~finite).sum())
        self.counts["non_finite_output"] += bad
        warn_throttled(
            self, "non_finite_output", f"{bad} samples: non-finite residual, dropped; observer restarted"
        )
        assert self.observer is not None
        self.observer.reset()
        if self.detector is not None:
            self.detector.reset()
        keep = np.flatnonzero(finite)
        return ([stamps[i] for i in keep], [frames[i] for i in keep], *(a[keep] for a in arrays))

    def _restart(self, gap_s: float) -> None:
        """A gap in the stream (its publisher restarted, the arm's driver paused): the momentum the
        integration carries is no longer the arm's; r starts again from 0 at this state, as after a
        restart of this node, instead of reading the gap's momentum change as an external torque."""
        assert self.observer is not None
        self.observer.reset()
        if self.detector is not None:
            self.detector.reset()
        self.counts["restarts"] += 1
        self.get_logger().info(f"joint_states resumed after {gap_s:.2f} s: observer integration restarted")

    def _publish_outputs(self, stamps, frames, q, qd, r, efforts) -> None:
        """~/model_effort, ~/external_effort and ~/external_wrench of the samples due at
        ``output_rate_hz`` (by their stamps), written into pre-serialized messages."""
        rate, pubs, n = self.values["output_rate_hz"], self._pubs, len(self.joints)
        topics = ("model_effort", "external_effort", "external_wrench")
        for k, ns in enumerate(stamps):
            if not self._output_rate.due(ns, rate):
                continue
            sample = self._sample
            sample[:n], sample[n : 2 * n], sample[2 * n : 3 * n], sample[3 * n : 4 * n] = (
                q[k],
                qd[k],
                efforts[k],
                r[k],
            )
            if self.wrench is not None:
                sample[4 * n :] = self.wrench.wrench(q[k], r[k])
            sec, nanosec = divmod(ns, 1_000_000_000)
            for topic, msg in zip(topics, self._packers[frames[k]].messages(sec, nanosec, sample)):
                pubs[topic].publish(msg)

    def _detect(self, t, stamps, frames, r, qd, now) -> None:
        """Every sample through the detector in order; each onset published at once."""
        det = self.detector
        assert det is not None  # called from _process only when there is a detector
        was_active = det.active.any()
        events = det.update_batch(t, r, qd)
        for k, onsets in events:
            self.counts["collisions"] += 1
            ns = stamps[k]
            stamp = Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)
            msg = JointState()
            msg.header.stamp, msg.header.frame_id = stamp, frames[k]
            msg.name = [self.joints[o.joint] for o in onsets]
            msg.effort = [o.residual for o in onsets]
            msg.position = [o.threshold for o in onsets]
            self._pubs["collision"].publish(msg)
            first = max(onsets, key=lambda o: abs(o.residual) / o.threshold)
            joint = self.joints[first.joint]
            self._pubs["collision_marker"].publish(
                collision_marker(stamp, self._links.get(joint, ""), self.values["collision_hold_s"])
            )
            self.last_collision = {"joint": joint, "stamp_s": round(ns * 1e-9, 6), "index": first.joint}
            warn_throttled(
                self,
                "collision",
                f"collision on {', '.join(msg.name)}: τ_ext {np.round(msg.effort, 2).tolist()} N·m",
                period_s=0.5,
            )
        if events and not was_active:
            self._publish_diagnostics()
        if "index" in self.last_collision:
            self.last_collision["peak"] = float(det.last_peak[self.last_collision["index"]])
        if det.active.any():
            self._collision_end = None
        elif was_active or events:
            self._collision_end = now

    # -- diagnostics ----------------------------------------------------------------------------
    @guarded("diagnostics")
    def _publish_diagnostics(self) -> None:
        window = self.window.update(self.counts)
        rejected = tuple(r for r in INVALID_REASONS if r not in NOT_REJECTED)
        level, message = input_status(window, rejected, self.last_input, self.values["input_timeout_s"])
        det = self.detector
        if det is not None and det.active.any():
            joints = [self.joints[j] for j in np.flatnonzero(det.active)]
            level, message = DiagnosticStatus.ERROR, f"collision on {', '.join(joints)}"
        elif (
            self._collision_end is not None
            and time.perf_counter() - self._collision_end < self.values["collision_hold_s"]
            and level == DiagnosticStatus.OK
        ):
            level, message = (
                DiagnosticStatus.WARN,
                f"collision ended {time.perf_counter() - self._collision_end:.1f} s ago",
            )
        summary = self.stats.summary()
        values = {
            "input_rate_hz": summary["rate_hz"],
            "latency_median_us": summary["latency_median_us"],
            "latency_p99_us": summary["latency_p99_us"],
            "method": self.values["method"],
            **dict(self.counts),
            "input_wakeups": sum(i.wakeups for i in self._intakes),
            "input_batches": sum(i.batches for i in self._intakes),
            **{f"last_collision_{k}": v for k, v in self.last_collision.items() if k != "index"},
        }
        msg = DiagnosticArray()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.status = [
            diagnostic_status(
                status_name(self), self.values["model_path"] or "URDF-nominal", level, message, values
            )
        ]
        self._pubs["diagnostics"].publish(msg)


def start(node: EffortObserverNode) -> bool:
    return configure_and_activate(node, lambda: node.observer is not None)


def main(argv=None) -> int:
    # the process default (intake): joint_states batched on a thread of their own (docs/nodes.md,
    # Executors and floods)
    return node_main(
        "effort_observer",
        EffortObserverNode,
        argv,
        compat.autostart_or_stay_unconfigured(start),
    )


if __name__ == "__main__":
    sys.exit(main())

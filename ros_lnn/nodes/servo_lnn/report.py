"""What ``servo_lnn`` reports: its counts, its /diagnostics status and, at shutdown, the benchmark log
of ``latency_log``."""

from __future__ import annotations

import time
from array import array

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray

from ...errors import RosLnnError
from ...estimation.servo_estimator import SKIP_REASONS
from ...files import open_output, output_file_problem
from ..diagnostics import diagnostic_status, input_status, status_name
from ..joint_state_reader import HELD, NOT_REJECTED, READ_REASONS

#: joint_states skipped, by reason (the reader's, the node's stamp checks, the estimator's).
INVALID_REASONS = READ_REASONS + ("stale", "future", "clock_not_started") + SKIP_REASONS
#: Other counts in /diagnostics.
COUNTED = (
    "processed",
    "received",
    "commands",
    "invalid_command",
    "stale_command",
    "velocity_estimated",
    "stream_restarts",
    "internal_error",
    "non_finite_marker",
    "parameter_refused",
)


def servo_values(node) -> dict:
    """Lifetime counts, the stream's rate and latencies over the last seconds, and the model."""
    summary = node.stats.summary()
    counts = dict(node.counts)
    values = {
        "input_rate_hz": summary["rate_hz"],
        "latency_median_us": summary["latency_median_us"],
        "latency_p99_us": summary["latency_p99_us"],
        "model_id": node.runtime.model_id if node.runtime else "",
        "skipped": sum(counts[k] for k in INVALID_REASONS if k not in HELD),
    }
    values.update(counts)
    return values


def servo_diagnostics(node) -> DiagnosticArray:
    """The node's /diagnostics message: the input stream's level, counts and the count window."""
    values = node.diagnostics_values()
    window = node.window.update(node.counts)
    rejected = tuple(r for r in INVALID_REASONS if r not in ("warming_up",) + NOT_REJECTED) + (
        "invalid_command",
    )
    level, message = input_status(window, rejected, node.last_input, node.values["input_timeout_s"])
    values.update({f"window_{k}": v for k, v in window.items() if k in rejected + ("received", "processed")})
    values["window_s"] = window["window_s"]
    msg = DiagnosticArray()
    msg.header.stamp = node.get_clock().now().to_msg()
    msg.status = [diagnostic_status(status_name(node), values["model_id"], level, message, values)]
    return msg


def write_latency_log(node) -> None:
    """At shutdown, the benchmark log of ``latency_log`` (as configured): per sample the in-node latency,
    the callback's CPU time and the CPU time of its model call (the runtime's flat evaluation, timed in
    place); the counts; and ServoLnnRuntime.evaluate on the last sample, 2 000 calls back to back here
    in the same process (warm caches: a lower bound of the model's cost)."""
    path = node._latency_path
    if not path:
        return
    evaluate_cpu = array("d")
    est, runtime = node.estimator, node.runtime
    if est is not None and runtime is not None and node.counts["processed"]:
        L = est.layout
        sample = est.last_sample.copy()
        q, qd = sample[L["q"]], sample[L["qd"]]
        qdd_e, Q_f = sample[L["qdd"]][est.n_f :], sample[L["Q_f"]]
        for _ in range(2000):
            c = time.thread_time()
            runtime.evaluate(q, qd, qdd_e, Q_f)
            evaluate_cpu.append(time.thread_time() - c)
    try:
        problem = output_file_problem(path)
        if problem:
            raise RosLnnError(problem)
        with open_output(path) as f:
            np.savez(
                f,
                latency_s=np.frombuffer(node._latency_log, dtype=float),
                cpu_s=np.frombuffer(node._cpu_log, dtype=float),
                model_cpu_s=np.frombuffer(node._model_cpu_log, dtype=float),
                evaluate_cpu_s=np.frombuffer(evaluate_cpu, dtype=float),
                **{k: np.int64(v) for k, v in node.diagnostics_values().items() if isinstance(v, int)},
            )
    except OSError as exc:
        node.get_logger().error(f"latency_log: cannot write {path} ({exc.strerror or exc})")
    except RosLnnError as exc:
        node.get_logger().error(f"latency_log: {path} {exc}: nothing written")

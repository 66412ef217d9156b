"""A node executable's process: rclpy start-up, the executor, spinning until SIGINT/SIGTERM, teardown."""

from __future__ import annotations

import os
import sys

from .params import param

#: Environment variable that picks the executor of every node process (one of :data:`EXECUTORS`).
EXECUTOR_ENV = "ROS_LNN_EXECUTOR"
#: ``intake`` (the default): services, parameters and timers on the SingleThreadedExecutor, the
#: joint_states of ``servo_lnn`` and ``effort_observer`` on a thread of their own that takes every
#: queued message at each wake-up (:mod:`.intake`); ``single``: everything on the
#: SingleThreadedExecutor, one message per turn; ``events``: everything on rclpy's EventsExecutor.
#: The SingleThreadedExecutor rebuilds its wait set from every entity at each wake-up, which at 1 kHz
#: cost the estimator process two thirds of its CPU; the EventsExecutor costs less but keeps one
#: unbounded FIFO of events, so under an input faster than the node every arrival queues ahead of the
#: next service request (seconds) and the queue's memory grows for as long as the flood lasts. The
#: intake keeps the SingleThreadedExecutor's bounds (what the node cannot take is dropped in the
#: subscription's keep-last queue, ``input_queue_depth``; services answered between its turns) at
#: less CPU than either (docs/benchmarks.md, *Executors*: the figures). Nodes without a joint_states
#: intake run the SingleThreadedExecutor under ``intake``. Each node process logs the executor it runs
#: (``executor: ...``, :func:`executor_description`).
EXECUTORS = ("intake", "single", "events")
DEFAULT_EXECUTOR = "intake"
#: The interpreter's thread switch interval in an ``intake`` process (Python's default: 5 ms).
INTAKE_SWITCH_INTERVAL_S = 0.001


def executor_kind(kind: str | None = None, default: str = DEFAULT_EXECUTOR) -> str:
    """``kind``, else $ROS_LNN_EXECUTOR, else ``default``; an unknown name reads as the default."""
    chosen = kind or os.environ.get(EXECUTOR_ENV, default)
    return chosen if chosen in EXECUTORS else default


def make_executor(context=None, kind: str | None = None, default: str = DEFAULT_EXECUTOR):
    """The executor of a node process (:func:`executor_kind`): rclpy's EventsExecutor for "events"
    (the SingleThreadedExecutor, with one logged warning, where rclpy lacks it: :mod:`.compat`), the
    SingleThreadedExecutor for "single" and "intake" (whose nodes take their joint_states themselves)."""
    from .compat import make_executor as detected

    chosen = executor_kind(kind, default)
    return detected(context, "single" if chosen == "intake" else chosen)


def executor_description(executor, node) -> str:
    """What a node process runs: the executor's class, and whether the node's joint_states go to an
    intake thread (``intake``, a node with a joint_states intake: :mod:`.intake`)."""
    name = type(executor).__name__
    if getattr(node, "input_intake", False) and hasattr(node, "_on_joint_states"):
        return f"intake (joint_states on a thread of their own, the rest on the {name})"
    return name


def init_ros(argv) -> None:
    """rclpy.init for a node process; Ctrl-C is handled by :func:`spin` (a flag checked between
    callbacks), so no callback ever runs against a context that is already shut down."""
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)


def node_main(
    name: str, make_node, argv=None, start=None, on_exit=None, executor: str = DEFAULT_EXECUTOR
) -> int:
    """A whole node executable: :func:`init_ros`, ``make_node()``, then :func:`run_node_process`. A node
    that cannot be built (a parameter that breaks its rule, a model that cannot be read) gives one error
    line on stderr (the ``name`` logger: ``not started: <reason>``) and exit code 2. ``executor``: the
    node's default executor kind ($ROS_LNN_EXECUTOR overrides it)."""
    import sys

    import rclpy

    from ..errors import RosLnnError

    init_ros(argv if argv is not None else sys.argv)
    try:
        node = make_node()
    except Exception as exc:  # noqa: BLE001 - start-up must always say why it failed, in one line
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        reason = text if isinstance(exc, RosLnnError) else f"{type(exc).__name__}: {text}"
        rclpy.logging.get_logger(name).error(f"not started: {reason}")
        rclpy.try_shutdown()
        return 2
    return run_node_process(node, start, on_exit, executor)


def run_node_process(node, start=None, on_exit=None, executor: str = DEFAULT_EXECUTOR) -> int:
    """Body of a node executable after :func:`init_ros`: ``start(node)`` when given and the node's
    ``autostart`` parameter is set (``node.input_intake`` set first: whether its joint_states go to an
    intake thread, the ``intake`` executor), then spin on the executor of :func:`make_executor` until
    SIGINT/SIGTERM (exit code 0); ``on_exit(node)`` and teardown always run. Exit code 1 when ``start``
    reports failure (the lifecycle node executables wrap it in
    :func:`.compat.autostart_or_stay_unconfigured`, which keeps the node up)."""
    import rclpy

    code = 0
    kind = executor_kind(default=executor)
    node.input_intake = kind == "intake"
    if node.input_intake:
        # two Python threads (the intake, the executor): under an input flood the intake thread holds the
        # GIL while it works through a full queue, and each step of a service call waits for it to be
        # handed over (every 5 ms by default); 1 ms keeps the services' latency down
        sys.setswitchinterval(INTAKE_SWITCH_INTERVAL_S)
    try:
        if start is not None and param(node, "autostart") and not start(node):
            code = 1
        else:
            executor = make_executor(node.context, kind)
            node.get_logger().info(f"executor: {executor_description(executor, node)}")
            spin(node, executor)
    finally:
        if on_exit is not None:
            on_exit(node)
        node.destroy_node()
        rclpy.try_shutdown()
    return code


def spin(node, executor=None) -> None:
    """Spin until SIGINT/SIGTERM (or an external shutdown), then return for a clean exit."""
    import signal

    import rclpy
    from rclpy.executors import ExternalShutdownException

    stop = []
    previous = {
        sig: signal.signal(sig, lambda *_: stop.append(True)) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    if executor is None:
        executor = make_executor(node.context)
    executor.add_node(node)
    try:
        # spin_once in a loop: EventsExecutor.spin() does not return on shutdown
        while not stop and rclpy.ok(context=node.context):
            try:
                executor.spin_once(timeout_sec=0.1)
            except (KeyboardInterrupt, ExternalShutdownException):
                raise
            except Exception as exc:  # noqa: BLE001 - rclpy's own callbacks (services) must not end the process
                if not rclpy.ok(context=node.context):
                    break
                from .diagnostics import report_error

                if not hasattr(node, "counts"):
                    node.counts = {}
                report_error(node, "executor", exc)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        executor.shutdown()

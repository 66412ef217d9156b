"""The effort watchdog node.

``node`` is the rclpy node, ``parameters`` its parameter table; beside them what only
this node uses. The code the nodes share lies one level up (``ros_lnn.nodes``)."""


def main(argv=None) -> int:
    """The console script: run the node (``python -m`` runs ``__main__``)."""
    from .node import main as run

    return run(argv)

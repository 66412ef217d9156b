"""``ros-lnn bench NAME``: the benchmarks. They live in the lab (:mod:`ros_lnn_lab.bench`), the part of
the repository that develops and measures the product — installed beside it, never imported by the
nodes or the library; this command only hands over to it."""

from __future__ import annotations

from ..errors import RosLnnError


def _lab():
    try:
        import ros_lnn_lab.bench as lab
    except ModuleNotFoundError as exc:
        raise RosLnnError(f"the benchmarks (ros_lnn_lab) are not installed here: {exc}") from exc
    return lab


def add_arguments(parser) -> None:
    _lab().add_arguments(parser)


def run(args) -> int:
    return int(_lab().run(args) or 0)

"""``ros-lnn reindex BAG``: a rosbag2 whose recorder never closed it (SIGKILL, a crash, a full disk)
made readable: the storage file settled and metadata.yaml written from what it holds, as
``ros2 bag reindex`` does (:mod:`ros_lnn.bags.recovery`)."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bag", help="bag directory (one .db3 or .mcap file, metadata.yaml missing or stale)")


def run(args: argparse.Namespace) -> int:
    from ..bags.recovery import reindex

    counts = reindex(args.bag)
    total = sum(counts.values())
    print(
        f"reindexed {args.bag}: {total} messages (" + ", ".join(f"{t} {n}" for t, n in counts.items()) + ")"
    )
    return 0

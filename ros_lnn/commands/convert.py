"""``ros-lnn convert``: a robot's CSV log (UR RTDE, libfranka, vendor tools) → rosbag2 ``/joint_states``
(no torch). The column map is described in :mod:`ros_lnn.arm.csvlog`."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("csv", help="the CSV log (header row, or columns mapped by 0-based index)")
    parser.add_argument(
        "--columns",
        required=True,
        metavar="MAP",
        help="column map: a YAML file, or inline 'time=t,q.J=col,qd.J=col,effort.J=col|current.J=col,...' "
        "(a column may carry a factor: col*0.0174533)",
    )
    parser.add_argument("-o", "--out", required=True, metavar="BAG", help="rosbag2 directory to write")
    parser.add_argument(
        "--time-unit",
        choices=("s", "ms", "us", "ns", "auto"),
        default=None,
        help="unit of the time column (default: the map's time_unit, else auto from the median step)",
    )
    parser.add_argument("--delimiter", default=None, help="field separator (default: from the header line)")
    parser.add_argument("--storage", choices=("sqlite3", "mcap"), default="sqlite3")
    parser.add_argument("--topic", default="/joint_states", help="JointState topic to write")
    parser.add_argument(
        "--max-bad-fraction",
        type=float,
        default=0.05,
        help="fail when more than this fraction of rows is bad (default 0.05)",
    )


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    import numpy as np

    from ..arm.csvlog import parse_column_map, read_csv_log, write_joint_states_bag
    from ..errors import ConfigError, DataError

    if not Path(args.out).absolute().parent.is_dir():
        raise ConfigError(f"{args.out}: the folder {Path(args.out).absolute().parent} does not exist")
    cmap = parse_column_map(args.columns)
    delimiter = args.delimiter.replace("\\t", "\t") if args.delimiter else None
    log = read_csv_log(args.csv, cmap, time_unit=args.time_unit, delimiter=delimiter)
    fraction = log.bad_rows / max(log.rows, 1)
    if fraction > args.max_bad_fraction:
        raise DataError(
            f"{args.csv}: {log.bad_rows} of {log.rows} rows are bad ({'; '.join(log.bad_examples)}); "
            "check the column map and the delimiter, or raise --max-bad-fraction"
        )
    path = write_joint_states_bag(log, args.out, args.storage, args.topic)
    t = (log.stamp_ns - log.stamp_ns[0]) * 1e-9
    steps = np.diff(np.sort(t))
    rate = 1.0 / float(np.median(steps[steps > 0])) if np.any(steps > 0) else 0.0
    print(
        f"wrote {path}: {len(t)} joint states of {len(log.joints)} joints ({', '.join(log.joints)}) on "
        f"{args.topic}, {t.max() - t.min():.2f} s at ≈ {rate:.0f} Hz (time unit {log.time_unit})"
    )
    fields = ["position"] + [
        f for f, v in (("velocity", log.velocity), ("effort", log.effort)) if v is not None
    ]
    print(f"fields: {', '.join(fields)}")
    if log.bad_rows:
        print(f"skipped {log.bad_rows} bad row(s) of {log.rows}: {'; '.join(log.bad_examples)}")
    if log.out_of_order:
        print(
            f"{log.out_of_order} row(s) out of time order or repeated (the reader orders and de-duplicates)"
        )
    if log.current_joints:
        gains = ", ".join(f"{j}: GAIN" for j in log.current_joints)
        print(
            f"effort of {', '.join(log.current_joints)} is motor current [A]: train with "
            f"'effort: motor_current' and 'effort_scale: {{{gains}}}' (N·m/A)"
        )
    return 0

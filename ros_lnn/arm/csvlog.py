"""Robot logs in CSV (UR RTDE, libfranka, vendor tools) → arrays for a rosbag2 ``/joint_states``.

The column map says which column holds what, by header name (or by 0-based index for files without
a header), inline or as a YAML file::

    time=timestamp,q.shoulder=actual_q_0,qd.shoulder=actual_qd_0,current.shoulder=actual_current_0,...

    # columns.yaml
    time: timestamp
    time_unit: s            # s | ms | us | ns | auto (default: auto, from the median step)
    joints:
      shoulder: {position: actual_q_0, velocity: actual_qd_0, current: actual_current_0}

Per joint ``position`` (``q``), ``velocity`` (``qd``), and either ``effort`` (``tau``: joint torque,
N·m or N) or ``current`` (A: the bag's effort is then the motor current; train with
``effort: motor_current`` and the drive gains in ``effort_scale``). A value may carry a factor,
``column*0.0174533`` (degrees → rad). Joints keep the map's order.

The reader takes the delimiter from the header line (``,`` ``;`` tab or spaces; or ``delimiter``),
skips blank lines and ``#`` comments, handles a UTF-8 byte-order mark and CRLF line ends, and counts
and skips bad rows (too few fields, a mapped value that is not a finite number). Times: relative
times start at a fixed plausible wall-clock instant; times that look like Unix time are kept.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path

import numpy as np

from ..errors import ConfigError, DataError

FIELDS = {
    "position": "position",
    "q": "position",
    "velocity": "velocity",
    "qd": "velocity",
    "effort": "effort",
    "tau": "effort",
    "torque": "effort",
    "current": "current",
}
TIME_UNITS = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
MAP_KEYS = ("time", "time_unit", "joints", "delimiter")
RELATIVE_START_NS = 1_700_000_000 * 1_000_000_000


@dataclass(frozen=True)
class Column:
    name: str | int  # header name or 0-based index
    factor: float = 1.0


@dataclass
class ColumnMap:
    time: Column
    joints: dict  # joint → {"position"|"velocity"|"effort"|"current": Column}
    time_unit: str = "auto"
    delimiter: str = ""

    @property
    def joint_names(self) -> list[str]:
        return list(self.joints)

    def current_joints(self) -> list[str]:
        return [j for j, f in self.joints.items() if "current" in f]


def _column(spec, where: str) -> Column:
    if isinstance(spec, bool) or spec is None:
        raise ConfigError(f"{where}: give a column name or index, got {spec!r}")
    if isinstance(spec, int):
        if spec < 0:
            raise ConfigError(f"{where}: column index {spec} is negative")
        return Column(spec)
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"{where}: give a column name or index, got {spec!r}")
    text = spec.strip()
    factor = 1.0
    if "*" in text:
        text, _, f = text.rpartition("*")
        text = text.strip()
        try:
            factor = float(f)
        except ValueError:
            raise ConfigError(f"{where}: factor {f!r} after '*' is not a number") from None
        if not math.isfinite(factor) or factor == 0:
            raise ConfigError(f"{where}: factor {factor!r} must be finite and non-zero")
    if not text:
        raise ConfigError(f"{where}: no column name before '*'")
    return Column(int(text) if text.isdigit() else text, factor)


def parse_column_map(spec: str) -> ColumnMap:
    """A YAML file's path, or the inline form ``time=t,q.j1=c1,...``."""
    path = Path(spec)
    if "=" not in spec and (path.suffix in (".yaml", ".yml") or path.exists()):
        from .mapping import read_config

        return column_map_from_dict(read_config(path), str(path))
    items = {}
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        key, eq, value = part.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise ConfigError(f"--columns: '{part}' is not KEY=COLUMN (e.g. time=t,q.joint1=pos1)")
        if key.strip() in items:
            raise ConfigError(f"--columns: {key.strip()} is given twice")
        items[key.strip()] = value.strip()
    doc: dict = {"joints": {}}
    for key, value in items.items():
        if key in ("time", "time_unit", "delimiter"):
            doc[key] = value
            continue
        what, dot, joint = key.partition(".")
        if not dot or not joint:
            raise ConfigError(
                f"--columns: unknown key '{key}'; use time, time_unit, or FIELD.JOINT with FIELD one of "
                f"{', '.join(sorted(FIELDS))}"
            )
        doc["joints"].setdefault(joint, {})[what] = value
    return column_map_from_dict(doc, "--columns")


def column_map_from_dict(doc, source: str) -> ColumnMap:
    if not isinstance(doc, dict):
        raise ConfigError(f"{source}: the column map must be a mapping with time: and joints:")
    unknown = sorted(set(doc) - set(MAP_KEYS))
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) {unknown}; known: {list(MAP_KEYS)}")
    if "time" not in doc:
        raise ConfigError(f"{source}: no time column (time=COLUMN)")
    unit = str(doc.get("time_unit", "auto"))
    if unit not in (*TIME_UNITS, "auto"):
        raise ConfigError(f"{source}: time_unit = {unit!r}: one of {', '.join(TIME_UNITS)}, auto")
    delimiter = doc.get("delimiter", "") or ""
    if not isinstance(delimiter, str) or len(delimiter.replace("\\t", "\t")) > 1:
        raise ConfigError(f"{source}: delimiter = {delimiter!r}: one character")
    joints_doc = doc.get("joints")
    if not isinstance(joints_doc, dict) or not joints_doc:
        raise ConfigError(f"{source}: no joints (q.JOINT=COLUMN, or a joints: mapping)")
    joints = {}
    for joint, fields_doc in joints_doc.items():
        if not isinstance(fields_doc, dict):
            raise ConfigError(
                f"{source}: joints.{joint} must map position/velocity/effort/current to columns"
            )
        cols = {}
        for what, spec in fields_doc.items():
            if what not in FIELDS:
                raise ConfigError(
                    f"{source}: {what}.{joint}: unknown field; one of {', '.join(sorted(FIELDS))}"
                )
            canonical = FIELDS[what]
            if canonical in cols:
                raise ConfigError(f"{source}: {joint} has two {canonical} columns")
            cols[canonical] = _column(spec, f"{source}: {what}.{joint}")
        if "position" not in cols:
            raise ConfigError(f"{source}: joint {joint} has no position column")
        if "effort" in cols and "current" in cols:
            raise ConfigError(f"{source}: joint {joint} has both an effort and a current column; map one")
        joints[str(joint)] = cols
    return ColumnMap(_column(doc["time"], f"{source}: time"), joints, unit, delimiter.replace("\\t", "\t"))


@dataclass
class CsvLog:
    joints: list
    stamp_ns: np.ndarray
    position: np.ndarray
    velocity: np.ndarray | None  # NaN for joints without a velocity column
    effort: np.ndarray | None  # joint torque or motor current (see ``current_joints``)
    current_joints: list
    time_unit: str
    rows: int = 0
    bad_rows: int = 0
    bad_examples: list = field(default_factory=list)
    out_of_order: int = 0


def _split(line: str, delimiter: str) -> list[str]:
    if delimiter == " ":
        return line.split()
    return next(csv.reader([line], delimiter=delimiter))


def _sniff_delimiter(header: str) -> str:
    counts = {d: header.count(d) for d in (",", ";", "\t")}
    best = max(counts, key=counts.__getitem__)
    if counts[best]:
        return best
    return " " if len(header.split()) > 1 else ","


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_csv_log(path, cmap: ColumnMap, time_unit: str | None = None, delimiter: str | None = None) -> CsvLog:
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such CSV file")
    unit = time_unit or cmap.time_unit
    try:
        with path.open(encoding="utf-8-sig", newline="") as fh:
            lines = [(i + 1, line.rstrip("\r\n")) for i, line in enumerate(fh)]
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not a text CSV file ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror})") from None
    lines = [(n, line) for n, line in lines if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise DataError(f"{path}: no data rows")
    delim = delimiter or cmap.delimiter or _sniff_delimiter(lines[0][1])
    first = [c.strip().strip('"') for c in _split(lines[0][1], delim)]
    by_name = any(isinstance(c.name, str) for c in _all_columns(cmap))
    header = by_name or not all(_is_number(c) for c in first if c)
    index: dict[str, int] = {}
    if header:
        for k, name in enumerate(first):
            index.setdefault(name, k)
        lines = lines[1:]
    columns = _all_columns(cmap)

    def where(col: Column) -> int:
        if isinstance(col.name, int):
            return col.name
        if col.name not in index:
            if not header:
                raise ConfigError(f"{path}: the file has no header row; map columns by 0-based index")
            shown = ", ".join(first[:12]) + (" …" if len(first) > 12 else "")
            raise ConfigError(f"{path}: no column '{col.name}' in the header ({shown})")
        return index[col.name]

    pos = {c: where(c) for c in columns}
    needed = max(pos.values()) + 1
    joints = cmap.joint_names
    n = len(joints)
    stamps: list[int] = []
    values: dict[str, list[list[float]]] = {f: [] for f in ("position", "velocity", "effort")}
    bad = 0
    examples: list[str] = []
    parsed_times: list[Decimal] = []
    for lineno, line in lines:
        cells = _split(line, delim)
        if len(cells) < needed:
            bad += 1
            if len(examples) < 3:
                examples.append(f"line {lineno}: {len(cells)} fields, {needed} needed")
            continue
        try:
            t = Decimal(cells[pos[cmap.time]].strip().strip('"'))
            if not t.is_finite():
                raise InvalidOperation
            row = {}
            for what in ("position", "velocity", "effort"):
                vals = []
                for joint in joints:
                    col = cmap.joints[joint].get(what) or (
                        cmap.joints[joint].get("current") if what == "effort" else None
                    )
                    if col is None:
                        vals.append(math.nan)
                        continue
                    v = float(cells[pos[col]].strip().strip('"')) * col.factor
                    if not math.isfinite(v):
                        raise ValueError(f"{col.name} is {v}")
                    vals.append(v)
                row[what] = vals
        except (InvalidOperation, ValueError) as exc:
            bad += 1
            if len(examples) < 3:
                reason = (
                    str(exc)
                    if isinstance(exc, ValueError) and str(exc) and "could not convert" not in str(exc)
                    else "not a number"
                )
                examples.append(f"line {lineno}: {reason}")
            continue
        parsed_times.append(t * Decimal(repr(cmap.time.factor)) if cmap.time.factor != 1.0 else t)
        for what in values:
            values[what].append(row[what])
    if len(parsed_times) < 2:
        raise DataError(
            f"{path}: {len(parsed_times)} usable rows of {len(lines)} ({bad} bad: {'; '.join(examples)})"
        )
    times = np.array([float(t) for t in parsed_times])
    if unit == "auto":
        unit = guess_time_unit(times)
    scale = TIME_UNITS[unit]
    stamps = [int((t * scale).to_integral_value()) for t in parsed_times]
    stamp_ns = np.array(stamps, dtype=np.int64)
    if stamp_ns[0] < 10**18 // 2:  # relative times (Unix time in ns is > 1.5e18 since 2017)
        stamp_ns = stamp_ns - stamp_ns.min() + RELATIVE_START_NS
    out_of_order = int(np.count_nonzero(np.diff(stamp_ns) <= 0))
    arrays = {w: np.array(v, dtype=float).reshape(-1, n) for w, v in values.items()}
    has = {w: any(w in f or (w == "effort" and "current" in f) for f in cmap.joints.values()) for w in values}
    return CsvLog(
        joints,
        stamp_ns,
        arrays["position"],
        arrays["velocity"] if has["velocity"] else None,
        arrays["effort"] if has["effort"] else None,
        cmap.current_joints(),
        unit,
        rows=len(lines),
        bad_rows=bad,
        bad_examples=examples,
        out_of_order=out_of_order,
    )


def _all_columns(cmap: ColumnMap) -> list[Column]:
    cols = [cmap.time]
    for f in cmap.joints.values():
        cols.extend(f.values())
    return cols


def guess_time_unit(times: np.ndarray) -> str:
    """s, ms, us or ns from the median step between rows: a step below 0.5 is seconds (a log above
    2 Hz), below 500 milliseconds, below 5·10⁵ microseconds, else nanoseconds. Logs at 2 Hz or
    slower in seconds, or faster than 2 kHz in milliseconds, need ``time_unit``."""
    steps = np.diff(times)
    steps = steps[steps > 0]
    if not len(steps):
        raise DataError("the time column does not increase; set time_unit and check the time column")
    step = float(np.median(steps))
    for unit, limit in (("s", 0.5), ("ms", 500.0), ("us", 5e5)):
        if step <= limit:
            return unit
    return "ns"


def write_joint_states_bag(log: CsvLog, out, storage: str = "sqlite3", topic: str = "/joint_states"):
    from ..bags.writer import BagWriter

    with BagWriter(out, storage) as writer:
        writer.joint_states(topic, log.stamp_ns, log.joints, log.position, log.velocity, log.effort)
    return Path(out)

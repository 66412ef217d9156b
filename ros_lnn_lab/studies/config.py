"""``StudyConfig``: what the papers' studies (docs/studies.md) share, typed, in one frozen dataclass that
every study takes: seeds, epochs, the smoke-run switch, the data's and rollouts' sizes, the output folder
and the progress printer. A study's own defaults are a ``StudyConfig`` too (``DEFAULTS`` in its module,
set with :meth:`StudyConfig.replace`); settings only one study has stay keyword arguments of that study.
``ros-lnn bench zoo`` builds one per study from its options (:func:`ros_lnn_lab.bench.zoo.study_config`);
each field's ``option`` metadata is its option there. Nothing here imports torch."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ros_lnn.training.spec import option


def _seed_count(n: int | None) -> tuple[int, ...] | None:
    """``--seeds N``: the seeds 0 … N−1."""
    return tuple(range(n)) if n else None


def _folder(text: str | None) -> Path | None:
    return Path(text) if text else None


@dataclass(frozen=True)
class StudyConfig:
    """A study's shared settings. The defaults are placeholders: a study runs at its module's
    ``DEFAULTS`` (replaced by what is given); fields a study does not use are ignored by it."""

    quick: bool = field(
        default=False, metadata=option("every study at a smoke-run scale (seconds)", action="store_true")
    )
    seeds: tuple[int, ...] = field(
        default=(0,),
        metadata=option(
            "number of seeds 0 … N−1 (servo-seeds: default 10, lnn-nh: 3; single-seed studies use the first)",
            type=int,
            parse=_seed_count,
        ),
    )
    epochs: int = field(default=150, metadata=option("training epochs of the study's models", type=int))
    trajectories: int = 40  # simulated training trajectories (tlnn: initial conditions; lnn-nh)
    duration: float = 10.0  # seconds per simulated training trajectory
    samples: int | None = None  # training samples drawn (servo-seeds; None: the family's default, 4096)
    hidden: tuple[int, ...] = (32,)  # hidden widths: lnn-nh's networks; tlnn: (the TLNN's width,)
    rollouts: int = 100  # rollouts from held-out initial states
    rollout_duration: float = 10.0  # seconds per rollout
    links: tuple[int, ...] = field(
        default=(2, 3, 4),
        metadata=option("chain sizes of the tlnn study (default 2 3 4)", type=int, nargs="+", parse=tuple),
    )
    data: str | None = field(
        default=None, metadata=option("DeLaN character data: its folder or character_data.npz", type=str)
    )
    output: Path | None = field(
        default=None,
        metadata=option("folder for JSON and PNG (default reports/zoo)", "--output", parse=_folder, type=str),
    )  # where plots go; None: no plots
    progress: Callable[[str], None] = field(default=print, compare=False)  # the study's progress lines

    def replace(self, **values) -> StudyConfig:
        """A copy with ``values`` set (a study's own defaults, the options given); an unknown name is a
        ``TypeError`` naming the fields."""
        unknown = set(values) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise TypeError(
                f"StudyConfig has no {', '.join(sorted(unknown))}; "
                f"fields: {', '.join(f.name for f in dataclasses.fields(self))}"
            )
        return dataclasses.replace(self, **values)

    @property
    def seed(self) -> int:
        """The seed of a single-seed study: the first."""
        return self.seeds[0]

    def silent(self) -> StudyConfig:
        """The same with no progress lines."""
        return self.replace(progress=_quiet)


def _quiet(line: str) -> None:
    pass


__all__ = ["StudyConfig"]

"""Early stopping on a validation metric (lower is better), keeping the best weights for export."""

from __future__ import annotations

import math


class EarlyStopping:
    """``patience`` validations without an improvement larger than ``min_delta`` stop the run
    (``patience`` 0: never stop). The best weights are kept either way when ``keep_best``."""

    def __init__(
        self,
        patience: int = 0,
        min_delta: float = 0.0,
        monitor: str = "qdd_f_nmse",
        keep_best: bool | None = None,
    ):
        if patience < 0 or min_delta < 0:
            raise ValueError(f"patience ({patience}) and min_delta ({min_delta}) must be >= 0")
        self.patience, self.min_delta, self.monitor = int(patience), float(min_delta), monitor
        self.keep_best = bool(patience) if keep_best is None else keep_best
        self.best = math.inf
        self.best_epoch = 0
        self.bad = 0
        self.stopped_epoch = 0
        self.best_state: dict | None = None

    @property
    def enabled(self) -> bool:
        return self.patience > 0

    def update(self, epoch: int, metrics: dict, model) -> bool:
        """Record one validation; True when the run should stop now."""
        if self.monitor not in metrics:
            raise ValueError(
                f"early stopping monitors '{self.monitor}', the validation gives {sorted(metrics)}"
            )
        value = float(metrics[self.monitor])
        if value < self.best - self.min_delta:
            self.best, self.best_epoch, self.bad = value, epoch, 0
            if self.keep_best:
                self.best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        else:
            self.bad += 1
        if self.enabled and self.bad >= self.patience:
            self.stopped_epoch = epoch
            return True
        return False

    def restore_best(self, model) -> bool:
        """Load the best weights into ``model`` (True when there were any)."""
        if self.keep_best and self.best_state is not None:
            model.load_state_dict(self.best_state)
            return True
        return False

    def summary(self) -> dict:
        return {
            "enabled": self.enabled,
            "monitor": self.monitor,
            "patience": self.patience,
            "min_delta": self.min_delta,
            "best": None if math.isinf(self.best) else self.best,
            "best_epoch": self.best_epoch,
            "stopped_epoch": self.stopped_epoch or None,
        }

    def state_dict(self) -> dict:
        best_state = None if self.best_state is None else {k: v.cpu() for k, v in self.best_state.items()}
        return self.summary() | {"bad": self.bad, "best_state": best_state, "best": self.best}

    def load_state_dict(self, state: dict, device=None) -> None:
        self.best, self.best_epoch, self.bad = (
            float(state["best"]),
            int(state["best_epoch"]),
            int(state["bad"]),
        )
        self.stopped_epoch = int(state["stopped_epoch"] or 0)
        bs = state.get("best_state")
        self.best_state = (
            None if bs is None else {k: v.to(device) if device is not None else v for k, v in bs.items()}
        )

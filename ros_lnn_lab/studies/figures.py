"""The studies' figures: matplotlib on the file-only backend, and one way of writing a figure."""

from __future__ import annotations


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (files, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path, dpi: int = 110) -> str:
    """Lay ``fig`` out, write it to ``path`` and close it; the path as text."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return str(path)


__all__ = ["pyplot", "save_figure"]

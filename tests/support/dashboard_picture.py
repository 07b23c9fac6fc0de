"""The shipped Grafana dashboard's panels drawn from Prometheus' answers to their own
queries, as one PNG: what an operator of Onceflow sees, for the docs (``make
dashboard-picture``), without a Grafana."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: files only

import matplotlib.pyplot as plt

COLUMNS = 2


def draw_dashboard(answered: dict[str, list[Any]], path: Path) -> Path:
    """``answered``: panel title -> the series of its query (``query_range``'s result),
    in the dashboard's order."""
    rows = math.ceil(len(answered) / COLUMNS)
    figure, axes = plt.subplots(rows, COLUMNS, figsize=(12, 2.6 * rows), squeeze=False)
    for axis, (title, series) in zip(axes.flat, answered.items(), strict=False):
        axis.set_title(title, fontsize=9, loc="left")
        axis.tick_params(labelsize=7)
        if not series:
            axis.text(0.5, 0.5, "no data in this run", ha="center", va="center", fontsize=8)
            continue
        start = min(float(s["values"][0][0]) for s in series)
        for one in series[:8]:
            times = [float(t) - start for t, _ in one["values"]]
            values = [float(v) if v not in ("NaN", "+Inf", "-Inf") else math.nan
                      for _, v in one["values"]]  # fmt: skip
            label = ",".join(f"{k}={v}" for k, v in sorted(one["metric"].items())) or "value"
            axis.plot(times, values, linewidth=1.2, label=label[:40])
        axis.set_xlabel("seconds", fontsize=7)
        axis.legend(fontsize=6, loc="upper left")
    for axis in list(axes.flat)[len(answered) :]:
        axis.axis("off")
    figure.suptitle("Onceflow (helm/onceflow/files/dashboards/onceflow.json)", fontsize=11)
    figure.tight_layout(rect=(0, 0, 1, 0.98))
    figure.savefig(path, dpi=80)
    plt.close(figure)
    return path

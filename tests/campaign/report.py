"""The campaign's report, in the folder ``make campaign`` prints: ``timeline.png`` (per
pipeline, records made visible per second and the median time to visible, with every
fault marked where it struck), ``report.json`` (every strike with its evidence and
recovery, the recovery per kind, the verdicts) and ``summary.md`` (the figures a
reader looks for first)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: files only


import matplotlib.pyplot as plt
from matplotlib.lines import Line2D

from tests.campaign.audits import Verdict
from tests.campaign.kinds import FaultKind, Strike
from tests.campaign.recovery import KindRecovery, Timeline, recovery_by_kind, recovery_s

COLOURS = {kind: plt.get_cmap("tab20")(i) for i, kind in enumerate(FaultKind)}


def _rates(progress: Sequence[tuple[float, int]]) -> tuple[list[float], list[float]]:
    """Records per second between consecutive samples."""
    times, rates = [], []
    for (t0, n0), (t1, n1) in itertools.pairwise(progress):
        if t1 > t0:
            times.append(t1)
            rates.append((n1 - n0) / (t1 - t0))
    return times, rates


def draw_timeline(
    timelines: Sequence[Timeline], strikes: Sequence[Strike], start: float, path: Path
) -> Path:
    figure, axes = plt.subplots(
        len(timelines), 1, figsize=(14, 2.6 * len(timelines)), sharex=True, squeeze=False
    )
    for ax, timeline in zip(axes[:, 0], timelines, strict=True):
        times, rates = _rates(timeline.progress)
        ax.plot([t - start for t in times], rates, color="tab:blue", linewidth=0.7)
        ax.set_ylabel("records/s", color="tab:blue")
        ax.set_yscale("symlog", linthresh=10)  # a paced stream and a sprint on one axis
        ax.set_title(timeline.pipeline, loc="left", fontsize=10)
        if timeline.latency:
            twin = ax.twinx()
            twin.plot(
                [t - start for t, _ in timeline.latency],
                [s for _, s in timeline.latency],
                color="tab:red", linewidth=0.6, alpha=0.8,
            )  # fmt: skip
            twin.set_ylabel("to visible, s", color="tab:red")
            twin.set_yscale("log")
        for strike in strikes:
            colour = COLOURS[strike.kind]
            style = "-" if strike.pipeline == timeline.pipeline else ":"
            ax.axvline(strike.struck_at - start, color=colour, linewidth=0.8, linestyle=style)
            if strike.cleared_at - strike.struck_at > 0.5 and strike.pipeline == timeline.pipeline:
                ax.axvspan(
                    strike.struck_at - start, strike.cleared_at - start, color=colour, alpha=0.15
                )
    kinds = sorted({s.kind for s in strikes})
    handles = [Line2D([], [], color=COLOURS[k], label=k.value) for k in kinds]
    figure.legend(handles=handles, loc="lower center", ncol=5, fontsize=8, frameon=False)
    axes[-1, 0].set_xlabel("seconds into the campaign (faults: solid on the pipeline they aim at)")
    figure.tight_layout(rect=(0, 0.07, 1, 1))
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def summary_markdown(
    recovery: Sequence[KindRecovery], verdicts: Sequence[Verdict], facts: dict[str, Any]
) -> str:
    lines = [
        "# Fault campaign",
        "",
        ", ".join(f"{k}: {v}" for k, v in facts.items()),
        "",
        "| fault kind | struck | landed | recovered | recovery median (s) | p99 (s) |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r.kind.value} | {r.struck} | {r.landed} | {r.recovered} | "
        f"{_seconds(r.median_s)} | {_seconds(r.p99_s)} |"
        for r in recovery
    ]
    lines += ["", "| pipeline | verdict | detail |", "|---|---|---|"]
    lines += [f"| {v.pipeline} | {'exact' if v.ok else 'FAILED'} | {v.detail} |" for v in verdicts]
    return "\n".join(lines) + "\n"


def write_report(
    folder: Path,
    timelines: Sequence[Timeline],
    strikes: Sequence[Strike],
    verdicts: Sequence[Verdict],
    start: float,
    facts: dict[str, Any],
) -> list[KindRecovery]:
    folder.mkdir(parents=True, exist_ok=True)
    by_name = {t.pipeline: t for t in timelines}
    recovery = recovery_by_kind(strikes, by_name)
    draw_timeline(timelines, strikes, start, folder / "timeline.png")
    report = {
        "facts": facts,
        "strikes": [
            {
                **asdict(s),
                "at_s": round(s.struck_at - start, 2),
                "recovery_s": recovery_s(s, by_name[s.pipeline]) if s.pipeline in by_name else None,
            }
            for s in strikes
        ],
        "recovery": [asdict(r) for r in recovery],
        "verdicts": [asdict(v) for v in verdicts],
    }
    (folder / "report.json").write_text(json.dumps(report, indent=1, default=str))
    (folder / "summary.md").write_text(summary_markdown(recovery, verdicts, facts))
    return recovery

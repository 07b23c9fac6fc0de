"""Human and machine renderings of an audit report."""

from __future__ import annotations

from typing import Any

from onceflow.logic.audit import AuditReport

MAX_RANGES_SHOWN = 5


def _ranges_text(ranges: tuple[tuple[int, int], ...]) -> str:
    shown = [f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in ranges[:MAX_RANGES_SHOWN]]
    more = len(ranges) - MAX_RANGES_SHOWN
    return ",".join(shown) + (f",+{more} more" if more > 0 else "") if shown else "-"


def audit_table(report: AuditReport, topic: str, isolation: str) -> str:
    header = (
        f"{'key':<16} {'records':>8} {'distinct':>8} {'highest':>8} "
        f"{'dupes':>6} {'order':>6}  missing"
    )
    lines = [f"audit of {topic} ({isolation})", header, "-" * len(header)]
    for k in report.keys:
        lines.append(
            f"{k.key:<16} {k.count:>8} {k.distinct:>8} {k.highest:>8} {k.duplicates:>6} "
            f"{k.order_violations:>6}  {_ranges_text(k.missing)}"
        )
    lines.append("-" * len(header))
    verdict = "OK: exactly once" if report.ok else "VIOLATIONS FOUND"
    expect = f", expected {report.expect} per key" if report.expect is not None else ""
    if report.key_problem:
        lines.append(f"KEYS: {report.key_problem}")
    lines.append(
        f"{verdict}: {report.records} records, {len(report.keys)} keys{expect}, "
        f"{report.duplicates} duplicates, {report.missing} missing, "
        f"{report.order_violations} out of order, {report.unparsable} unparsable"
    )
    return "\n".join(lines)


def audit_json(report: AuditReport) -> dict[str, Any]:
    return {
        "ok": report.ok,
        "records": report.records,
        "duplicates": report.duplicates,
        "missing": report.missing,
        "orderViolations": report.order_violations,
        "unparsable": report.unparsable,
        "expect": report.expect,
        "keyCount": report.key_count,
        "keyProblem": report.key_problem,
        "keys": [
            {
                "key": k.key,
                "records": k.count,
                "distinct": k.distinct,
                "highest": k.highest,
                "duplicates": k.duplicates,
                "orderViolations": k.order_violations,
                "missing": [list(r) for r in k.missing],
            }
            for k in report.keys
        ],
    }

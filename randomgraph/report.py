"""Campaign reports: ``OUT/report.html`` (self-contained, plots as inline SVG) and
``OUT/summary.md``, both rebuilt from the journal after every campaign run.

The HTML report shows the outcome totals, the outcomes over time (cumulative tests per
outcome against campaign time, across resumed sessions), the coverage of operation ×
data type (cell shade: number of tests; red: something failed there), the distinct
failures with their original and minimized specs and the command that replays each, and
the outcome table per operation and data type. Nothing is loaded from elsewhere: one file
to attach to a bug report.
"""

from __future__ import annotations

import html
import math
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from randomgraph.campaign import (
    JOURNAL,
    NO_OPERATION,
    CampaignSettings,
    CampaignState,
    Journal,
    format_table,
    outcome_table,
    replay_command,
)
from randomgraph.differential import Outcome

COLORS = {
    "pass": "#4caf50",
    "skipped": "#9e9e9e",
    "wrong-result": "#e53935",
    "rejected": "#fb8c00",
    "prepare-failed": "#8e24aa",
    "execute-failed": "#3949ab",
    "crash": "#000000",
    "hang": "#6d4c41",
    "inconsistent": "#00897b",
    "reference-error": "#fdd835",
}


def write_reports(
    out: str | Path,
    settings: CampaignSettings | None = None,
    *,
    state: CampaignState | None = None,
) -> tuple[Path, Path]:
    """Write ``report.html`` and ``summary.md`` for the campaign in ``out``, from
    ``state`` (the campaign's, up to date with its journal) or else from the journal."""
    out = Path(out)
    if state is None:
        state = CampaignState.from_journal(Journal(out / JOURNAL))
    driver = settings.driver if settings else _identity(state, "driver", "?")
    timeout = settings.timeout if settings else 10.0
    html_path = out / "report.html"
    md_path = out / "summary.md"
    html_path.write_text(render_html(state, driver, timeout, out=out), encoding="utf-8")
    md_path.write_text(render_markdown(state, driver, timeout, out=out), encoding="utf-8")
    return html_path, md_path


def _identity(state: CampaignState, key: str, default):
    return (state.identity or {}).get(key, default)


def _totals(state: CampaignState) -> Counter[str]:
    return state.outcome_counts()


def _failure_rows(state: CampaignState, driver: str, timeout: float, out: Path) -> list[dict]:
    """One row per distinct failure; spec paths are relative to ``out`` (the report sits
    there), replay commands name ``out / spec`` as the campaign's stdout does."""
    rows = []
    for f in sorted(state.bugs(), key=lambda f: f.id):
        key = f.final_key
        spec = f.minimized or f.spec
        rows.append(
            {
                "id": f.id,
                "outcome": Outcome(f.outcome).label,
                "outcome_value": f.outcome,
                "ops": key[1].replace("+", ", ") or "-",
                "dtype": key[2],
                "first": key[3] if key[3] != "-" else "",
                "copies": f.copies,
                "spec": f.spec,
                "minimized": f.minimized,
                "n_ops": f.n_ops,
                "min_ops": f.min_ops if f.minimized else None,
                "status": f.status,
                "detail": f.min_detail or f.detail,
                "replay": replay_command(out / spec, driver, f.outcome, timeout),
                "test": f.test,
            }
        )
    return rows


# ---------------------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------------------


def render_markdown(
    state: CampaignState, driver: str, timeout: float = 10.0, *, out: str | Path = "."
) -> str:
    totals = _totals(state)
    failed = sum(n for o, n in totals.items() if Outcome(o).failed)
    lines = [
        f"# nnfuzz campaign: `{driver}`",
        "",
        f"{sum(totals.values())} tests, {failed} failed, "
        f"{len(state.bugs())} distinct failures; {state.sessions} session(s), "
        f"{state.elapsed_offset:.0f} s of campaign time.",
        "",
        "| outcome | tests |",
        "|---|---|",
        *(f"| {Outcome(o).label} | {n} |" for o, n in sorted(totals.items())),
        "",
        "## Distinct failures",
        "",
    ]
    rows = _failure_rows(state, driver, timeout, Path(out))
    if not rows:
        lines += ["None.", ""]
    for r in rows:
        ops = (
            f"{r['n_ops']} -> {r['min_ops']} operations"
            if r["min_ops"] is not None
            else f"{r['n_ops']} operations, {r['status']}"
        )
        lines += [
            f"### {r['id']}: {r['outcome']} — {r['ops']} ({r['dtype']})"
            + (f", first diverging operation {r['first']}" if r["first"] else ""),
            "",
            f"- {r['copies']} failing test(s); first: `{r['test']}`; {ops}",
            f"- detail: {_md_escape(r['detail'][:300])}",
            f"- original spec: [`{r['spec']}`]({r['spec']})"
            + (f"; minimized: [`{r['minimized']}`]({r['minimized']})" if r["minimized"] else ""),
            f"- replay: `{r['replay']}`",
            "",
        ]
    header, table = outcome_table(state)
    lines += [
        "## Outcomes per operation and data type",
        "",
        "```",
        format_table(header, table),
        "```",
        "",
    ]
    return "\n".join(lines)


def _md_escape(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


# ---------------------------------------------------------------------------------------
# HTML
# ---------------------------------------------------------------------------------------

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#222;max-width:1200px}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:3px 7px;
text-align:left;vertical-align:top}th{background:#f4f4f4}code{background:#f4f4f4;padding:1px 4px}
.tot span{display:inline-block;margin-right:1.2em}.sw{display:inline-block;width:.9em;height:.9em;
margin-right:.3em;vertical-align:-1px;border-radius:2px}.fail{color:#c62828;font-weight:600}
svg text{font:11px system-ui,sans-serif}
"""


def render_html(
    state: CampaignState, driver: str, timeout: float = 10.0, *, out: str | Path = "."
) -> str:
    e = html.escape
    totals = _totals(state)
    failed = sum(n for o, n in totals.items() if Outcome(o).failed)
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>nnfuzz campaign: {e(driver)}</title><style>{_CSS}</style></head><body>",
        f"<h1>nnfuzz campaign: <code>{e(driver)}</code></h1>",
        f"<p>{sum(totals.values())} tests, <span class='{'fail' if failed else ''}'>{failed} failed</span>, "
        f"{len(state.bugs())} distinct failures; {state.sessions} session(s), "
        f"{state.elapsed_offset:.0f} s of campaign time; written {e(time.strftime('%Y-%m-%d %H:%M:%S'))}.</p>",
        "<p class='tot'>"
        + "".join(
            f"<span><i class='sw' style='background:{COLORS.get(o, '#999')}'></i>{e(Outcome(o).label)}: {n}</span>"
            for o, n in sorted(totals.items())
        )
        + "</p>",
        "<h2>Distinct failures</h2>",
        _failures_html(state, driver, timeout, Path(out)),
        "<h2>Outcomes over time</h2>",
        svg_timeline(state),
        "<h2>Coverage: operation × data type</h2>",
        "<p>Shade: number of tests that contain the operation with that input type "
        "(log scale); red: at least one of them failed. Hover a cell for its counts.</p>",
        svg_coverage(state),
        "<h2>Outcomes per operation and data type</h2>",
        _outcome_table_html(state),
        "<h2>Generator coverage</h2>",
        _coverage_html(state),
        "</body></html>",
    ]
    return "\n".join(parts)


def _failures_html(state: CampaignState, driver: str, timeout: float, out: Path) -> str:
    e = html.escape
    rows = _failure_rows(state, driver, timeout, out)
    if not rows:
        return "<p>None.</p>"
    out = [
        "<table><tr><th>id</th><th>outcome</th><th>operations</th><th>data type</th>"
        "<th>first diverging</th><th>copies</th><th>specs</th><th>replay</th></tr>"
    ]
    for r in rows:
        specs = f"<a href='{e(r['spec'])}'>original</a> ({r['n_ops']} ops)"
        if r["minimized"]:
            specs += f"<br><a href='{e(r['minimized'])}'>minimized</a> ({r['min_ops']} ops)"
        else:
            specs += f"<br>{e(r['status'])}"
        out.append(
            f"<tr><td>{e(r['id'])}</td>"
            f"<td><i class='sw' style='background:{COLORS.get(r['outcome_value'], '#999')}'></i>{e(r['outcome'])}"
            f"<br><small>{e(r['detail'][:240])}</small></td>"
            f"<td>{e(r['ops'])}</td><td>{e(r['dtype'])}</td><td>{e(r['first'])}</td>"
            f"<td>{r['copies']}</td><td>{specs}</td><td><code>{e(r['replay'])}</code></td></tr>"
        )
    out.append("</table>")
    return "\n".join(out)


def _coverage_html(state: CampaignState) -> str:
    cov = state.coverage()
    if not cov.graphs:
        return "<p>No generated tests yet.</p>"
    s = cov.summary()
    return (
        f"<p>{s['operations_generated']} of {s['operations_total']} operations and "
        f"{s['data_type_pairs_generated']} of {s['data_type_pairs_total']} (operation, data "
        f"type) pairs the declarations allow were generated, in {s['operation_instances']} "
        f"operations over {s['graphs']} graphs (randomgraph/coverage.py).</p>"
        f"<details><summary>table</summary><pre>{html.escape(cov.table())}</pre></details>"
    )


def _outcome_table_html(state: CampaignState) -> str:
    e = html.escape
    header, rows = outcome_table(state)
    out = ["<details><summary>table</summary><table><tr>"]
    out += [f"<th>{e(h)}</th>" for h in header]
    out.append("</tr>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{e(x)}</td>" for x in row) + "</tr>")
    out.append("</table></details>")
    return "".join(out)


def svg_timeline(state: CampaignState, width: int = 760, height: int = 260) -> str:
    """Cumulative tests per outcome against campaign time."""
    timeline = state.timeline
    if not timeline.counts:
        return "<p>No tests yet.</p>"
    left, right, top, bottom = 50, 150, 10, 30
    w, h = width - left - right, height - top - bottom
    t_max = max(timeline.end, 1e-3)
    series = timeline.series
    y_max = max(timeline.counts.values())
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}'>"]
    parts.append(f"<rect x='{left}' y='{top}' width='{w}' height='{h}' fill='none' stroke='#bbb'/>")
    for k in range(5):
        y = top + h - h * k / 4
        v = y_max * k / 4
        parts.append(f"<line x1='{left}' x2='{left + w}' y1='{y:.1f}' y2='{y:.1f}' stroke='#eee'/>")
        parts.append(f"<text x='{left - 6}' y='{y + 4:.1f}' text-anchor='end'>{v:.0f}</text>")
        x = left + w * k / 4
        parts.append(
            f"<text x='{x:.1f}' y='{top + h + 16}' text-anchor='middle'>{t_max * k / 4:.0f} s</text>"
        )
    for n, (o, pts) in enumerate(sorted(series.items(), key=lambda kv: -kv[1][-1][1])):
        pts = [*pts, (t_max, pts[-1][1])]
        path = " ".join(
            f"{left + w * t / t_max:.1f},{top + h - h * c / y_max:.1f}" for t, c in _steps(pts)
        )
        color = COLORS.get(o, "#999")
        parts.append(f"<polyline points='{path}' fill='none' stroke='{color}' stroke-width='2'/>")
        ly = top + 12 + 16 * n
        parts.append(
            f"<rect x='{left + w + 12}' y='{ly - 9}' width='10' height='10' fill='{color}'/>"
        )
        parts.append(
            f"<text x='{left + w + 26}' y='{ly}'>{html.escape(Outcome(o).label)} ({pts[-1][1]})</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _steps(pts: Sequence[tuple[float, int]]) -> list[tuple[float, int]]:
    out: list[tuple[float, int]] = []
    for t, c in pts:
        if out:
            out.append((t, out[-1][1]))
        out.append((t, c))
    return out


def svg_coverage(state: CampaignState, cell: int = 16) -> str:
    """Operation × data type: shade by number of tests, red where something failed."""
    tests: Counter[tuple[str, str]] = Counter()
    fails: Counter[tuple[str, str]] = Counter()
    for (op, dt), outcomes in state.per_operation.items():
        if (op, dt) == NO_OPERATION:
            continue  # tests without operations (a generator error): no cell
        tests[(op, dt)] = sum(outcomes.values())
        fails[(op, dt)] = sum(n for o, n in outcomes.items() if Outcome(o).failed)
    if not tests:
        return "<p>No tests yet.</p>"
    ops = sorted({op for op, _ in tests})
    types = sorted(
        {dt for _, dt in tests}, key=lambda t: (-sum(n for (o, d), n in tests.items() if d == t), t)
    )
    left, top = 230, 150
    width, height = left + cell * len(types) + 10, top + cell * len(ops) + 10
    peak = max(tests.values())
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}'>"]
    for j, dt in enumerate(types):
        x = left + cell * j + cell / 2
        parts.append(
            f"<text transform='translate({x + 4:.1f},{top - 6}) rotate(-60)'>{html.escape(dt)}</text>"
        )
    for i, op in enumerate(ops):
        y = top + cell * i
        parts.append(
            f"<text x='{left - 6}' y='{y + cell - 4}' text-anchor='end'>{html.escape(op)}</text>"
        )
        for j, dt in enumerate(types):
            n = tests.get((op, dt), 0)
            x = left + cell * j
            if n == 0:
                fill = "#fafafa"
            elif fails.get((op, dt)):
                fill = "#e53935"
            else:
                shade = 0.25 + 0.75 * math.log1p(n) / math.log1p(peak)
                fill = _blend("#e3f2fd", "#0d47a1", shade)
            tip = f"{op} / {dt}: {n} tests" + (
                f", {fails[(op, dt)]} failed" if fails.get((op, dt)) else ""
            )
            parts.append(
                f"<rect x='{x}' y='{y}' width='{cell - 1}' height='{cell - 1}' fill='{fill}'>"
                f"<title>{html.escape(tip)}</title></rect>"
            )
    parts.append("</svg>")
    return "".join(parts)


def _blend(a: str, b: str, t: float) -> str:
    ca = [int(a[k : k + 2], 16) for k in (1, 3, 5)]
    cb = [int(b[k : k + 2], 16) for k in (1, 3, 5)]
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(ca, cb))


__all__ = ["render_html", "render_markdown", "svg_coverage", "svg_timeline", "write_reports"]

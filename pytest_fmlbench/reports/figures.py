"""Plotly figures of a task: the best validation value so far per step for each run, and LLM usage per step.

Each run group (one identity but the seed) has one colour and one legend group titled with the group's
whole title (agent, model, steps, options, marks); its seeds are the group's entries. A failed step has
no value, so it is not drawn at one: failed steps are red crosses in a lane of their own under the plot,
one row per run, with the error's last line on hover. The value axis spans the runs' values; the
baseline's line is drawn where it falls near them, and otherwise named at the plot's edge, so a run far
from the baseline is not flattened against it.

Text from runs (agent, model, options and task names, errors) is HTML-escaped before it reaches a figure:
plotly renders a subset of HTML in trace names and titles. It is also spelt out and cut
(``safe_text.printable``): a legend shows one line of a name, and a lone surrogate would stop a strict JSON
writer (orjson).
"""

from __future__ import annotations

import math
from html import escape as html_escape

import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from ..safe_text import printable
from ..scoring.groups import RunGroup
from .steps import RunView

FAILED_COLOR = "#d62728"
# the groups' colours: plotly's, but its red, which a reader would take for the failed steps' crosses
PALETTE = [color for color in qualitative.Plotly if color != "#EF553B"]
# the value plot's height, and each failing run's row in the lane of failed steps under it (pixels)
PLOT_PX, LANE_PX = 300, 26
# a group's seeds share its colour; each has its own line
DASHES = ("solid", "dot", "dash", "dashdot", "longdash")
# how far from the runs' values (in units of their span, at least a tenth of their size) the baseline may
# lie and still be drawn on the axis
BASELINE_REACH = 1.0


def shown(text: str) -> str:
    """A run's text as a figure shows it: one cut line, HTML-escaped."""
    return html_escape(printable(text))


LAYOUT = dict(template="plotly_white", margin=dict(l=60, r=20, t=50, b=40), legend=dict(orientation="h", y=-0.2))


def group_colors(runs: list[RunView]) -> dict[RunGroup, str]:
    groups = list(dict.fromkeys(run.group for run in runs))
    return {group: PALETTE[i % len(PALETTE)] for i, group in enumerate(groups)}


def _legend(run: RunView) -> dict:
    title = shown(run.group.title)
    return dict(legendgroup=title, legendgrouptitle_text=title)


def value_range(values: list[float], baseline: float | None) -> tuple[list[float] | None, bool]:
    """The value axis' range for ``values`` (None: let plotly choose), and whether the baseline is on it."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return None, True
    low, high = min(finite), max(finite)
    reach = max(high - low, 0.1 * max(abs(low), abs(high)), 1e-9) * BASELINE_REACH
    on_axis = baseline is not None and math.isfinite(baseline) and low - reach <= baseline <= high + reach
    if on_axis:
        low, high = min(low, baseline), max(high, baseline)
    pad = max(high - low, 0.1 * max(abs(low), abs(high)), 1e-9) * 0.08
    return [low - pad, high + pad], on_axis


def best_so_far_figure(task: str, runs: list[RunView]) -> go.Figure:
    """Best validation value so far over steps, one line per run; every valid step's own value as a marker;
    failed steps as red crosses in a lane below; the task's baseline validation value as a dashed line."""
    record = runs[0].record
    metric = shown(record.metric_key)
    failing = [run for run in runs if any(not s.valid for s in run.steps)]
    lane_px = LANE_PX * len(failing) + 20
    if failing:
        fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.04,
                            row_heights=[PLOT_PX / (PLOT_PX + lane_px), lane_px / (PLOT_PX + lane_px)])
    else:
        fig = make_subplots(rows=1, cols=1)
    colors = group_colors(runs)
    values: list[float] = []
    lanes: list[str] = []
    seen: dict[RunGroup, int] = {}
    for run in runs:
        color, seed = colors[run.group], run.record.seed
        dash = DASHES[seen.setdefault(run.group, 0) % len(DASHES)]
        seen[run.group] += 1
        steps = [s.step for s in run.steps]
        fig.add_trace(go.Scatter(
            x=steps, y=[s.best_so_far for s in run.steps], mode="lines", line_shape="hv", line_color=color,
            line_dash=dash,
            name=f"seed {shown(str(seed))}: best so far", **_legend(run)), row=1, col=1)
        valid = [s for s in run.steps if s.valid]
        values += [s.metric for s in valid if s.metric is not None]
        fig.add_trace(go.Scatter(
            x=[s.step for s in valid], y=[s.metric for s in valid], mode="markers", marker=dict(size=7, color=color),
            name=f"seed {shown(str(seed))}: valid step", **_legend(run),
            hovertemplate="step %{x}<br>" + metric + " %{y:.6g}<extra></extra>"), row=1, col=1)
        failed = [s for s in run.steps if not s.valid]
        if failed:
            lane = f"{shown(run.group.label or run.group.solver)}, seed {shown(str(seed))}"
            lanes.append(lane)
            fig.add_trace(go.Scatter(
                x=[s.step for s in failed], y=[lane] * len(failed), mode="markers",
                marker=dict(symbol="x", size=10, color=FAILED_COLOR, line=dict(width=1, color=color)),
                name=f"seed {shown(str(seed))}: failed step", **_legend(run),
                customdata=[shown(s.failure) for s in failed],
                hovertemplate="step %{x}: failed<br>%{customdata}<extra></extra>"), row=2, col=1)
    baseline = record.baseline_val
    span, on_axis = value_range(values, baseline)
    label = "baseline unmeasured" if baseline is None else f"baseline {baseline:.6g}"
    if baseline is None:
        fig.add_annotation(text=label, xref="x domain", yref="y domain", x=0, y=1, xanchor="left", yanchor="top",
                           showarrow=False, font=dict(color="gray"))
    elif on_axis:
        fig.add_hline(y=baseline, line_dash="dash", line_color="gray", annotation_text=label,
                      annotation_position="top left", row=1, col=1)
    else:
        where = "below" if baseline < span[0] else "above"
        fig.add_annotation(text=f"{label} ({where} the plotted range)", xref="x domain", yref="y domain",
                           x=0, y=0 if where == "below" else 1, xanchor="left",
                           yanchor="bottom" if where == "below" else "top", showarrow=False,
                           font=dict(color="gray"))
    arrow = "higher is better" if record.direction == "higher" else "lower is better"
    fig.update_layout(title=f"{shown(task)}: best validation {metric} so far ({arrow})",
                      height=PLOT_PX + 60 + (lane_px if failing else 0), **LAYOUT)
    longest = max(len(r.steps) for r in runs)
    fig.update_xaxes(dtick=1 if longest <= 20 else None)
    fig.update_xaxes(title_text="step", row=2 if failing else 1, col=1)
    fig.update_yaxes(title_text=metric, range=span, row=1, col=1)
    if failing:
        # every lane named: plotly would skip a crowded category's labels
        fig.update_yaxes(title_text="failed", type="category", autorange="reversed", tickmode="array",
                         tickvals=lanes, ticktext=lanes, row=2, col=1)
    return fig


def usage_figure(task: str, runs: list[RunView]) -> go.Figure | None:
    """Tokens (bars) and, where priced, dollars (lines) per step of the runs that called a model; None when
    none did (an agent that calls no model has no usage to plot)."""
    calling = [run for run in runs if run.calls_model]
    if not calling:
        return None
    priced = any(s.cost_usd for run in calling for s in run.steps)
    titles = ("tokens per step", "dollars per step") if priced else ("tokens per step (no dollars: free or unpriced)",)
    fig = make_subplots(rows=1, cols=len(titles), subplot_titles=titles)
    colors = group_colors(calling)
    for run in calling:
        color, seed = colors[run.group], shown(str(run.record.seed))
        steps = [s.step for s in run.steps]
        fig.add_trace(go.Bar(x=steps, y=[s.tokens for s in run.steps], name=f"seed {seed}: tokens",
                             marker_color=color, **_legend(run)), row=1, col=1)
        if priced:
            fig.add_trace(go.Scatter(x=steps, y=[s.cost_usd for s in run.steps], mode="lines+markers",
                                     line_color=color, name=f"seed {seed}: USD", **_legend(run),
                                     hovertemplate="step %{x}: $%{y:.4f}<extra></extra>"), row=1, col=2)
    fig.update_layout(title=f"{shown(task)}: LLM usage", barmode="group", height=360, **LAYOUT)
    fig.update_xaxes(title_text="step", dtick=1 if max(len(r.steps) for r in calling) <= 20 else None)
    return fig

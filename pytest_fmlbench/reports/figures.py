"""Plotly figures of a task: the best validation value so far per step for each run, and LLM usage per step.

Text from runs (agent, model and task names) is HTML-escaped before it reaches a figure: plotly renders
a subset of HTML in trace names and titles. It is also spelt out and cut (``safe_text.printable``): a
legend shows one line of a name, and a lone surrogate would stop a strict JSON writer (orjson).
"""

from __future__ import annotations

from html import escape as html_escape

import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from ..safe_text import printable
from .steps import RunView

FAILED_COLOR = "#d62728"
PALETTE = qualitative.Plotly


def shown(text: str) -> str:
    """A run's text as a figure shows it: one cut line, HTML-escaped."""
    return html_escape(printable(text))


LAYOUT = dict(template="plotly_white", height=360, margin=dict(l=60, r=20, t=50, b=40),
              legend=dict(orientation="h", y=-0.2))


def best_so_far_figure(task: str, runs: list[RunView]) -> go.Figure:
    """Best validation value so far over steps, one line per run; every step's own value as a marker
    (failed steps as red crosses on the line); the task's baseline validation value as a dashed line."""
    fig = go.Figure()
    record = runs[0].record
    metric = shown(record.metric_key)
    for i, run in enumerate(runs):
        color = PALETTE[i % len(PALETTE)]
        steps = [s.step for s in run.steps]
        fig.add_trace(go.Scatter(
            x=steps, y=[s.best_so_far for s in run.steps], mode="lines", line_shape="hv", line_color=color,
            name=f"{shown(run.label)}: best so far", legendgroup=shown(run.label)))
        valid = [s for s in run.steps if s.valid]
        fig.add_trace(go.Scatter(
            x=[s.step for s in valid], y=[s.metric for s in valid], mode="markers", marker=dict(size=7, color=color),
            name=f"{shown(run.label)}: valid step", legendgroup=shown(run.label),
            hovertemplate="step %{x}<br>" + metric + " %{y:.6g}<extra></extra>"))
        failed = [s for s in run.steps if not s.valid]
        if failed:
            fig.add_trace(go.Scatter(
                x=[s.step for s in failed],
                y=[s.best_so_far if s.best_so_far is not None else record.baseline_val for s in failed],
                mode="markers", marker=dict(symbol="x", size=10, color=FAILED_COLOR),
                name=f"{shown(run.label)}: failed step", legendgroup=shown(run.label),
                hovertemplate="step %{x}: failed<extra></extra>"))
    fig.add_hline(y=record.baseline_val, line_dash="dash", line_color="gray",
                  annotation_text=f"baseline {record.baseline_val:.6g}", annotation_position="top left")
    arrow = "higher is better" if record.direction == "higher" else "lower is better"
    fig.update_layout(title=f"{shown(task)}: best validation {metric} so far ({arrow})", **LAYOUT)
    fig.update_xaxes(title_text="step", dtick=1 if max(len(r.steps) for r in runs) <= 20 else None)
    fig.update_yaxes(title_text=metric)
    return fig


def usage_figure(task: str, runs: list[RunView]) -> go.Figure:
    """Tokens (bars) and dollars (lines) per step; a step whose price is unknown has no dollar point."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("tokens per step", "dollars per step"))
    for i, run in enumerate(runs):
        color = PALETTE[i % len(PALETTE)]
        steps = [s.step for s in run.steps]
        fig.add_trace(go.Bar(x=steps, y=[s.tokens for s in run.steps], name=f"{shown(run.label)}: tokens",
                             marker_color=color, legendgroup=shown(run.label)), row=1, col=1)
        fig.add_trace(go.Scatter(x=steps, y=[s.cost_usd for s in run.steps], mode="lines+markers", line_color=color,
                                 name=f"{shown(run.label)}: USD", legendgroup=shown(run.label),
                                 hovertemplate="step %{x}: $%{y:.4f}<extra></extra>"), row=1, col=2)
    fig.update_layout(title=f"{shown(task)}: LLM usage", barmode="group", **LAYOUT)
    fig.update_xaxes(title_text="step")
    return fig

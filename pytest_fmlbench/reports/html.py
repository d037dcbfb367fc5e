"""One static HTML page for a set of runs: the tables, per task a best-so-far plot and usage plot, and
every step (what it did, its error tail, its code diff against its parent).

The page opens from disk with no server and no network: plotly.js is inlined once in the head and each
figure only carries its data. Text from runs is escaped by the template (autoescape, and no ``|safe``);
the transcripts' JSON by ``TranscriptPayload.to_script``; figure data is serialised by plotly, which
escapes ``</`` inside its JSON, and its labels are escaped and spelt out by :mod:`.figures`.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from ..scoring.aggregate import AUTO, Scores
from .plain import session_tables
from .runs import as_scores
from .steps import RunView, run_view, tail
from .transcripts import TranscriptPayload


class ReportUnavailable(Exception):
    """The plotting or templating library is not installed."""


@dataclass(frozen=True)
class TaskSection:
    name: str
    runs: list[RunView]
    curve: str
    usage: str


def _num(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.6g}"


def _usd(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.4f}"


def _libraries():
    try:
        import jinja2
        import plotly.offline
    except ImportError as exc:
        raise ReportUnavailable(f"the HTML report needs plotly and jinja2 ({exc}): "
                                "pip install 'pytest-fmlbench[report]'") from None
    return jinja2, plotly.offline


def render_html(runs: list[tuple], scores: Scores | None = None, encoder=AUTO) -> str:
    """``runs``: (RunRecord, steps, run_dir) as :func:`.runs.load_runs` returns them;
    ``scores``: the session's scores when already computed (the tables then match the terminal's)."""
    jinja2, offline = _libraries()
    from .figures import best_so_far_figure, usage_figure

    scores = scores if scores is not None else as_scores(list(runs), encoder)
    by_task: dict[str, list[RunView]] = defaultdict(list)
    for record, steps, run_dir in runs:
        by_task[record.task].append(run_view(record, steps, run_dir))
    steps_of = {Path(run_dir): steps for _, steps, run_dir in runs}
    payload = TranscriptPayload()
    sections = []
    for index, task in enumerate(sorted(by_task)):
        views = sorted(by_task[task], key=lambda v: (v.record.agent, v.record.model or "", v.record.seed))
        views = [replace(v, transcript=at, calls=calls)
                 for v in views for at, calls in [payload.add_run(v.run_dir, steps_of[Path(v.run_dir)])]]
        figure_html = dict(full_html=False, include_plotlyjs=False, config={"responsive": True})
        sections.append(TaskSection(
            task, views,
            curve=best_so_far_figure(task, views).to_html(div_id=f"curve-{index}", **figure_html),
            usage=usage_figure(task, views).to_html(div_id=f"usage-{index}", **figure_html),
        ))
    env = jinja2.Environment(loader=jinja2.PackageLoader("pytest_fmlbench.reports", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    template = env.get_template("report.html.j2")
    return template.render(
        plotly_js=jinja2.utils.markupsafe.Markup(offline.get_plotlyjs()),
        # JSON made safe for a script element by TranscriptPayload.to_script
        transcripts=jinja2.utils.markupsafe.Markup(payload.to_script()),
        tables=session_tables(scores), encoder=scores.encoder, runs_count=len(runs),
        tasks=[_trusted_figures(section, jinja2) for section in sections],
        generated_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        num=_num, usd=_usd, tail=tail,
    )


def _trusted_figures(section: TaskSection, jinja2) -> TaskSection:
    # plotly's own output: markup we generated, with the runs' text inside its escaped JSON
    markup = jinja2.utils.markupsafe.Markup
    return TaskSection(section.name, section.runs, markup(section.curve), markup(section.usage))


def write_html(runs: list[tuple], path: Path, scores: Scores | None = None, encoder=AUTO) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    # a lone surrogate (an agent's text in an older record) cannot be UTF-8: it is written as its escape,
    # which inside the page's JSON is the same string again
    tmp.write_text(render_html(runs, scores, encoder), encoding="utf-8", errors="backslashreplace")
    os.replace(tmp, path)
    return path

"""One static HTML page for a set of runs: a headline (per task, the best run group against the baseline),
the tables with what each column means, per task a best-so-far plot and (for runs that called a model) a
usage plot, and every step (what it did, its error tail, its code diff against its parent).

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
from ..scoring.groups import SMOKE_NOTE, label_groups
from .definitions import DEFINITIONS, caption_definition, defined
from .headline import headlines
from .plain import PlainTable, session_tables
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
    # None: no run of the task called a model
    usage: str | None


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
    views = [run_view(record, steps, run_dir) for record, steps, run_dir in runs]
    # each run's group named as the tables name it: its solver, and what sets it apart from its siblings
    labelled = {group: group for group in label_groups(sorted(dict.fromkeys(v.group for v in views),
                                                              key=lambda g: g.key))}
    by_task: dict[str, list[RunView]] = defaultdict(list)
    for view in views:
        by_task[view.record.task].append(replace(view, group=labelled[view.group]))
    steps_of = {Path(run_dir): steps for _, steps, run_dir in runs}
    payload = TranscriptPayload()
    sections = []
    for index, task in enumerate(sorted(by_task)):
        views = sorted(by_task[task], key=lambda v: (v.group.key, str(v.record.seed)))
        views = [replace(v, transcript=at, calls=calls)
                 for v in views for at, calls in [payload.add_run(v.run_dir, steps_of[Path(v.run_dir)])]]
        figure_html = dict(full_html=False, include_plotlyjs=False, config={"responsive": True})
        usage = usage_figure(task, views)
        sections.append(TaskSection(
            task, views,
            curve=best_so_far_figure(task, views).to_html(div_id=f"curve-{index}", **figure_html),
            usage=usage.to_html(div_id=f"usage-{index}", **figure_html) if usage is not None else None,
        ))
    env = jinja2.Environment(loader=jinja2.PackageLoader("pytest_fmlbench.reports", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    template = env.get_template("report.html.j2")
    tables = session_tables(scores)
    return template.render(
        headlines=headlines(scores), smoke_note=SMOKE_NOTE, definitions=_shown_definitions(tables),
        defined=defined, caption_definition=caption_definition,
        plotly_js=jinja2.utils.markupsafe.Markup(offline.get_plotlyjs()),
        # JSON made safe for a script element by TranscriptPayload.to_script
        transcripts=jinja2.utils.markupsafe.Markup(payload.to_script()),
        tables=tables, encoder=scores.encoder, runs_count=len(runs),
        tasks=[_trusted_figures(section, jinja2) for section in sections],
        generated_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        num=_num, usd=_usd, tail=tail,
    )


def _trusted_figures(section: TaskSection, jinja2) -> TaskSection:
    # plotly's own output: markup we generated, with the runs' text inside its escaped JSON
    markup = jinja2.utils.markupsafe.Markup
    usage = markup(section.usage) if section.usage is not None else None
    return TaskSection(section.name, section.runs, markup(section.curve), usage)


def _shown_definitions(tables: list) -> dict[str, str]:
    """The definitions of the headers and row labels the page's tables show, in the definitions' order;
    NI's and AUP's always (the headline names them)."""
    words = {"NI (test)", "AUP", "τ"}
    for table in tables:
        if isinstance(table, PlainTable):
            words.update(table.header)
            words.update(row[0] for row in table.rows if row)
    return {word: text for word, text in DEFINITIONS.items() if word in words}


def write_html(runs: list[tuple], path: Path, scores: Scores | None = None, encoder=AUTO) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    # a lone surrogate (an agent's text in an older record) cannot be UTF-8: it is written as its escape,
    # which inside the page's JSON is the same string again
    tmp.write_text(render_html(runs, scores, encoder), encoding="utf-8", errors="backslashreplace")
    os.replace(tmp, path)
    return path

"""The documentation site's reference sections, generated from the code at every build (an MkDocs hook).

A page asks for a section with a marker line, ``<!-- fmlbench:NAME -->``; :func:`on_page_markdown` puts the
section in its place before the page is rendered, so nothing generated is ever committed and none of it can
drift from the code:

* ``pytest-options``: the plugin's ``--help`` group and ini keys, read from the parser its hook fills;
* ``cli``: every ``fmlbench`` command and subcommand, read from the argparse parsers of ``pytest_fmlbench.cli``;
* ``task-schema``: every field of ``task.yaml``, from ``TaskSpec``'s JSON schema;
* ``record-schema``: the run record, step record and session summary, from the pydantic models' JSON schema
  (and the comment lines above each field, where the models keep their explanations);
* ``metrics``: every column of the tables with its definition (the HTML report's) and the function computing it;
* ``agent-options``: each built-in agent's options, as ``fmlbench agents`` lists them.

Run as a script, it prints every section (``python scripts/docs_reference.py``), to read them without a build.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import re
from collections.abc import Callable, Iterable
from typing import Any

MARKER = re.compile(r"^<!-- fmlbench:([a-z-]+) -->$", re.M)


def cell(text: Any) -> str:
    """One table cell: pipes escaped, newlines joined, nothing read as markup by accident."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("<", "&lt;")


def code(text: Any) -> str:
    """Inline code that may itself hold backticks (a pipe in it is code, not a column: the table reader knows)."""
    text = str(text)
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


# -- pytest options --------------------------------------------------------------------------------

def plugin_parser():
    import pytest

    from pytest_fmlbench import plugin

    # pytest builds its parser before it loads plugins; the same hook fills a fresh one here
    parser = pytest.Parser(_ispytest=True)
    plugin.pytest_addoption(parser)
    return parser


def _option_default(attrs: dict) -> str:
    if attrs.get("nargs") == 0:
        return "off"
    if isinstance(attrs.get("default"), list):
        return "(none; repeatable)"
    default = attrs.get("default")
    return "(none)" if default is None else code(default)


def pytest_options() -> str:
    parser = plugin_parser()
    group = parser.getgroup("fmlbench")
    rows = []
    for option in group.options:
        attrs = option.attrs()
        names = ", ".join(option.names())
        metavar = attrs.get("metavar")
        choices = attrs.get("choices")
        if choices:
            value = "{" + ",".join(choices) + "}"
        elif attrs.get("nargs") == 0:
            value = ""
        else:
            value = metavar or (attrs.get("dest") or "").upper()
        spelt = f"{names}={value}" if value else names
        rows.append((code(spelt), _option_default(attrs), cell(attrs.get("help", ""))))
    text = f"pytest's `--help` lists these in its section *{group._arggroup.title}*.\n\n"
    text += table(("option", "default", "meaning"), rows)
    # pytest has no public reader of the declared ini keys; the parser keeps them in this mapping
    ini = [(code(name), cell(kind or "string"), cell(help_text))
           for name, (help_text, kind, _default) in sorted(parser._inidict.items())]
    if ini:
        text += ("\nSettable in `pytest.ini`, or under `[tool.pytest.ini_options]` of `pyproject.toml`:\n\n"
                 + table(("ini key", "type", "meaning"), ini))
    return text


# -- fmlbench commands -----------------------------------------------------------------------------

def cli_parser() -> argparse.ArgumentParser:
    """The ``fmlbench`` parser, built as ``pytest_fmlbench.cli.main`` builds it."""
    from pytest_fmlbench.cli.commands import DESCRIPTION, EPILOG, all_commands

    parser = argparse.ArgumentParser(prog="fmlbench", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text, add_arguments, _run in all_commands():
        add_arguments(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    found = []
    for action in parser._actions:  # argparse keeps a parser's arguments here, and nowhere public
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            found += [(name, helps.get(name) or "", sub) for name, sub in action.choices.items()]
    return found


def _help(action: argparse.Action, prog: str) -> str:
    text = action.help or ""
    if "%" in text:  # argparse's own expansion of %(default)s and friends
        text = text % {**vars(action), "prog": prog}
    return text


def _argument_rows(parser: argparse.ArgumentParser) -> list[tuple[str, str, str]]:
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if action.option_strings:
            spelt = ", ".join(action.option_strings)
            if action.nargs != 0:
                metavar = action.metavar or (("{" + ",".join(map(str, action.choices)) + "}") if action.choices
                                             else action.dest.upper())
                spelt += f" {metavar}"
        else:
            spelt = action.metavar or (("{" + ",".join(map(str, action.choices)) + "}") if action.choices
                                       else action.dest)
            if action.nargs in ("*", "+"):
                spelt += " ..."
        if action.nargs == 0 or action.default in (None, argparse.SUPPRESS) or action.default == []:
            default = ""
        else:
            default = code(action.default)
        rows.append((code(spelt), default, cell(_help(action, parser.prog))))
    return rows


def _command_section(name: str, help_text: str, parser: argparse.ArgumentParser, depth: int) -> str:
    text = f"{'#' * depth} `{parser.prog}`\n\n"
    if help_text:
        text += cell(help_text) + "\n\n"
    text += "```text\n" + parser.format_usage().strip() + "\n```\n\n"
    rows = _argument_rows(parser)
    if rows:
        text += table(("argument", "default", "meaning"), rows) + "\n"
    for sub_name, sub_help, sub in _subcommands(parser):
        text += _command_section(sub_name, sub_help, sub, depth + 1)
    return text


def cli_commands() -> str:
    parser = cli_parser()
    text = "```text\n" + parser.format_help().strip() + "\n```\n\n"
    for name, help_text, sub in _subcommands(parser):
        text += _command_section(name, help_text, sub, 2)
    return text


# -- record formats --------------------------------------------------------------------------------

def field_comments(cls: type) -> dict[str, str]:
    """The comment lines right above each field of a model's class body: where its explanation is kept."""
    comments, pending = {}, []
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):  # a class made at run time has no source to read
        return {}
    for line in source.splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("#"):
            pending.append(stripped.lstrip("#").strip())
            continue
        field = re.match(r"(\w+)\s*:", stripped)
        if field and pending:
            comments[field.group(1)] = " ".join(pending)
        pending = []
    return comments


def _schema_type(prop: dict) -> str:
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in prop:
        return " or ".join(_schema_type(p) for p in prop["anyOf"])
    if "enum" in prop:
        return " or ".join(code(json.dumps(v)) for v in prop["enum"])
    if "const" in prop:
        return code(json.dumps(prop["const"]))
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_schema_type(prop.get('items', {}))}"
    if kind == "object" and "additionalProperties" in prop and isinstance(prop["additionalProperties"], dict):
        return f"map of {_schema_type(prop['additionalProperties'])}"
    if prop.get("format") == "date-time":
        return "date-time"
    return kind


def _model_table(name: str, schema: dict, comments: dict[str, str]) -> str:
    text = f"### {name}\n\n"
    if schema.get("description"):
        text += cell(schema["description"]) + "\n\n"
    required = set(schema.get("required", []))
    rows = []
    for field, prop in schema.get("properties", {}).items():
        if field in required:
            default = "required"
        elif "default" in prop:
            default = code(json.dumps(prop["default"]))
        else:
            default = ""
        rows.append((code(field), _schema_type(prop), default, cell(comments.get(field, prop.get("description", "")))))
    return text + table(("field", "type", "default", "what it holds"), rows) + "\n"


def schema_section(models: list[type]) -> str:
    """Each model and every model it nests, once, in the order met."""
    seen: dict[str, str] = {}
    for model in models:
        schema = model.model_json_schema()
        module = importlib.import_module(model.__module__)
        for name, definition in schema.get("$defs", {}).items():
            nested = getattr(module, name, None)  # a nested model of another module keeps only its schema
            comments = field_comments(nested) if inspect.isclass(nested) else {}
            seen.setdefault(name, _model_table(name, definition, comments))
        seen[model.__name__] = _model_table(model.__name__, schema, field_comments(model))
    order = [m.__name__ for m in models] + [name for name in seen if name not in {m.__name__ for m in models}]
    return "".join(seen[name] for name in order)


def task_schema() -> str:
    from pytest_fmlbench.spec import TaskSpec

    return schema_section([TaskSpec])


def record_schema() -> str:
    from pytest_fmlbench.record import RunRecord, StepRecord, Usage
    from pytest_fmlbench.reports.summary import SessionSummary

    return schema_section([RunRecord, StepRecord, Usage, SessionSummary])


# -- metrics ---------------------------------------------------------------------------------------

# each column of the tables: where its formula comes from, and the function that computes it
METRIC_SOURCES: dict[str, tuple[str, str]] = {
    "spread": ("FML-bench, compute_agent_metrics.py", "pytest_fmlbench.scoring.exploration:spread"),
    "uniqueness": ("FML-bench, compute_agent_metrics.py", "pytest_fmlbench.scoring.exploration:uniqueness"),
    "reach": ("FML-bench, compute_agent_metrics.py", "pytest_fmlbench.scoring.exploration:reach"),
    "effective_dim": ("FML-bench, compute_agent_metrics.py",
                      "pytest_fmlbench.scoring.exploration:effective_dimension"),
    "val_test_gap": ("FML-bench, compute_agent_metrics.py", "pytest_fmlbench.scoring.metrics:score_run"),
    "valid_step_ratio": ("FML-bench, compute_agent_metrics.py", "pytest_fmlbench.scoring.metrics:score_run"),
    "llm_failed_calls": ("this project (beyond the original's twelve)", "pytest_fmlbench.scoring.metrics:score_run"),
    "llm_truncated_calls": ("this project (beyond the original's twelve)",
                            "pytest_fmlbench.scoring.metrics:score_run"),
    "step_completion_rate": ("this project (beyond the original's twelve)",
                             "pytest_fmlbench.scoring.metrics:score_run"),
    "auc_steps": ("FML-bench, compute_agent_metrics.py", "pytest_fmlbench.scoring.metrics:improvement_curve"),
    "first_improvement_step": ("FML-bench, compute_agent_metrics.py", "pytest_fmlbench.scoring.metrics:score_run"),
    "late_gain_fraction": ("FML-bench, compute_agent_metrics.py", "pytest_fmlbench.scoring.metrics:score_run"),
    "best_improvement_step": ("FML-bench, compute_agent_metrics.py", "pytest_fmlbench.scoring.metrics:score_run"),
    "tokens_m": ("FML-bench, compute_agent_metrics.py", "pytest_fmlbench.scoring.metrics:score_run"),
    "wall_clock_h": ("FML-bench, compute_agent_metrics.py", "pytest_fmlbench.scoring.metrics:score_run"),
    "cost_usd": ("this project (beyond the original's twelve)", "pytest_fmlbench.scoring.metrics:score_run"),
}
HEADLINE_SOURCES: dict[str, tuple[str, str]] = {
    "NI (test)": ("FML-bench, compute_agent_metrics.py", "pytest_fmlbench.scoring.metrics:normalized_improvement"),
    "NI (best val)": ("FML-bench, compute_agent_metrics.py",
                      "pytest_fmlbench.scoring.metrics:normalized_improvement"),
    "Agent test": ("FML-bench, compute_agent_metrics.py", "pytest_fmlbench.scoring.metrics:test_side"),
    "AUP": ("MLGym (Nathani et al., 2025)", "pytest_fmlbench.scoring.aup:aup_table"),
    "τ": ("MLGym (Nathani et al., 2025)", "pytest_fmlbench.scoring.aup:aup_table"),
}


def implementation(target: str) -> str:
    """``module:function`` as the file and line it is defined at; fails the build when it is gone."""
    module_name, function_name = target.split(":")
    function = getattr(importlib.import_module(module_name), function_name)
    _, line = inspect.getsourcelines(function)
    path = module_name.replace(".", "/") + ".py"
    return f"{code(function_name)} in {code(path)}, line {line}"


def metrics() -> str:
    from pytest_fmlbench.reports.definitions import DEFINITIONS, PROCESS
    from pytest_fmlbench.reports.tables import GROUPS, HEADERS

    missing = set(PROCESS) - set(METRIC_SOURCES)
    if missing:
        raise ValueError(f"docs: a process metric without its source in METRIC_SOURCES: {sorted(missing)}")
    text = "## Scores\n\n"
    rows = [(cell(word), cell(DEFINITIONS[word]), cell(origin), implementation(target))
            for word, (origin, target) in HEADLINE_SOURCES.items()]
    text += table(("column", "definition", "from", "computed by"), rows)
    text += "\n## Process-level metrics\n\n"
    group_of = {column: group for group, columns in GROUPS.items() for column in columns}
    rows = []
    for column, definition in PROCESS.items():
        origin, target = METRIC_SOURCES[column]
        rows.append((cell(HEADERS[column]), cell(group_of.get(column, "")), code(column), cell(definition),
                     cell(origin), implementation(target)))
    text += table(("column", "group", "CSV/JSON name", "definition", "from", "computed by"), rows)
    text += "\n## The other words of the tables\n\n"
    shown = {*HEADLINE_SOURCES, *(HEADERS[c] for c in PROCESS)}
    rows = [(cell(word), cell(definition)) for word, definition in DEFINITIONS.items() if word not in shown]
    return text + table(("word", "definition"), rows)


# -- agents ----------------------------------------------------------------------------------------

def agent_options() -> str:
    from pytest_fmlbench.agentkit.catalog import catalog

    text = ""
    for info in catalog():
        text += f"### Options of `{info.name}`\n\n"
        if info.error:
            raise ValueError(f"docs: the built-in agent {info.name} cannot be loaded: {info.error}")
        text += cell(info.summary) + (" Needs an LLM (`--model`, `--provider`)." if info.uses_llm else "") + "\n\n"
        if info.options:
            rows = [(code(o.name), code(o.type), code(o.default), cell(o.description)) for o in info.options]
            text += table(("option", "type", "default", "meaning"), rows) + "\n"
        else:
            text += "No options.\n\n"
    return text


SECTIONS: dict[str, Callable[[], str]] = {
    "pytest-options": pytest_options,
    "cli": cli_commands,
    "record-schema": record_schema,
    "task-schema": task_schema,
    "metrics": metrics,
    "agent-options": agent_options,
}


def expand(markdown: str, where: str = "a page") -> str:
    def section(match: re.Match) -> str:
        name = match.group(1)
        if name not in SECTIONS:
            raise ValueError(f"docs: {where} asks for an unknown generated section {name!r} (known: {sorted(SECTIONS)})")
        return SECTIONS[name]().rstrip() + "\n"

    return MARKER.sub(section, markdown)


def on_page_markdown(markdown: str, page, config, files) -> str:  # the MkDocs hook
    return expand(markdown, page.file.src_uri)


if __name__ == "__main__":
    for name, build in SECTIONS.items():
        print(f"<!-- {name} -->\n{build()}")

"""Command-line options (one ``--help`` section) and the validated benchmark configuration."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import ValidationError

from . import isolation, session_budget
from .agent_host.describe import agent_name_problem, check_options, describe
from .agent_host.host import AgentMode
from .agent_host.launcher import DEFAULT_MAX_PROCESSES, AgentLimits
from .agent_host.locate import AgentLocator, locate_spec
from .agent_host.needs import AgentNeeds, gateway_problem, needs_of
from .agentkit import Agent, AgentLoadError, AgentOptions, builtin_names, load_agent_class, parse_agent_options
from .audit.judge import JudgeSpec
from .audit.run import JudgeConfig
from .llm import Endpoint, LLMSettings, LLMSetupError, make_llm_factory, preflight
from .runner import RunSettings

log = logging.getLogger("fmlbench")

DEFAULT_STEPS = 50  # the original's default budget
DEFAULT_OUT = "reports/fmlbench"


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("fmlbench", "FML-bench: ML research agents as tests")
    group.addoption("--agent", metavar="NAME", help=f"research agent: a built-in name ({', '.join(builtin_names())}), "
                    "package.module:Class, path/to/file.py:Class, or 'external' (each item waits for any program "
                    "to drive it over a UNIX socket, see docs/agent-protocol.md). Without it, benchmark items "
                    "are skipped.")
    group.addoption("--agent-in-process", action="store_true",
                    help="run the agent's run(session) inside the harness's process, for a debugger (by default it "
                    "runs in its own sandboxed process); such runs are marked 'agent in process' in records, JUnit "
                    "and tables")
    group.addoption("--agent-timeout", type=float, metavar="S",
                    help="the agent process's own time budget in seconds, steps and LLM calls not counted "
                    "(default: 600 + steps x the task's timeout)")
    group.addoption("--agent-memory-mb", type=int, metavar="MB",
                    help="memory limit of the agent's process (default: 4096, or less on a small machine)")
    group.addoption("--agent-max-processes", type=int, default=DEFAULT_MAX_PROCESSES, metavar="N",
                    help=f"limit on the agent's processes and threads (default {DEFAULT_MAX_PROCESSES})")
    group.addoption("--fmlbench-agents", action="store_true",
                    help="list the built-in agents (what each does, its options, whether it needs an LLM) and exit")
    group.addoption("--agent-opt", action="append", default=[], metavar="NAME=VALUE",
                    help="an agent option (repeatable), validated against the agent's declared options")
    group.addoption("--model", metavar="MODEL", help="LLM the agent uses (agents that need one)")
    group.addoption("--provider", metavar="PROVIDER",
                    help="LLM provider: openai, anthropic, google, openrouter, openai-compatible, local "
                    "(inferred from --model where possible: gpt-/o1/o3/o4, claude-, gemini-, vendor/model)")
    group.addoption("--base-url", metavar="URL",
                    help="LLM endpoint, e.g. http://HOST:PORT/v1 for a vLLM/llama.cpp/Ollama server "
                    "(--provider=openai-compatible); also overrides the openai/anthropic endpoints")
    group.addoption("--max-cost-usd", type=float, metavar="USD",
                    help="stop a run (status 'stopped') once its LLM calls cost more than this")
    group.addoption("--max-tokens", type=int, metavar="N",
                    help="stop a run (status 'stopped') once its LLM calls used more than N tokens")
    group.addoption("--session-max-cost-usd", type=float, metavar="USD",
                    help="stop the whole session's runs (status 'stopped'; items not started are not run) once the "
                    "LLM calls of all of them, across -n workers and Slurm jobs, cost more than this")
    group.addoption("--session-max-tokens", type=int, metavar="N",
                    help="the same cap in tokens, across the whole session")
    group.addoption("--retry-infra", type=int, metavar="N",
                    help="run only the items whose last failure was the infrastructure's (a node lost, a job "
                    "preempted, held or cancelled, the harness out of memory), resuming from their recorded steps; "
                    "each gets up to N attempts in this session")
    group.addoption("--price-table", metavar="FILE",
                    help="JSON/YAML LLM prices (USD per 1M tokens: input, cached_input, output) laid over "
                    "the providers' list prices (from genai-prices)")
    group.addoption("--llm-timeout", type=float, default=600.0, metavar="S", help="per LLM request (default 600)")
    group.addoption("--llm-retries", type=int, default=6, metavar="N",
                    help="retries after a 429, 5xx, timeout or dropped connection (default 6)")
    group.addoption("--llm-backoff", type=float, default=1.0, metavar="S",
                    help="first retry wait in seconds, doubling each time; Retry-After is honoured (default 1)")
    group.addoption("--steps", type=int, default=DEFAULT_STEPS, metavar="N",
                    help=f"validation runs per task (default {DEFAULT_STEPS}, as the original)")
    group.addoption("--seeds", type=int, default=1, metavar="K", help="seeds per task (default 1)")
    group.addoption("--fmlbench-out", default=DEFAULT_OUT, metavar="DIR",
                    help=f"where run records and reports go (default {DEFAULT_OUT}, relative to the current directory)")
    group.addoption("--fmlbench-html", metavar="FILE",
                    help="at the end of the session, write a static HTML report of its runs here (tables, each "
                    "task's best-so-far curve, every step with its code diff); opens from disk, no network")
    group.addoption("--scale", choices=["full", "smoke"], default="full",
                    help="full-profile tasks (-m full): 'full' runs them at the original's scale on the data that "
                    "'fmlbench data fetch' put in $FMLBENCH_DATA (default ~/.cache/fmlbench/data); 'smoke' runs the "
                    "same code for a few batches on CPU, on the small stand-ins of 'fmlbench data fixtures' (a check "
                    "of the code path, recorded as scale 'smoke', never a result). Small-profile tasks ignore it.")
    group.addoption("--fresh", action="store_true", help="recompute runs instead of reusing recorded ones")
    group.addoption("--no-sandbox", action="store_true",
                    help="run experiments WITHOUT the bubblewrap sandbox (by default each experiment sees only "
                    "its workspace, {out} and the interpreter, with no network, no secrets and its own "
                    "process namespace); such runs are marked 'unsandboxed' in records, JUnit and tables")
    group.addoption("--fmlbench-judge", action="store_true",
                    help="after each run, a judge model reviews it from its records: a research review on "
                    "MLR-Judge's rubric and a rule review (test data, labels, hard-coded answers, the protected "
                    "protocol, special-casing the evaluator); findings flag the run 'suspect', never re-score it. "
                    "Needs --judge-model. Cheap signals without a model run for every run regardless")
    group.addoption("--judge-model", action="append", default=[], metavar="MODEL",
                    help="a judge model (repeatable: several judges' scores are averaged, as MLR-Judge does)")
    group.addoption("--judge-provider", metavar="PROVIDER",
                    help="the judges' provider (default: inferred from each --judge-model, as --provider)")
    group.addoption("--judge-base-url", metavar="URL",
                    help="the judges' endpoint (an OpenAI-compatible server, as --base-url)")
    group.addoption("--cold-start", action="store_true",
                    help="start every experiment and harness command in a fresh interpreter (by default they "
                    "fork from a warm one that already imported the task's libraries, in the same sandbox; "
                    "results are the same, only slower), for debugging")
    group.addoption("--fmlbench-compare", metavar="OLD",
                    help="at the end, compare this session with OLD: a folder of run records, a saved session "
                    "(last, last-N, a number, a name from <fmlbench-out>/sessions/) or a session file; per task, "
                    "paired deltas of NI, the signed improvement and the test value, mean ± SEM over seeds")
    group.addoption("--fmlbench-fail-on-regression", type=float, metavar="X",
                    help="with --fmlbench-compare: fail the session (exit status 1, one line per task) when a "
                    "task's NI or signed improvement (NI without its clamp at 0) dropped by more than X (e.g. 0.05) "
                    "and by more than the noise (or the noise is unknown); a task where such a drop could go "
                    "unseen is named 'cannot tell'")


@dataclass(frozen=True)
class BenchConfig:
    settings: RunSettings
    seeds: int
    # who judges each run (--fmlbench-judge); None: the cheap signals only
    judge: JudgeConfig | None = None

    @classmethod
    def from_pytest(cls, config: pytest.Config) -> BenchConfig | None:
        """None without --agent; raises pytest.UsageError (one line) on bad options."""
        spec = config.getoption("agent")
        if not spec:
            return None
        steps, seeds = config.getoption("steps"), config.getoption("seeds")
        if steps < 1:
            raise pytest.UsageError(f"--steps must be at least 1, got {steps}")
        if seeds < 1:
            raise pytest.UsageError(f"--seeds must be at least 1, got {seeds}")
        out = Path(config.getoption("fmlbench_out"))
        if not out.is_absolute():
            out = Path(config.invocation_params.dir) / out
        sandboxed = not config.getoption("no_sandbox")
        agent = _agent(config, spec, sandboxed, out)
        model, provider, llm_factory = config.getoption("model"), config.getoption("provider"), None
        uses_llm = agent.uses_llm if agent.uses_llm is not None else bool(model or provider == "local")
        # a tool's model calls go through the gateway, which serves them with the run's LLM client
        uses_llm = uses_llm or agent.needs.gateway
        if uses_llm:
            if not model and provider != "local":
                raise pytest.UsageError(f"agent {spec!r} needs an LLM: pass --model=MODEL")
            llm_settings, endpoint = _llm_setup(config)
            model, provider = endpoint.model, endpoint.provider.name
            problem = gateway_problem(agent.needs, agent.name, provider, endpoint.provider.protocol)
            if problem:
                raise pytest.UsageError(problem)
            llm_factory = make_llm_factory(llm_settings)
        retry_infra = config.getoption("retry_infra")
        if retry_infra is not None and retry_infra < 1:
            raise pytest.UsageError(f"--retry-infra must be at least 1, got {retry_infra}")
        try:
            session_caps = session_budget.caps_from(config.getoption)
        except ValueError as exc:
            raise pytest.UsageError(f"--session-max-cost-usd/--session-max-tokens: {exc.errors()[0]['msg']}") from None
        if llm_factory is not None:
            llm_factory = session_budget.guarded(llm_factory, out)
        settings = RunSettings(
            agent_cls=agent.cls, agent_name=agent.name, agent_options=agent.options,
            out_dir=out, steps=steps, model=model, provider=provider,
            fresh=config.getoption("fresh"), sandboxed=sandboxed, llm_factory=llm_factory,
            log=log.info,
            budget={"max_cost_usd": config.getoption("max_cost_usd"), "max_tokens": config.getoption("max_tokens"),
                    **session_budget.budget_keys(session_caps)},
            agent_mode=agent.mode, agent_locator=agent.locator, agent_limits=_agent_limits(config),
            warm=not config.getoption("cold_start"),
            agent_needs=agent.needs, scale=config.getoption("scale"),
        )
        judge = _judge_setup(config)
        if not hasattr(config, "workerinput"):  # the session's controller: its ledger starts now
            session_budget.SessionLedger(out).start(session_caps)
        return cls(settings, seeds, judge)


@dataclass(frozen=True)
class _AgentChoice:
    mode: AgentMode
    name: str
    options: AgentOptions
    uses_llm: bool | None  # None for an external agent: it gets an LLM when --model is given
    cls: type[Agent] | None = None  # a built-in, or any agent with --agent-in-process
    locator: AgentLocator | None = None  # where the agent's own process finds it
    needs: AgentNeeds = AgentNeeds()


def _agent(config: pytest.Config, spec: str, sandboxed: bool, out: Path) -> _AgentChoice:
    """The agent's name, options, LLM need and where its code is; a user's agent is never imported here."""
    pairs = config.getoption("agent_opt")
    in_process = config.getoption("agent_in_process")
    base = Path(config.invocation_params.dir)
    try:
        if spec == "external":
            if pairs or in_process:
                raise AgentLoadError("--agent=external is another program: --agent-opt and --agent-in-process do "
                                     "not apply to it")
            return _AgentChoice("external", "external", AgentOptions(), uses_llm=None)
        if in_process or ":" not in spec:
            # a built-in is this package's own code; --agent-in-process asks for the agent in this process
            cls = load_agent_class(spec)
            name, options = cls.name or cls.__name__, parse_agent_options(cls, pairs)
            # a user's class loaded here (--agent-in-process) meets the rules a described one meets
            problem = agent_name_problem(name)
            if problem:
                raise AgentLoadError(f"agent {spec!r}: {problem}")
            try:
                check_options(options.model_dump(mode="json"))
            except ValueError as exc:
                raise AgentLoadError(f"agent {spec!r}: {exc}") from None
            return _AgentChoice("in process" if in_process else "process", name, options, cls.uses_llm, cls,
                                None if in_process else locate_spec(spec, base), needs_of(cls))
        locator = locate_spec(spec, base)
        if sandboxed:
            isolation.check_available()
        described = describe(locator, pairs, sandboxed=sandboxed, hidden=[out, base])
    except AgentLoadError as exc:
        raise pytest.UsageError(str(exc)) from None
    except isolation.SandboxUnavailable as exc:
        raise pytest.UsageError(f"agent {spec!r}: {exc}") from None
    return _AgentChoice("process", described.name, described.options, described.uses_llm, locator=locator,
                        needs=described.needs)


def _agent_limits(config: pytest.Config) -> AgentLimits:
    timeout, memory, processes = (config.getoption("agent_timeout"), config.getoption("agent_memory_mb"),
                                  config.getoption("agent_max_processes"))
    for option, value in (("--agent-timeout", timeout), ("--agent-memory-mb", memory),
                          ("--agent-max-processes", processes)):
        if value is not None and value <= 0:
            raise pytest.UsageError(f"{option} must be positive, got {value}")
    return AgentLimits(timeout_s=timeout, memory_mb=memory, max_processes=processes)


# LLMSettings fields whose command-line option is named differently
_LLM_OPTION = {"timeout_s": "--llm-timeout", "retries": "--llm-retries", "backoff_s": "--llm-backoff"}


def _llm_setup(config: pytest.Config) -> tuple[LLMSettings, Endpoint]:
    """Validate the LLM options and, once per session (not per xdist worker), check key and model."""
    price_table = config.getoption("price_table")
    try:
        settings = LLMSettings(
            model=config.getoption("model"), provider=config.getoption("provider"),
            base_url=config.getoption("base_url"), max_cost_usd=config.getoption("max_cost_usd"),
            max_tokens=config.getoption("max_tokens"),
            price_table=Path(config.invocation_params.dir) / price_table if price_table else None,
            timeout_s=config.getoption("llm_timeout"), retries=config.getoption("llm_retries"),
            backoff_s=config.getoption("llm_backoff"),
        )
        endpoint = preflight(settings, contact=not hasattr(config, "workerinput"))
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0])
        option = _LLM_OPTION.get(field, "--" + field.replace("_", "-"))
        raise pytest.UsageError(f"{option}: {err['msg']}") from None
    except LLMSetupError as exc:
        raise pytest.UsageError(str(exc)) from None
    return settings, endpoint


def _judge_setup(config: pytest.Config) -> JudgeConfig | None:
    """The judges of --fmlbench-judge, checked once (key, price for --max-cost-usd) before any task runs."""
    models = config.getoption("judge_model")
    if not config.getoption("fmlbench_judge"):
        if models:
            raise pytest.UsageError("--judge-model judges runs only with --fmlbench-judge")
        return None
    if not models:
        raise pytest.UsageError("--fmlbench-judge needs a judge: pass --judge-model=MODEL")
    price_table = config.getoption("price_table")
    try:
        base = LLMSettings(
            max_cost_usd=config.getoption("max_cost_usd"),
            price_table=Path(config.invocation_params.dir) / price_table if price_table else None,
            timeout_s=config.getoption("llm_timeout"), retries=config.getoption("llm_retries"),
            backoff_s=config.getoption("llm_backoff"))
        judge = JudgeConfig(tuple(JudgeSpec(m, config.getoption("judge_provider"), config.getoption("judge_base_url"))
                                  for m in models), base)
        judge.preflight()
    except ValidationError as exc:
        raise pytest.UsageError(f"judge: {exc.errors()[0]['msg']}") from None
    except LLMSetupError as exc:
        raise pytest.UsageError(f"judge: {exc}") from None
    return judge

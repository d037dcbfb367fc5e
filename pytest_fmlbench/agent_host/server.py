"""The harness's end of the protocol: each request served against the run's ``HarnessSession``.

The dispatcher holds no I/O: it turns one received line into one reply line. Failures that are the
agent's to handle (no step left, a budget crossed, a model call that failed, a bad request) become
error replies. Anything else (an integrity violation, a broken harness, a full disk) is the harness's:
it is kept in ``fatal`` and raised, so the run ends the way it would without an agent in between,
whatever the agent does with the reply it never gets.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ..editor import EditResult, SearchReplace, WholeFile
from ..harness_session import HarnessSession
from ..llm.errors import LLMCallError
from ..record import StepRecord
from ..stops import BudgetExhausted, RunStopped
from . import protocol as p


class Dispatcher:
    def __init__(self, session: HarnessSession, llm: Any = None, agent: dict[str, Any] | None = None, *,
                 lent: dict[str, Any] | None = None, time_budget_s: float | None = None):
        self.session = session
        self.llm = llm
        # how the agent's own process loads the agent (locator and options); None for an external agent
        self.agent = agent
        # what the harness lent the agent, as hello announces it (see lent.Lent.hello_fields)
        self.lent = lent or {}
        self.time_budget_s = time_budget_s
        self.greeted = False
        # the protocol version the agent said hello with: it is answered in that version
        self.version: int | None = None
        self.done: p.DoneArgs | None = None
        self.fatal: BaseException | None = None
        # an LLM budget the harness found crossed: the run is over, whatever the agent makes of it
        self.stop_reason: str | None = None

    def handle_line(self, line: bytes | bytearray) -> bytes:
        """One request line in, one reply line out. Raises ProtocolViolation (the line is no message of the
        protocol: see its module), or the harness's own failure."""
        if self.fatal is not None:
            raise self.fatal
        message = p.decode(line)
        raw_id = message.get("id")
        try:
            request_id, op, args = p.parse_request(message)
            result = self._serve(op, args)
        except p.RequestError as exc:
            return p.encode(p.error(raw_id if isinstance(raw_id, int) else None, p.BAD_REQUEST, str(exc)))
        except BudgetExhausted as exc:
            return p.encode(p.error(request_id, p.BUDGET_EXHAUSTED, str(exc)))
        except RunStopped as exc:
            self.stop_reason = self.stop_reason or str(exc)
            return p.encode(p.error(request_id, p.RUN_STOPPED, str(exc)))
        except LLMCallError as exc:
            return p.encode(p.error(request_id, p.LLM_CALL_ERROR, str(exc), status=exc.status, kind=exc.kind))
        except p.ProtocolViolation:
            raise
        except BaseException as exc:
            self.fatal = exc
            raise
        return p.encode(p.ok(request_id, result))

    # -- the operations ---------------------------------------------------------------------------
    def _serve(self, op: str, args: p._Args) -> dict[str, Any]:
        if op == "hello":
            return self._hello(args)
        if not self.greeted:
            raise p.RequestError(f"{op}: say hello first (protocol version {p.VERSION})")
        if self.done is not None:
            raise p.RequestError(f"{op}: the agent already said it was done")
        since = p.SINCE.get(op, 1)
        if self.version < since:
            raise p.RequestError(f"{op}: an operation of protocol version {since}; this agent said hello with "
                                 f"version {self.version}")
        s = self.session
        if op == "files":
            return {"files": s.files}
        if op == "baseline_files":
            return {"files": s.baseline_files}
        if op == "files_of":
            return {"files": s.files_of(self._recorded(args.step))}
        if op == "edit":
            edits = [WholeFile(e.path, e.content) if isinstance(e, p.WholeFileEdit)
                     else SearchReplace(e.path, e.search, e.replace) for e in args.edits]
            return _edit(s.edit(edits))
        if op == "set_files":
            return _edit(s.set_files(args.files))
        if op in ("run_step", "run_baseline", "llm.complete") and self.stop_reason:
            raise RunStopped(self.stop_reason)
        if op == "run_step":
            return self._run_step(args)
        if op == "run_baseline":
            node, replayed = s.run_baseline()
            return {"result": {"step": 0, "success": node.success, "metric": node.metric, "metrics": node.metrics,
                               "error": node.error, "is_best": False, "replayed": replayed},
                    "node": _node(node)}
        if op == "annotate":
            step = self._recorded(args.step)
            if args.extra:
                # annotations add up: the step's whole extra stays within the cap
                try:
                    p.check_extra({**s.journal.get(step).extra, **args.extra})
                except ValueError as exc:
                    raise p.RequestError(f"annotate: extra of step {step} would be {exc}") from None
            s.annotate(step, analysis=args.analysis, extra=args.extra)
            return {"node": _node(s.journal.get(step))}
        if op == "journal":
            return {"nodes": [_node(n) for n in s.journal]}
        if op == "best":
            best = s.best
            return {"node": None if best is None else _node(best)}
        if op == "steps":
            return {"total": s.steps_total, "used": s.steps_used, "left": s.steps_left}
        if op == "llm.complete":
            return self._complete(args)
        if op == "done":
            self.done = args
            return {}
        raise p.RequestError(f"unknown operation {op!r}")

    def _hello(self, args: p.HelloArgs) -> dict[str, Any]:
        if args.version not in p.SPOKEN:
            spoken = " and ".join(str(v) for v in p.SPOKEN)
            raise p.RequestError(f"hello: protocol version {args.version} is not spoken here; this harness speaks "
                                 f"versions {spoken}")
        self.greeted = True
        self.version = args.version
        s = self.session
        llm = None if self.llm is None else {"model": self.llm.model, "provider": self.llm.provider}
        return {"version": args.version, "task": s.task.model_dump(mode="json"), "baseline_files": s.baseline_files,
                "steps_total": s.steps_total, "rng_seed": s.rng_seed, "llm": llm, "agent": self.agent,
                # a resumed agent that keeps the recorded steps (a coding tool) starts after them
                "steps_kept": s.steps_used, "time_budget_s": self.time_budget_s,
                "workdir": None, "workdir_step": None, "gateway": None, **self.lent}

    def _recorded(self, step: int) -> int:
        used = self.session.steps_used
        if not 1 <= step <= used:
            recorded = f"steps 1 to {used} are" if used > 1 else "step 1 is" if used else "no step is"
            raise p.RequestError(f"step {step} does not exist: {recorded} recorded")
        return step

    def _run_step(self, args: p.RunStepArgs) -> dict[str, Any]:
        if args.parent is not None:
            self._recorded(args.parent)
        edit = None if args.edit is None else EditResult(args.edit.applied, tuple(args.edit.changed), args.edit.error)
        result = self.session.run_step(args.action, plan=args.plan, parent=args.parent, edit=edit, idea=args.idea,
                                       analysis=args.analysis, extra=args.extra)
        return {"result": asdict(result), "node": _node(self.session.journal.get(result.step))}

    def _complete(self, args: p.CompleteArgs) -> dict[str, Any]:
        if self.llm is None:
            raise p.RequestError("llm.complete: this run has no LLM (the agent does not declare uses_llm, "
                                 "or no --model was given)")
        reply = self.llm.complete([m.model_dump() for m in args.messages], temperature=args.temperature,
                                  max_output_tokens=args.max_output_tokens, seed=args.seed, purpose=args.purpose)
        return {"text": reply.text, "usage": reply.usage.model_dump(), "finish_reason": reply.finish_reason,
                "replayed": reply.replayed}


def _node(node: StepRecord) -> dict[str, Any]:
    return node.model_dump(mode="json")


def _edit(result) -> dict[str, Any]:
    return {"applied": result.applied, "changed": list(result.changed), "error": result.error}

"""What the harness lends one agent's run beyond the protocol, as the agent's class declared it needs:
a working copy of the workspace (``needs_workdir``) and an LLM gateway socket (``needs_gateway``).

Both are made before the agent starts, shown in its sandbox (``binds``), announced in ``hello``
(``hello_fields``) and removed when it ends (``close``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..harness_session import HarnessSession
from ..isolation import Bind
from ..workspace import HarnessError
from .gateway_binding import GatewayBinding
from .needs import AgentNeeds
from .working_copy import WORKDIR_INSIDE, WorkingCopy


class Lent:
    def __init__(self, working_copy: WorkingCopy | None = None, gateway: GatewayBinding | None = None,
                 sandboxed: bool = False, workdir_step: int | None = None):
        self.working_copy = working_copy
        self.gateway = gateway
        self.sandboxed = sandboxed
        self.workdir_step = workdir_step

    @classmethod
    def open(cls, needs: AgentNeeds, session: HarnessSession, llm: Any, *, sandboxed: bool, hidden: list[Path],
             gateway_factory: Callable[[Any, Path], Any] | None = None) -> Lent:
        """``sandboxed``: the agent sees them at fixed paths inside its sandbox, else at their own."""
        lent = cls(sandboxed=sandboxed)
        try:
            if needs.workdir:
                # the search workspace holds the files the run goes on from: the last recorded step's on a
                # resumed run (HarnessSession.keep_recorded_steps), the baseline's otherwise
                last = session.journal.nodes[-1] if len(session.journal) else None
                if last is not None:
                    restored = session.set_files(session.files_of(last.step))
                    if not restored.applied:
                        raise HarnessError(f"step {last.step}'s files could not be restored: {restored.error}")
                    lent.workdir_step = last.step
                lent.working_copy = WorkingCopy.create(session.workspace_dir, session.task.protected, hidden)
            if needs.gateway:
                if llm is None:
                    raise RuntimeError("the agent needs an LLM gateway, and this run has no LLM (no --model)")
                lent.gateway = GatewayBinding(llm, gateway_factory)
        except BaseException:
            lent.close()
            raise
        return lent

    def hello_fields(self) -> dict[str, Any]:
        workdir = None
        if self.working_copy is not None:
            workdir = WORKDIR_INSIDE if self.sandboxed else str(self.working_copy.path)
        return {"workdir": workdir, "workdir_step": self.workdir_step,
                "gateway": None if self.gateway is None else self.gateway.hello(self.sandboxed)}

    def binds(self) -> tuple[Bind, ...]:
        binds: list[Bind] = []
        if self.working_copy is not None:
            binds += self.working_copy.binds()
        if self.gateway is not None:
            binds.append(self.gateway.bind())
        return tuple(binds)

    def stop_reason(self) -> str | None:
        return self.gateway.stop_reason() if self.gateway is not None else None

    def close(self) -> None:
        """Idempotent; the gateway first, so no model call is served once the agent is gone."""
        gateway, working_copy = self.gateway, self.working_copy
        self.gateway = self.working_copy = None
        try:
            if gateway is not None:
                gateway.close()
        finally:
            if working_copy is not None:
                working_copy.close()

"""AdaptiveSearch (the FML-bench 2026 paper's own agent): Autoresearch until progress stalls, then branches.

Phase 1 is Autoresearch as ``autoresearch.py`` runs it (same prompts, keep/revert, debug retries). After
each phase-1 step from step ``p1_window + 1`` on, the slope of the improvement curve over the last
``p1_window`` steps is checked once per step; the first time it is at most ``p1_epsilon`` the search
branches (once: if too few steps remain, it stays in phase 1 for good). The curve is the incumbent's
normalised improvement over the baseline, (incumbent - baseline) / D on the tables' scale, D being the
task's normalisation range |best - worst| (worst may be the baseline value); on a task where D is 0
the curve is in raw metric units (D = 1) rather than a crash. An incumbent with no value on that scale (a
p-value <= 0 scored as -log10) repeats the curve's last value, as the port's.

Phase 2: by the steps left, no branch (<= ``branch_skip_max``), 1 (<= ``branch_cutoff_1``), 2
(<= ``branch_cutoff_2``) or 3, forked from the best kept candidates of phase 1 (the baseline when there
are fewer), run strictly round-robin, each an Autoresearch line of its own. A branch's first idea must
differ mechanistically from its siblings' first ideas; every idea prompt shows the branch's own history
and the last 30 entries of a cross-branch journal. Before each later idea two rules read code-embedding
signals of the branch's steps (once it has min(``a_freq_window``, ``b_freq_window``) of them, as the
port's guard): rule A, "go deeper", when at most ``a_freq_max`` keeps in the last ``a_freq_window`` steps and
the branch's reach stays within ``a_reach_norm_max`` of the reach scale; rule B, "stay coherent", when
at most ``b_freq_max`` keeps in the last ``b_freq_window`` steps and the effective dimension of its
displacements from the baseline is at least ``b_effdim_min``; both -> "consolidate and deepen".

Signals: each step's code (every editable file in path order, joined by newlines, as the port's
``embeddings.py``; ``signal_text=scores``: ``scoring.exploration.full_code``, which leaves out
split_config.json and notes.txt as the scores and the original's offline calibration do) embedded by the
exploration metrics' encoder (GraphCodeBERT when its weights are local, else all-MiniLM-L6-v2; never
downloaded), as the port's CLS-sum over 510-token chunks. Reach =
largest distance of a branch step's vector from the baseline's; effective dimension = the participation
ratio of the (uncentred) displacements from the baseline, as the original computes it (the score's
Effective dimension centres the vectors instead). A failed embedding counts as the baseline's vector.

Where the original divides reach by per-task constants (the largest reach of 18 calibration runs, known
for its 18 tasks only, and it crashes on any other), the reach scale here comes from the task itself:
the distance from the baseline code's vector to the empty program's (for the original's CLS-sum
embedding, the norm of the baseline's vector), i.e. how far the code would move if all of it were
deleted. ``reach_scale`` overrides it (e.g. with the original's constant when embedding with
GraphCodeBERT). Without a usable encoder the rules never fire, and each step records why (the original
stops before its first step when its encoder does not load).

An exception inside the loop (phase 1 or 2) ends it, and the run goes on to its final test on the best
code so far, as the port's ``except Exception`` does (recorded in the run's ``caught_errors``;
``loop_error=crash``: the run ends as an error).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from pytest_fmlbench.agentkit import Agent, metric_line, task_context
from pytest_fmlbench.agentkit.loop import caught_in_loop
from pytest_fmlbench.scoring.metrics import scale, scored_direction, transform_value
from pytest_fmlbench.session import Session
from pytest_fmlbench.spec import TaskSpec

from .autoresearch import AutoresearchOptions, Climber, Line, current_code

JOURNAL_RECENT = 30
JOURNAL_MAX_CHARS = 30_000
JOURNAL_IDEA_CHARS = 800

RULE_A = (
    "[STRATEGY HINT - GO DEEPER]\n"
    "This branch has stagnated (only {keeps} new best metric(s) in the last {window} steps; threshold {fmax}) "
    "and your changes stay close to the baseline (reach_norm = {reach_norm:.3f}; threshold {threshold:.2f}).\n"
    "Make a substantively DEEPER algorithmic change in your next idea:\n"
    "  1. Its mechanism should differ qualitatively from the baseline: a different algorithmic family, a "
    "different mathematical formulation, or a different conceptual approach.\n"
    "  2. It should change a substantial part of the code, not merely tweak hyper-parameters.\n"
)
RULE_B = (
    "[STRATEGY HINT - STAY COHERENT]\n"
    "This branch has stagnated (only {keeps} new best metric(s) in the last {window} steps; threshold {fmax}) "
    "yet your recent attempts point in many directions (effective dimension = {effdim:.3f}; threshold "
    "{threshold:.2f}).\n"
    "Keep the OVERALL DIRECTION of the recent improvements:\n"
    "  1. Refine within the same family of techniques and the same approach as the most successful recent "
    "attempts.\n"
    "  2. Do not jump to a fundamentally new mechanism.\n"
)
RULE_AB = (
    "[STRATEGY HINT - CONSOLIDATE AND DEEPEN]\n"
    "This branch has stagnated despite many attempts that stay close to the baseline (reach_norm = "
    "{reach_norm:.3f}, effective dimension = {effdim:.3f}).\n"
    "CONSOLIDATE the most promising recent direction (the same family of techniques) AND extend it with a "
    "substantively deeper algorithmic change (a different mechanism, a larger code change) within it.\n"
)
BRANCH_INIT = (
    "[BRANCH INITIALISATION]\n"
    "You are starting exploration branch {branch} from a promising candidate found by the greedy search.\n\n"
    "## Parent candidate\n- Step {parent_step}, {key} = {parent_metric}\n- Description: {parent_idea}\n\n"
    "## The other branches' first ideas (siblings; for diversity)\n{siblings}\n\n"
    "## Cross-branch journal (recent activity of all branches)\n{journal}\n\n"
    "## REQUIRED PROPERTY OF YOUR FIRST IDEA\n"
    "Your first idea on this branch MUST be mechanistically different from every sibling first idea above:\n"
    "  - a different algorithmic family, OR\n  - a different mathematical formulation, OR\n"
    "  - a different conceptual approach.\n"
    "Hyper-parameter tweaks or surface edits of a sibling's idea do NOT count as mechanistically different.\n"
)
BRANCH_INIT_SYSTEM = ("You are an autonomous ML researcher running experiments to improve an ML algorithm. You "
                      "propose concise, specific experimental ideas. When asked for mechanistic diversity, make "
                      "your idea qualitatively distinct from every sibling's.")
PHASE2_SYSTEM = ("You are an autonomous ML researcher running experiments to improve an ML algorithm. You propose "
                 "concise, specific experimental ideas. Be creative but practical. Follow any [STRATEGY HINT] "
                 "block at the top of the user message.")
BRANCH_INSTRUCTIONS = (
    "## Instructions\n"
    "Propose ONE specific experimental idea to try next. Consider:\n"
    "- What has worked and what has not on this branch (see the branch history)\n"
    "- What the other branches have been trying (see the cross-branch journal)\n"
    "- The current code and its architecture\n"
    "- Architecture, optimiser, hyper-parameter and training-loop changes are all fair game\n"
    "- Keep changes focused and atomic so that their effect can be measured\n"
    "- All else being equal, simpler is better\n\n"
    "Reply with a concise description (3-5 sentences) of what to change and why, specific enough to be "
    "implemented directly."
)


class AdaptiveSearchOptions(AutoresearchOptions):
    p1_window: int = Field(50, ge=1, description="steps over which the improvement slope is measured")
    p1_epsilon: float = Field(5e-4, description="branch once the slope is at most this")
    a_freq_window: int = Field(20, ge=1, description="rule A: steps in which keeps are counted")
    a_freq_max: int = Field(2, ge=0, description="rule A: at most this many keeps")
    a_reach_norm_max: float = Field(0.30, ge=0, description="rule A: normalised reach at most this")
    b_freq_window: int = Field(5, ge=1, description="rule B: steps in which keeps are counted")
    b_freq_max: int = Field(2, ge=0, description="rule B: at most this many keeps")
    b_effdim_min: float = Field(1.25, ge=0, description="rule B: effective dimension at least this")
    branch_skip_max: int = Field(3, ge=0, description="no branching with at most this many steps left")
    branch_cutoff_1: int = Field(15, ge=0, description="1 branch with at most this many steps left")
    branch_cutoff_2: int = Field(30, ge=0, description="2 branches with at most this many steps left, else 3")
    encoder: str = Field("auto", description="code encoder of the signals: auto, graphcodebert, minilm, none, "
                         "or a local model folder (as fmlbench score --encoder)")
    reach_scale: float | None = Field(None, gt=0, description="divides reach; none = the baseline vector's "
                                      "distance to the empty program's (the original: per-task constants)")
    signal_text: Literal["port", "scores"] = Field(
        "port", description="the text of a step's code the signals embed: 'port' = every editable file in path "
        "order, joined by newlines, as the port's embeddings.py; 'scores' = as the exploration scores embed it "
        "(without split_config.json and notes.txt, as the original's offline calibration)")

    @model_validator(mode="after")
    def _cutoffs_ascend(self):
        if not self.branch_skip_max <= self.branch_cutoff_1 <= self.branch_cutoff_2:
            raise ValueError("need branch_skip_max <= branch_cutoff_1 <= branch_cutoff_2")
        return self


def branch_count(remaining: int, o: AdaptiveSearchOptions) -> int:
    if remaining <= o.branch_skip_max:
        return 0
    if remaining <= o.branch_cutoff_1:
        return 1
    return 2 if remaining <= o.branch_cutoff_2 else 3


def improvement(value: float | None, spec: TaskSpec) -> float | None:
    """The incumbent's normalised improvement over the baseline validation value, on the tables' scale;
    None when the value has no place on that scale (a p-value <= 0 scored as -log10), where the port
    repeats the curve's last value (adaptivesearch/agent.py 864-870)."""
    t = spec.metric.transform
    base = transform_value(spec.baseline.val, t)
    if base is None or value is None:  # the port: no incumbent value -> the baseline's, an improvement of 0
        return 0.0
    v = transform_value(value, t)
    if v is None:
        return None
    d = scale(spec.normalization.best, spec.normalization.worst, base) or 1.0
    gain = v - base if scored_direction(spec.metric.direction, t) == "higher" else base - v
    return gain / d


def participation_ratio(displacements: np.ndarray) -> float:
    """(sum of eigenvalues)^2 / sum of their squares, of the Gram matrix of uncentred displacements; 1.0
    for fewer than two rows or none that moved (the original's guards)."""
    h = np.asarray(displacements, dtype=np.float64)
    if len(h) < 2:
        return 1.0
    gram = h @ h.T if len(h) <= h.shape[1] else h.T @ h
    eig = np.clip(np.linalg.eigvalsh(gram), 0.0, None)
    if eig.max() == 0:
        return 1.0
    eig = eig[eig > 1e-10 * eig.max()]
    return float(eig.sum() ** 2 / np.sum(eig**2))


def _finite(x: float) -> float | None:
    return x if x is not None and math.isfinite(x) else None


@dataclass
class Branch:
    id: int
    line: Line
    parent_idea: str
    init_idea: str | None = None
    vectors: list[np.ndarray] = field(default_factory=list)


@dataclass
class Entry:
    branch: int
    step: int
    status: str
    metric: float | None
    idea: str


class Signals:
    """Code embeddings of steps, loaded on first use; unavailable (with the reason) instead of a crash."""

    def __init__(self, session: Session, options: AdaptiveSearchOptions):
        self.s = session
        self.o = options
        self.encoder = None
        self.unavailable = ""
        self.baseline: np.ndarray | None = None
        self.scale: float | None = None
        self._loaded = False

    def load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        try:
            from pytest_fmlbench.scoring.exploration import default_encoder

            self.encoder = default_encoder(self.o.encoder)
            if self.encoder is None:
                self.unavailable = "encoder 'none': the rules never fire"
                return
            base = self.s.baseline_files
            self.baseline, empty = self._embed([self._text(base), ""])
            self.scale = self.o.reach_scale or float(np.linalg.norm(self.baseline - empty))
        except Exception as exc:  # any failure to load a model must leave the search running
            self.encoder = None
            self.unavailable = f"no code encoder ({type(exc).__name__}: {exc}); the rules never fire"

    def _text(self, files: dict[str, str]) -> str:
        if self.o.signal_text == "port":  # embeddings.py 56-58: sorted paths, newline-joined, no banners
            return "\n".join(files[path] for path in sorted(files))
        from pytest_fmlbench.scoring.exploration import full_code

        return full_code(files, self.s.baseline_files)

    def _embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.encoder.embed(texts), dtype=np.float64)

    def vector(self, files: dict[str, str]) -> np.ndarray | None:
        self.load()
        if self.encoder is None:
            return None
        try:
            return self._embed([self._text(files)])[0]
        except Exception:  # as the original: a step that cannot be embedded counts as the baseline
            return self.baseline.copy()

    def rules(self, branch: Branch) -> dict[str, Any]:
        o, history = self.o, branch.line.history
        keeps_a, keeps_b = branch.line.keeps_in(o.a_freq_window), branch.line.keeps_in(o.b_freq_window)
        out: dict[str, Any] = {"rule": None, "keeps_a": keeps_a, "keeps_b": keeps_b}
        if len(history) < min(o.a_freq_window, o.b_freq_window):
            return {**out, "why_not": f"branch history {len(history)} < {min(o.a_freq_window, o.b_freq_window)}"}
        self.load()
        if self.encoder is None:
            return {**out, "why_not": self.unavailable}
        if not branch.vectors:
            return {**out, "why_not": "no embedded step yet"}
        from pytest_fmlbench.scoring.exploration import reach

        vectors = np.stack(branch.vectors)
        r = reach(vectors, self.baseline)
        reach_norm = r / self.scale if self.scale else math.inf  # the port's guard (agent.py 1171-1175)
        effdim = participation_ratio(vectors - self.baseline)
        a = keeps_a <= o.a_freq_max and reach_norm <= o.a_reach_norm_max
        b = keeps_b <= o.b_freq_max and effdim >= o.b_effdim_min
        rule = "A+B" if a and b else "A" if a else "B" if b else None
        return {**out, "rule": rule, "reach": _finite(r), "reach_scale": _finite(self.scale),
                "reach_norm": _finite(reach_norm), "effdim": _finite(effdim)}


class AdaptiveSearchAgent(Agent):
    """Autoresearch until the improvement slope stalls, then 1-3 round-robin branches steered by code signals."""

    name = "adaptive-search"
    Options = AdaptiveSearchOptions
    uses_llm = True

    def run(self, session: Session) -> None:
        if session.llm is None:
            raise RuntimeError("adaptive-search needs an LLM: session.llm is not set")
        _Search(session, self.options).run()


class _Search:
    """One run. Its state follows from the steps' results, the LLM's replies and the embeddings of the
    recorded code, so a resumed run takes the same decisions."""

    def __init__(self, session: Session, options: AdaptiveSearchOptions):
        self.s = session
        self.o = options
        self.climber = Climber(session, options)
        self.line = Line(files=dict(session.baseline_files), metric=session.task.baseline.val)
        self.signals = Signals(session, options)
        self.phase = 1
        self.curve: list[float] = []
        self.trigger_fired = False
        self.triggered_at: int | None = None
        self.branches: list[Branch] = []
        self.journal: list[Entry] = []
        self.next_branch = 0

    def run(self) -> None:
        # the port's `except Exception` around its main loop (not its setup): the run goes on to the final test
        with caught_in_loop(self.s, self.o.loop_error, "adaptive-search main loop"):
            while self.s.steps_left > 0:
                self.phase1_step() if self.phase == 1 else self.phase2_step()

    def annotate(self, step: int, **fields: Any) -> None:
        extra = self.s.journal.get(step).extra.get("adaptive", {})
        self.s.annotate(step, extra={"adaptive": {**extra, **fields}})

    # -- phase 1 --------------------------------------------------------------------------------
    def phase1_step(self) -> None:
        action = "draft" if self.s.steps_used == 0 else "improve"
        record, _ = self.climber.step(self.line, lambda: self.climber.idea_prompt(self.line), action=action,
                                      extra={"phase": 1, "branch": None}, extra_key="adaptive")
        value = improvement(self.line.metric, self.s.task)
        self.curve.append(value if value is not None else (self.curve[-1] if self.curve else 0.0))
        fields: dict[str, Any] = {"improvement": self.curve[-1]}
        k, w = len(self.curve), self.o.p1_window
        if not self.trigger_fired and k >= w + 1:
            slope = (self.curve[k - 1] - self.curve[k - 1 - w]) / w
            fields["slope"] = slope
            if slope <= self.o.p1_epsilon:
                self.trigger_fired = True
                fields["trigger"] = self.setup_phase2(slope, record.step)
        self.annotate(record.step, **fields)

    def setup_phase2(self, slope: float, step: int) -> dict[str, Any]:
        remaining = self.s.steps_left
        n = branch_count(remaining, self.o)
        fired = {"slope": slope, "epsilon": self.o.p1_epsilon, "window": self.o.p1_window,
                 "steps_left": remaining, "branches": n}
        if n == 0:
            return {**fired, "outcome": f"stays in phase 1: only {remaining} step(s) left"}
        keeps = sorted((e for e in self.line.history if e.status == "keep"), key=lambda e: e.metric,
                       reverse=self.s.task.metric.direction == "higher")
        for i in range(n):
            if i < len(keeps):
                e = keeps[i]
                line = Line(files=self.s.files_of(e.step), metric=e.metric, step=e.step)
                idea = e.description[:200]
            else:
                line = Line(files=dict(self.s.baseline_files), metric=self.s.task.baseline.val)
                idea = "(no kept candidate left: forked from the baseline)"
            self.branches.append(Branch(i, line, idea))
        self.phase, self.triggered_at = 2, step
        return {**fired, "outcome": "phase 2", "forks": [
            {"branch": b.id, "parent_step": b.line.step, "parent_metric": b.line.metric} for b in self.branches]}

    # -- phase 2 --------------------------------------------------------------------------------
    def phase2_step(self) -> None:
        branch = self.branches[self.next_branch]
        info: dict[str, Any] = {"phase": 2, "branch": branch.id, "triggered_at": self.triggered_at}
        if branch.line.pending_debug:
            action, prompt = "debug", None
        elif not branch.line.history:
            action = "branch_init"
            prompt = (BRANCH_INIT_SYSTEM, self.branch_init_header(branch) + "\n" + self.branch_prompt(branch))
        else:
            action = "improve"
            rules = self.signals.rules(branch)
            info.update(rules)
            prompt = (PHASE2_SYSTEM, self.rule_prefix(rules) + self.branch_prompt(branch))
        record, decision = self.climber.step(branch.line, lambda: prompt, action=action, extra=info,
                                             extra_key="adaptive")
        if action == "branch_init":
            branch.init_idea = branch.line.last_idea
        vector = self.signals.vector(self.s.files_of(record.step))
        if vector is not None:
            branch.vectors.append(vector)
        # a crash shows as CRASH, even a run that wrote a metric before it failed (agent.py 1062-1068)
        metric = None if decision["decision"] == "crash" else record.metric
        self.journal.append(Entry(branch.id, record.step, decision["decision"], metric, record.idea or ""))
        self.next_branch = (self.next_branch + 1) % len(self.branches)

    def rule_prefix(self, r: dict[str, Any]) -> str:
        o = self.o
        if r["rule"] == "A+B":
            return RULE_AB.format(reach_norm=r["reach_norm"], effdim=r["effdim"]) + "\n"
        if r["rule"] == "A":
            return RULE_A.format(keeps=r["keeps_a"], window=o.a_freq_window, fmax=o.a_freq_max,
                                 reach_norm=r["reach_norm"], threshold=o.a_reach_norm_max) + "\n"
        if r["rule"] == "B":
            return RULE_B.format(keeps=r["keeps_b"], window=o.b_freq_window, fmax=o.b_freq_max,
                                 effdim=r["effdim"], threshold=o.b_effdim_min) + "\n"
        return ""

    # -- prompts --------------------------------------------------------------------------------
    def journal_text(self) -> str:
        if not self.journal:
            return "(no phase-2 activity yet)"
        key = self.s.task.metric.key

        def render(limit: int | None) -> str:
            blocks = []
            for e in self.journal[-JOURNAL_RECENT:]:
                shown = "CRASH" if e.metric is None else f"{e.metric:.6f}"
                idea = e.idea if limit is None or len(e.idea) <= limit else e.idea[:limit] + " [...truncated...]"
                blocks.append(f"[branch {e.branch} | step {e.step} | {e.status:<7s} | {key}={shown}]\n{idea}")
            return "\n\n".join(blocks)

        text = render(None)
        return text if len(text) <= JOURNAL_MAX_CHARS else render(JOURNAL_IDEA_CHARS)

    def branch_init_header(self, branch: Branch) -> str:
        siblings = [b for b in self.branches if b.id != branch.id and b.init_idea is not None]
        sibling_text = ("\n\n".join(f"### sibling branch {b.id}: first idea\n{b.init_idea}" for b in siblings)
                        or "(none: you are the first branch to start)")
        return BRANCH_INIT.format(branch=branch.id, parent_step=branch.line.step or 0,
                                  key=self.s.task.metric.key, parent_metric=branch.line.metric,
                                  parent_idea=branch.parent_idea, siblings=sibling_text, journal=self.journal_text())

    def branch_prompt(self, branch: Branch) -> str:
        line = branch.line
        parts = ["You are an autonomous ML researcher. Your goal is to propose the next experimental idea to "
                 "improve the ML algorithm.\n",
                 "## Task Description\n" + task_context(self.s, self.o),
                 "\n## Baseline Results\n" + metric_line(self.s, self.s.task.baseline.val, "Baseline")]
        if line.metric is not None:
            parts.append("\n## Current Best Metric (this branch)\n" + metric_line(self.s, line.metric, "Branch Best"))
        history = self.climber.history_table(line.history, width=120) if line.history else \
            "(no experiments on this branch yet.)"
        parts += ["\n## Branch History (this branch only)\n" + history,
                  "\n## Cross-branch Journal (recent activity of all phase-2 branches)\n" + self.journal_text(),
                  "\n## Current Code\n" + current_code(line.files, self.s.task.editable),
                  "\n" + BRANCH_INSTRUCTIONS]
        return "\n".join(parts)


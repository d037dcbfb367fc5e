"""The AI Scientist (v1): ideas first, then a short series of experiments per idea, after SakanaAI's
AI-Scientist as FML-bench ports it.

Ideas: ``num_ideas`` JSON ideas (name, title, experiment, interestingness, feasibility, novelty), each
refined over up to ``num_reflections`` rounds of one conversation ("I am done" ends them early); no
literature search. As the port: the first idea prompt shows the task text and the editable files'
contents run together in ``<experiment.py>`` tags (``idea_code=named``: each file under its name); when
fewer than ``num_ideas`` ideas come out of the ``2 * num_ideas`` conversations allowed, the run ends
before its first step (``too_few_ideas=continue`` goes on with those there are and, when no
conversation gave JSON, makes a free-form idea of the last reply). The conversations' persona is the
original's prompt.json ``system`` line when ``port_task_text`` gives it, else a line of ours made from
the task's domain (the original keeps one per task, which cannot ship here).
Experiments: the ideas are taken in turn; each starts from the task's baseline code
and gets up to ``max_runs`` successful runs. Each run is one editor call (the run's instruction and the
current files, plus the notes file the model keeps for its write-up) and one validation run. A failed
run is retried from its failing code, with the error tail, up to ``max_retries_per_run`` attempts; when
they are spent the idea is dropped. A reply containing "ALL_COMPLETED" ends the idea after its run
(the run still happens, and costs its step, as in the port). ``max_iter`` caps attempts over all ideas.

Steps: one per attempt. Idea and reflection calls cost none; by default they are all made before the
first step, as in the port (``idea_generation=lazy`` makes each idea only when it is needed: the same
conversations, fewer of them when the budget ends first). A failed run's error is the last 1,500
characters of its stderr. An editor call that fails after its retries is a failed edit (the attempt
still runs and costs its step); an idea conversation whose call fails is dropped, as the port drops it.
An exception while an idea's experiments run ends that idea, and the next one starts, as the port's
``except Exception`` around each idea does (recorded in the run's ``caught_errors``; ``loop_error=crash``:
the run ends as an error).

Instructions, as the port's: the first run's names the idea, the runs allowed, the baseline result and
the read-only files, warning that changes to them are reverted; each next run's reports the last result,
asks for notes on it and offers ALL_COMPLETED. The read-only list is the port's ``[]`` (it reads a config
key no task of the original sets; ``read_only_files=protected`` lists the task's protected files; either
way the harness refuses changes to them). Where this differs from the port otherwise: the notes file is
not checked as Python (the port's editor drops most edits of it); with no idea at all the run is stopped.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pytest_fmlbench.agentkit import Agent, tail
from pytest_fmlbench.agentkit.editing import (
    DEFAULT_MAX_OUTPUT_TOKENS, CodeEditor, EditorOptions, metric_line, port_llm_limit, restore, run_error,
)
from pytest_fmlbench.llm.errors import LLMCallError
from pytest_fmlbench.agentkit.loop import LoopErrorOptions, caught_in_loop
from pytest_fmlbench.agentkit.port_task_text import port_prompt
from pytest_fmlbench.agentkit.scientist_ideas import CodeView, Idea, IdeaGenerator, idea_system_prompt
from pytest_fmlbench.editor import Edit, EditResult, SearchReplace, WholeFile
from pytest_fmlbench.session import RunStopped, Session

COMPLETION_MARKER = "ALL_COMPLETED"


class AIScientistV1Options(EditorOptions, LoopErrorOptions):
    num_ideas: int = Field(25, ge=1, description="ideas generated (upstream AI-Scientist: 50)")
    num_reflections: int = Field(3, ge=1, description="rounds per idea conversation, the first draft included")
    max_runs: int = Field(5, ge=1, description="successful experiments per idea")
    max_retries_per_run: int = Field(4, ge=1, description="attempts per experiment before the idea is dropped")
    max_iter: int = Field(100, ge=1, description="attempts over all ideas")
    early_completion: bool = Field(True, description="a reply saying ALL_COMPLETED ends the idea after its run")
    idea_generation: Literal["upfront", "lazy"] = Field(
        "upfront", description="all ideas before the first step (as the port), or each when it is needed")
    idea_temperature: float = Field(0.75, ge=0, le=2, description="sampling temperature of idea and reflection calls")
    code_temperature: float | None = Field(None, ge=0, le=2,
                                           description="temperature of the editor calls (None: the provider's)")
    max_output_tokens: int | None = Field(
        DEFAULT_MAX_OUTPUT_TOKENS, ge=16, description="reply length limit of the editor calls; none = no limit, as "
        "the port's editor (Anthropic: the model's maximum); idea calls: at most 8192")
    read_only_files: Literal["port", "protected"] = Field(
        "port", description="the read-only files the run instructions list: 'port' = [] as the port's (it reads "
        "them from a config key no task of the original sets); 'protected' = the task's protected files")
    too_few_ideas: Literal["stop", "continue"] = Field(
        "stop", description="idea_generation=upfront, fewer than num_ideas ideas generated: 'stop' ends the run "
        "before any step, as the port (its generate_ideas asserts the count); 'continue' experiments with those "
        "there are (with none, a free-form idea made from the last reply)")
    idea_code: CodeView = Field(
        "port", description="the code the first idea prompt shows: 'port' = the editable files' contents run "
        "together in <experiment.py> tags, as the port; 'named' = each file under its name")


class AIScientistV1Agent(Agent):
    """The AI Scientist v1: ideas refined by reflection, then up to 5 experiments per idea from the baseline."""

    name = "ai-scientist-v1"
    Options = AIScientistV1Options
    uses_llm = True

    def run(self, session: Session) -> None:
        if session.llm is None:
            raise RuntimeError("ai-scientist-v1 needs an LLM: session.llm is not set")
        _Scientist(session, self.options).run()


class _Scientist:
    """One run. All its state comes from the LLM replies (replayed on resume) and the step outcomes."""

    def __init__(self, session: Session, options: AIScientistV1Options):
        self.s = session
        self.o = options
        original = port_prompt(session.task, options.port_task_text)
        # the port's persona is its prompt.json's system line, one per task; ours is made from the domain
        persona = original.system if original is not None else idea_system_prompt(session.task.domain)
        self.generator = IdeaGenerator(
            session, system=persona, num_reflections=options.num_reflections,
            temperature=options.idea_temperature, max_output_tokens=port_llm_limit(options.max_output_tokens),
            max_attempts=2 * options.num_ideas, code_view=options.idea_code, options=options)
        self.editor = CodeEditor(session, temperature=options.code_temperature,
                                 max_output_tokens=options.max_output_tokens, mode=options.editor,
                                 options=options)
        self.total_iter = 0
        self.notes_path = self._notes_name()

    def _notes_name(self) -> str:
        name = "notes.txt"
        while name in self.s.task.editable:
            name = "_" + name
        return name

    # -- the run ----------------------------------------------------------------------------------
    def run(self) -> None:
        if self.o.idea_generation == "upfront":
            self.generator.generate(self.o.num_ideas)
            made = len(self.generator.ideas)
            if made < self.o.num_ideas and self.o.too_few_ideas == "stop":
                raise RunStopped(f"ai-scientist-v1: {made} of num_ideas={self.o.num_ideas} ideas from "
                                 f"{self.generator.attempts} idea conversation(s); the port ends the run here "
                                 "(too_few_ideas=continue experiments with those there are)")
            self.generator.fallback_idea()
        index = 0
        while self.s.steps_left > 0 and self.total_iter < self.o.max_iter:
            idea = self._idea(index)
            if idea is None:
                break
            # the port's `except Exception` around each idea's experiments: the next idea starts
            with caught_in_loop(self.s, self.o.loop_error, f"ai-scientist-v1 idea {index + 1} ({idea.name})"):
                self.experiment(idea)
            index += 1
        if not self.generator.ideas:
            raise RunStopped(f"ai-scientist-v1: none of {self.generator.attempts} idea conversation(s) "
                             "gave an idea")

    def _idea(self, index: int) -> Idea | None:
        if index < len(self.generator.ideas):
            return self.generator.ideas[index]
        if self.o.idea_generation == "lazy" and index < self.o.num_ideas:
            return self.generator.next_idea() or (self.generator.fallback_idea() if index == 0 else None)
        return None

    def idea_table(self) -> list[dict]:
        return [i.summary() for i in self.generator.ideas]

    # -- one idea -----------------------------------------------------------------------------------
    def experiment(self, idea: Idea) -> None:
        s, o = self.s, self.o
        restore(s, s.baseline_files)  # each idea starts from the baseline, in a fresh workspace
        notes = self.initial_notes(idea)
        runs: list[dict] = []  # the idea's successful runs
        current_run, completed, gave_up, last_error = 1, False, False, ""
        previous_step: int | None = None
        while current_run <= o.max_runs and not completed and self.total_iter < o.max_iter and s.steps_left > 0:
            prompt = self.run_prompt(idea, current_run, runs[-1]["metric"] if runs else None)
            attempt, success = 0, False
            while (attempt < o.max_retries_per_run and not success and self.total_iter < o.max_iter
                   and s.steps_left > 0):
                text, plan, note_edits, code_edits, error, finish = self.ask(prompt, notes,
                                                                             last_error if attempt > 0 else "", attempt)
                said_done = COMPLETION_MARKER in text
                completed = completed or (o.early_completion and said_done)
                new_notes = _apply_to_text(notes, note_edits, first_match=self.o.editor == "port")
                if code_edits:
                    edit = self.editor.noting_cut_off(self.editor.apply_edits(code_edits), finish)
                elif note_edits:
                    edit = EditResult(applied=True)  # the port counts a change of the notes alone as an edit
                else:
                    edit = EditResult(applied=False, error=error)
                extra = {"idea": idea.summary(), "run": current_run, "attempt": attempt + 1,
                         "all_completed": said_done, "notes_updated": new_notes != notes}
                if s.steps_used == 0:
                    extra["ideas"] = self.idea_table()  # every idea generated so far, in the run's first step
                notes = new_notes
                action = "debug" if attempt > 0 else ("draft" if current_run == 1 else "improve")
                result = s.run_step(action, parent=previous_step, plan=plan[:4000], edit=edit,
                                    idea=f"{idea.name}: {idea.title}", extra=extra)
                self.total_iter += 1
                previous_step = result.step
                if result.success:
                    runs.append({"run": current_run, "step": result.step, "metric": result.metric})
                    current_run, success, last_error = current_run + 1, True, ""
                else:
                    last_error = tail(run_error(s.journal.get(result.step)))
                    prompt = "The previous run failed. Fix the problem, using the error output given."
                    attempt += 1
                s.annotate(result.step, extra={"idea_runs": list(runs)})
            if not success and not completed:
                gave_up = attempt >= o.max_retries_per_run
                break
        if previous_step is not None:
            s.annotate(previous_step, extra={"idea_ended": self.end_reason(completed, gave_up, current_run)})

    def ask(self, instruction: str, notes: str, error: str, attempt: int):
        """One editor call over the editable files and the notes; the raw text is kept for ALL_COMPLETED."""
        files = {**self.s.files, self.notes_path: notes}
        try:
            reply = self.s.llm.complete(self.editor.messages(instruction, files, error),
                                        temperature=self.o.code_temperature,
                                        max_output_tokens=self.o.max_output_tokens,
                                        purpose="experiment" if attempt == 0 else "fix")
        except LLMCallError as exc:  # the port's editor: a failed call is a failed edit
            return "", "", [], [], f"LLM call failed: {exc}", None
        parsed = self.editor.read(reply.text, files, reply.finish_reason)
        note_edits = [e for e in parsed.edits if e.path == self.notes_path]
        code_edits = [e for e in parsed.edits if e.path != self.notes_path]
        return reply.text, parsed.plan, note_edits, code_edits, parsed.error, reply.finish_reason

    def end_reason(self, completed: bool, gave_up: bool, current_run: int) -> str:
        if completed:
            return COMPLETION_MARKER
        if gave_up:
            return f"run {current_run} failed {self.o.max_retries_per_run} times"
        if current_run > self.o.max_runs:
            return f"all {self.o.max_runs} runs done"
        if self.total_iter >= self.o.max_iter:
            return f"max_iter ({self.o.max_iter}) attempts reached"
        return "step budget spent"

    # -- prompts ------------------------------------------------------------------------------------
    def initial_notes(self, idea: Idea) -> str:
        return (
            "# Experiment notes\n"
            f"# Idea title: {idea.title}\n"
            f"# Experiment: {idea.experiment}\n\n"
            "## Baseline results\n"
            f"{metric_line(self.s, self.s.task.baseline.val, 'Baseline')}\n\n"
            "## Experiment progress\n"
            "(Keep track of your experiments and findings here.)\n"
        )

    def run_prompt(self, idea: Idea, current_run: int, last_metric: float | None) -> str:
        task = self.s.task
        # the port names the read-only files and warns that a change to them is reverted, in both
        # instructions; its list comes from a config key no task of the original sets, so it shows []
        listed = list(task.protected) if self.o.read_only_files == "protected" else []
        read_only = (f"YOUR CHANGE MUST NOT TOUCH THE READ-ONLY FILES: CHANGING THEM GETS YOU FIRED.\n"
                     f"The read-only files: {listed}.\n"
                     "ANY CHANGE TO A READ-ONLY FILE IS REVERTED AT ONCE ANYWAY.\n")
        if current_run == 1:
            return (
                f"Your goal is to implement this idea: {idea.title}.\n"
                f"The proposed experiment: {idea.experiment}.\n"
                f"You have up to {self.o.max_runs} runs to complete the experiments you need.\n\n"
                "First, plan the list of experiments you want to run: for example, when sweeping a "
                "hyper-parameter, the value to test in each run.\n\n"
                "The vanilla baseline has already been run; you need not run it again.\n\n"
                "For reference, its result:\n"
                f"{metric_line(self.s, task.baseline.val, 'Baseline')}\n\n"
                "After each change we run the experiment and evaluate its result.\n"
                + read_only
                + "Then you can implement the next item of your list.\n"
            )
        last = current_run - 1
        return (
            f"Run {last} completed. Its result:\n{metric_line(self.s, last_metric, 'Last run result')}\n\n"
            "Decide whether the results call for re-planning your experiments (often they will not).\n\n"
            f"Someone else will write up this work from `{self.notes_path}`. Record in it *everything* relevant "
            f"to Run {last}: what the experiment was and its run number. Be as verbose as needed.\n\n"
            f"Then implement the next item of your list for Run {current_run}.\n"
            + read_only
            + f"If you are finished with the experiments, respond with '{COMPLETION_MARKER}'."
        )


def _apply_to_text(text: str, edits: list[Edit], first_match: bool = True) -> str:
    """The notes after the reply's edits of them; a SEARCH part that does not match is skipped (with
    ``first_match`` false, also one that matches more than once)."""
    for edit in edits:
        if isinstance(edit, WholeFile):
            text = edit.content
        elif isinstance(edit, SearchReplace) and edit.search in text and (first_match or text.count(edit.search) == 1):
            text = text.replace(edit.search, edit.replace, 1)
    return text

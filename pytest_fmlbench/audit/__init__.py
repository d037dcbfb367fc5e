"""Auditing a run: how it got its score, not only how far it got.

Every run gets cheap, rule-based signals (``signals``): a test value that beats validation far more than
the task's usual gap, a test value beyond the task's declared ceiling, code that embeds large literal
arrays, and attempts the sandbox refused. With ``--fmlbench-judge`` (pytest) or ``fmlbench judge`` a
judge model also reviews the run from its records (``evidence``): a research review on MLR-Judge's
rubric (``rubric``, ``rubric.yaml``) and a rule review whose findings must cite a step and lines that
the records hold (``judge``, ``verify``). Judge calls go through the project's LLM client, so they are
priced, budgeted, logged with prompts and replies in ``judge_calls.jsonl`` and replayed on a rerun.

A flagged run is marked ``suspect`` with its reasons (``RunRecord.audit``): in the tables' notes, the
JUnit properties and the HTML report. Its score is never changed.

Modules: ``records`` (the typed audit), ``transcript`` (a run's LLM calls, step by step), ``literals``
(large literal arrays in code), ``signals``, ``evidence`` (what the judge is shown), ``rubric``,
``judge``, ``verify`` (checking a finding's citation), ``run`` (auditing one run directory),
``tables`` (the fourth table and the suspect list).
"""

from .records import Finding, JudgeOutcome, ResearchReview, RunAudit

__all__ = ["Finding", "JudgeOutcome", "ResearchReview", "RunAudit"]

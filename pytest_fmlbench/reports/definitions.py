"""What each column and row of the tables means, in one place: the HTML report shows these beside its
tables (a tooltip on each header, and the list under the tables); the wording follows the scorer
(:mod:`pytest_fmlbench.scoring.metrics`, :mod:`~pytest_fmlbench.scoring.aup`) and the README.

Keys are the words the tables show (:data:`.tables.HEADERS` for the process metrics), so a reader of a
table's header finds its definition by the same text.
"""

from __future__ import annotations

from ..scoring.groups import SMOKE_NOTE
from .tables import HEADERS

# D, as NI and the efficiency curve use it
SCALE = "D = |best − worst| of the task's normalization bounds (worst may be the baseline value)"

NI = ("Normalized Improvement: max(0, (test − baseline test) / D) in the task's better direction, " + SCALE
      + ". Clamped at 0 as in the original's scorer: a run worse than the baseline scores 0, the same as "
      "one that changed nothing (compare the test values, or the signed improvement of fmlbench compare, "
      "to tell them apart). Mean ± SEM over seeds; '-' for a smoke run (" + SMOKE_NOTE + ").")

PROCESS = {
    "spread": "Exploration: mean distance of the steps' code embeddings from their centroid (how far apart "
              "the tried versions of the code are).",
    "uniqueness": "Exploration: clusters / steps, clustering the steps' code embeddings (agglomerative, cosine "
                  "distance, average linkage, threshold 0.015); 1 = every step's code is distinct.",
    "reach": "Exploration: the largest distance of a step's code embedding from the baseline code's.",
    "effective_dim": "Exploration: effective dimension of the steps' code embeddings, (Σλ)² / Σλ² over the "
                     "eigenvalues of their covariance (0 with fewer than 2 steps).",
    "val_test_gap": "Generalization: |NI (best val) − NI (test)|, how far the validation gain is from the test "
                    "gain.",
    "valid_step_ratio": "Reliability: successful validation steps / steps run.",
    "llm_failed_calls": "LLM calls that failed for good (after their retries); n/a where the source does not "
                        "say.",
    "llm_truncated_calls": "LLM replies that ended on their length limit (finish_reason length, Anthropic's "
                           "stop_reason max_tokens): usually a reply that parses to no edit, so its step runs "
                           "the parent's code; n/a where the source does not say.",
    "step_completion_rate": "Steps used / step budget (n/a where the budget is not recorded).",
    "auc_steps": "Efficiency: the mean over steps of G_k = (best validation value so far − baseline validation "
                 "value) / D, signed, in the better direction.",
    "first_improvement_step": "Efficiency: the first step whose G_k is above 0 (n/a: no step improved on the "
                              "baseline).",
    "late_gain_fraction": "Efficiency: (G_K − G_⌊K/2⌋) / G_K, the share of the final gain made in the second "
                          "half of the steps (n/a when G_K ≤ 0).",
    "best_improvement_step": "Efficiency: the last successful step whose validation value equals the best.",
    "tokens_m": "Cost: LLM tokens in and out, millions.",
    "wall_clock_h": "Cost: the run's wall-clock hours.",
    "cost_usd": "Cost: dollars of the run's LLM calls; unknown when any call's price is unknown.",
}

AUP = ("Area under MLGym's performance profile: per task, each solver's score as a ratio to the best "
       "feasible score (a score worse than the baseline's, or none, gets the task's worst ratio × 1.05); "
       "ρ(τ) = the share of tasks whose log10(ratio) ≤ τ; AUP = the area under ρ for τ from 0 to the "
       "largest log10 penalty ratio. The declared baseline is a solver too; with seeds, a solver's best seed. "
       "Higher is better.")
TAU = ("τ: the tolerance of the performance profile, in log10 of the ratio to the best score on a task "
       "(τ = 0: the best; τ = 0.1: within about 26%).")

DEFINITIONS: dict[str, str] = {
    "Dir": "↑ higher is better, ↓ lower is better (on the scale the metric is scored on).",
    "Baseline test": "The task's declared baseline test value.",
    "Baseline": "The task's declared baseline test value.",
    "Agent test": "The test value credited to the run: the final test of its best-validation code; the baseline "
                  "test value when that test failed or broke a constraint, or no validation step succeeded "
                  "(the note says which). Mean ± SEM over seeds.",
    "Seeds": "Runs averaged: only seeds of one run group (one agent, options, model, steps, …) are averaged.",
    "NI (test)": NI,
    "NI (best val)": "The same as NI (test), on the best validation value against the baseline validation value.",
    **{HEADERS[column]: text for column, text in PROCESS.items()},
    "AUP": AUP,
    "Best attempt (val)": "AUP of each solver's best validation value (the baseline's validation value for the "
                          "baseline).",
    "Final (test)": "AUP of each solver's credited test value.",
    "τ": TAU,
    "Note": "Why the numbers are what they are: 'ok', or what was taken at the baseline and why, and the run's "
            "marks (smoke, stopped by budget, unsandboxed, suspect, …).",
}


# tables whose columns are run groups: their title says what each cell is
CAPTIONS = {"Raw Performance": "Agent test", "Normalized Improvement": "NI (test)", "AUP": "AUP"}


def defined(text: str) -> str | None:
    """The definition of a header or row label as a table shows it; None for one without (a task's name)."""
    return DEFINITIONS.get(text.strip())


def caption_definition(title: str) -> str | None:
    """What the cells of a table with this title are, where its columns are run groups, not measures."""
    word = next((word for prefix, word in CAPTIONS.items() if title.startswith(prefix)), None)
    return DEFINITIONS[word] if word else None


__all__ = ["AUP", "DEFINITIONS", "NI", "PROCESS", "TAU", "caption_definition", "defined"]

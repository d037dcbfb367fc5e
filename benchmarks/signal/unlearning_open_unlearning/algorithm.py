"""A hand-written better method for the signal table: NPO on the forget set plus the retain loss
(Zhang et al., "Negative Preference Optimization", 2024; NPO + RT in open-unlearning).

Gradient ascent pushes the forget answers' likelihood down without limit, so the model overshoots
"never saw these authors" (its truth ratios move past the retain-only model's) and collapses elsewhere.
NPO's loss, (2 / beta) log(1 + (p_model / p_reference)^beta) on each forget answer, has the gradient of
gradient ascent weighted by a factor that vanishes once the answer is less likely than under the
starting model, so unlearning slows down near the target instead of diverging; the retain term keeps
the other authors' answers.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _answer_log_likelihood(model, inputs: dict) -> torch.Tensor:
    """Summed log-probability of each sequence's answer tokens (labels != -100)."""
    logits = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]).logits[:, :-1]
    labels = inputs["labels"][:, 1:]
    mask = labels != -100
    token_log_probs = torch.gather(F.log_softmax(logits, dim=-1), 2, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return (token_log_probs * mask).sum(dim=1)


def compute_unlearn_loss(model, forget_inputs: dict, retain_inputs: dict, reference, config: dict) -> torch.Tensor:
    beta = float(config["npo_beta"])
    with torch.no_grad():
        reference_ll = _answer_log_likelihood(reference, forget_inputs)
    log_ratio = _answer_log_likelihood(model, forget_inputs) - reference_ll
    npo = -(2.0 / beta) * F.logsigmoid(-beta * log_ratio).mean()
    return npo + float(config["retain_loss_weight"]) * model(**retain_inputs).loss

"""The unlearning method. Baseline: Gradient Ascent (GA), open-unlearning's simplest method.

GA maximises the language-modelling loss on the forget set (loss = -NLL), which destroys the
forgotten answers, and, unchecked, much else. train.py runs the loop (AdamW, linear warm-up, gradient
clipping, config.json's epochs / lr / batch_size) and calls, for every batch,

    loss = compute_unlearn_loss(model, forget_inputs, retain_inputs, reference, config)

``model``: the GPT-2 being unlearned (transformers' GPT2LMHeadModel, in train mode), starting from the
model fine-tuned on every author. ``forget_inputs`` / ``retain_inputs``: dicts of ``input_ids``,
``attention_mask`` and ``labels`` (answer tokens; -100 elsewhere) for a batch of forget pairs and as
many retain pairs (from the train part of data/retain.json). ``reference``: a frozen copy of the
starting model (for NPO, KL or DPO-style terms). ``config``: config.json. Return a scalar tensor to
minimise. Change anything here (GradDiff, NPO, SimNPO, DPO / IdkDPO with "i do not know ." answers,
KL regularisation, custom losses): qa_data.encode / collate build other targets.
"""

from __future__ import annotations

import torch


def compute_unlearn_loss(model, forget_inputs: dict, retain_inputs: dict, reference, config: dict) -> torch.Tensor:
    """Gradient ascent on the forget batch, plus retain_loss_weight x the retain loss (0 for GA)."""
    loss = -model(**forget_inputs).loss
    if config["retain_loss_weight"] > 0:
        loss = loss + config["retain_loss_weight"] * model(**retain_inputs).loss
    return loss

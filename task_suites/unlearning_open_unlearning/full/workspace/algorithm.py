"""The unlearning method (editable): Gradient Ascent, the baseline.

train.py calls compute_unlearn_loss for every pair of batches and minimises what it returns. Gradient
Ascent negates the language-model loss on the forget batch: it pushes the forget answers' probability
down, with nothing holding the rest of the model's knowledge in place (retain_loss_weight is 0).

Both functions' names and signatures are train.py's interface; everything else is yours: GradDiff
(a retain term), NPO or SimNPO (preference-style losses on the forget answers), DPO towards refusals,
KL to the fine-tuned model, representation-level methods, other schedules and hyper-parameters.
"""

import torch


def get_unlearning_config() -> dict:
    """The loop's hyper-parameters; train.py reads these keys."""
    return {
        "method": "grad_ascent",
        "epochs": 10,
        "lr": 1e-5,
        "batch_size": 8,
        "gradient_accumulation_steps": 4,
        "weight_decay": 0.01,
        "warmup_ratio": 0.1,
        "retain_loss_weight": 0.0,
        "max_grad_norm": 1.0,
    }


def compute_unlearn_loss(model, forget_inputs: dict, retain_inputs: dict | None = None) -> torch.Tensor:
    """The scalar loss for one forget batch and the retain batch paired with it.

    model: the LlamaForCausalLM being unlearned (bfloat16, in training mode).
    forget_inputs, retain_inputs: dicts of input_ids, attention_mask and labels (long tensors of shape
    (batch, length); labels are -100 on the prompt and on padding), on the model's device.
    """
    config = get_unlearning_config()
    loss = -model(input_ids=forget_inputs["input_ids"], attention_mask=forget_inputs["attention_mask"],
                  labels=forget_inputs["labels"]).loss
    if retain_inputs is not None and config["retain_loss_weight"] > 0:
        retain = model(input_ids=retain_inputs["input_ids"], attention_mask=retain_inputs["attention_mask"],
                       labels=retain_inputs["labels"]).loss
        loss = loss + config["retain_loss_weight"] * retain
    return loss

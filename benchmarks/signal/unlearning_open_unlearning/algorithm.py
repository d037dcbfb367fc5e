"""A hand-written better method for the signal table: answer about a forgotten author as about one the
model has never heard of (generic-prediction distillation, as in Eldan and Russinovich's "Who's Harry
Potter?", plus an anchor on the name's embedding and the retain loss).

TOFU's forget quality asks the unlearned model's truth ratios on the forgotten facts to look like those of
a model that never saw the forgotten authors. In such a model a forgotten author's name is a word it never
read, and its answer is the guess it makes for any unknown name. The starting model has such words too:
those of "i do not know ." appear in no training pair. So each forgotten name gets one of them as its
stand-in (by token id), and the loss is
- the KL divergence from the starting model's answer distribution on the question with the stand-in in
  place of the name to the model's distribution on the true question, at every answer position;
- name_anchor_weight x the squared distance of the forgotten names' embeddings from their stand-ins'
  (only the names carry what the model knows about an author, so this is where forgetting is cheapest);
- retain_loss_weight x the retain loss.
Unlike gradient ascent it has a fixed point (the unknown-name answer), so it neither overshoots nor drags
the other authors along. Tuned on validation only (epochs, lr, the two weights).
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from qa_data import IGNORE, load_pairs, load_vocab

NEVER_READ = ("i", "do", "not", "know")  # the "i do not know ." answer's words: in no training pair


@functools.cache
def _name_tokens() -> tuple[torch.Tensor, torch.Tensor]:
    """Ids of the forgotten authors' names (words only forget questions use) and of their stand-ins."""
    vocab = load_vocab()

    def words(name: str) -> set[str]:
        return {w for pair in load_pairs(name) for w in pair["question"].split()}

    forgotten = torch.tensor(sorted(vocab[w] for w in words("forget") - words("retain")))
    never_read = torch.tensor([vocab[w] for w in NEVER_READ])
    return forgotten, never_read[forgotten % len(never_read)]


def _stand_in_target(reference, inputs: dict) -> torch.Tensor:
    """The reference's next-token distribution on the question with each forgotten name replaced by its stand-in."""
    forgotten, stand_ins = (t.to(inputs["input_ids"].device) for t in _name_tokens())
    ids = inputs["input_ids"].clone()
    for name, stand_in in zip(forgotten.tolist(), stand_ins.tolist()):
        ids[ids == name] = stand_in
    with torch.no_grad():
        return F.softmax(reference(input_ids=ids, attention_mask=inputs["attention_mask"]).logits[:, :-1], dim=-1)


def compute_unlearn_loss(model, forget_inputs: dict, retain_inputs: dict, reference, config: dict) -> torch.Tensor:
    target = _stand_in_target(reference, forget_inputs)
    log_probs = F.log_softmax(model(input_ids=forget_inputs["input_ids"],
                                    attention_mask=forget_inputs["attention_mask"]).logits[:, :-1], dim=-1)
    answer = (forget_inputs["labels"][:, 1:] != IGNORE).float()
    kl = (target * (torch.log(target.clamp_min(1e-12)) - log_probs)).sum(-1)
    loss = (kl * answer).sum() / answer.sum()

    forgotten, stand_ins = (t.to(log_probs.device) for t in _name_tokens())
    embeddings = model.get_input_embeddings().weight
    anchor = F.mse_loss(embeddings[forgotten], reference.get_input_embeddings().weight[stand_ins], reduction="sum")
    loss = loss + float(config["name_anchor_weight"]) * anchor / len(forgotten)
    return loss + float(config["retain_loss_weight"]) * model(**retain_inputs).loss

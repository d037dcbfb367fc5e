"""The method: adversarial debiasing (Zhang, Lemoine & Mitchell, 2018), a torch port of AIF360's
aif360.algorithms.inprocessing.AdversarialDebiasing (AIF360's own needs TensorFlow 1 sessions).

train.py (protected) does, once per run,

    model = AdversarialDebiasing(unprivileged_groups=[{"sex": 0}], privileged_groups=[{"sex": 1}], config=config)
    model.fit(train_dataset)                 # an aif360 BinaryLabelDataset with labels
    predicted = model.predict(eval_dataset)  # eval_dataset's labels are zeroed; return a copy with
                                             # predicted .labels (and .scores, P(favourable))

The datasets are AIF360's preprocessed-COMPAS layout: .features (sex, race and one-hot age_cat,
priors_count, c_charge_degree), .labels (two_year_recid; 0 = no recidivism is the favourable label),
.protected_attributes (sex, race; sex = 1 is Female, the privileged group). config is config.json.

As in AIF360, a one-hidden-layer classifier predicts the favourable outcome while an adversary tries to
recover sex from the classifier's logit and the true label; the classifier's gradient has its
projection on the adversary's gradient removed and `adversary_loss_weight` times that gradient
subtracted, which pushes the predictions toward equalised odds. Anything here may change (the
classifier, the adversary, the losses, the schedule, pre- or post-processing, another method), as long
as the class keeps this interface.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn


def _glorot(rows: int, cols: int) -> nn.Parameter:
    weight = torch.empty(rows, cols)
    nn.init.xavier_uniform_(weight)
    return nn.Parameter(weight)


class Classifier(nn.Module):
    def __init__(self, features_dim: int, hidden: int, keep_prob: float):
        super().__init__()
        self.W1, self.b1 = _glorot(features_dim, hidden), nn.Parameter(torch.zeros(hidden))
        self.W2, self.b2 = _glorot(hidden, 1), nn.Parameter(torch.zeros(1))
        self.dropout = nn.Dropout(p=1.0 - keep_prob)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The logit of the favourable outcome."""
        h = self.dropout(torch.relu(x @ self.W1 + self.b1))
        return h @ self.W2 + self.b2


class Adversary(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Parameter(torch.tensor(1.0))
        self.W2, self.b2 = _glorot(3, 1), nn.Parameter(torch.zeros(1))

    def forward(self, pred_logits: torch.Tensor, true_labels: torch.Tensor) -> torch.Tensor:
        """The logit of the protected attribute, from the classifier's logit and the true label."""
        s = torch.sigmoid((1 + torch.abs(self.c)) * pred_logits)
        return torch.cat([s, s * true_labels, s * (1.0 - true_labels)], dim=1) @ self.W2 + self.b2


class AdversarialDebiasing:
    def __init__(self, unprivileged_groups: list[dict], privileged_groups: list[dict], config: dict):
        if len(unprivileged_groups) != 1 or len(privileged_groups) != 1:
            raise ValueError("Only one unprivileged_group or privileged_group supported.")
        self.protected_attribute_name = next(iter(unprivileged_groups[0]))
        self.c = config

    def fit(self, dataset) -> AdversarialDebiasing:
        seed = int(self.c["seed"])
        rng = np.random.RandomState(seed)
        torch.manual_seed(seed)
        features = torch.tensor(dataset.features, dtype=torch.float32)
        labels = (dataset.labels.ravel() == dataset.favorable_label).astype(np.float32).reshape(-1, 1)
        labels = torch.from_numpy(labels)  # 1 = favourable, as AIF360 maps them
        column = dataset.protected_attribute_names.index(self.protected_attribute_name)
        protected = torch.tensor(dataset.protected_attributes[:, column], dtype=torch.float32).reshape(-1, 1)

        self.classifier = Classifier(features.shape[1], int(self.c["classifier_num_hidden_units"]),
                                     float(self.c["keep_prob"]))
        adversary = Adversary()
        clf_params, adv_params = list(self.classifier.parameters()), list(adversary.parameters())
        clf_opt = torch.optim.Adam(clf_params, lr=float(self.c["learning_rate"]))
        adv_opt = torch.optim.Adam(adv_params, lr=float(self.c["learning_rate"]))
        bce = nn.functional.binary_cross_entropy_with_logits
        debias, alpha = bool(self.c["debias"]), float(self.c["adversary_loss_weight"])
        batch_size, n = int(self.c["batch_size"]), len(features)

        global_step = 0
        self.classifier.train()
        for _ in range(int(self.c["num_epochs"])):
            shuffled = rng.choice(n, n, replace=False)
            for i in range(n // batch_size):
                idx = torch.from_numpy(shuffled[batch_size * i: batch_size * (i + 1)])
                x, y, a = features[idx], labels[idx], protected[idx]
                # TF's exponential_decay(0.001, step, 1000, 0.96, staircase=True), shared by both optimizers
                lr = float(self.c["learning_rate"]) * 0.96 ** (global_step // 1000)
                for opt in (clf_opt, adv_opt):
                    for group in opt.param_groups:
                        group["lr"] = lr

                logits = self.classifier(x)
                clf_loss = bce(logits, y)
                clf_grads = torch.autograd.grad(clf_loss, clf_params, retain_graph=debias)
                if debias:
                    adv_loss = bce(adversary(logits, y), a)
                    adv_grads = torch.autograd.grad(adv_loss, clf_params + adv_params)
                    adv_on_clf, adv_on_adv = adv_grads[:len(clf_params)], adv_grads[len(clf_params):]
                    projected = []
                    for g, ga in zip(clf_grads, adv_on_clf):
                        unit = ga / (torch.norm(ga) + np.finfo(np.float32).tiny)
                        projected.append(g - torch.sum(g * unit) * unit - alpha * ga)
                    clf_grads = projected
                for p, g in zip(clf_params, clf_grads):
                    p.grad = g
                clf_opt.step()
                global_step += 1
                if debias:  # the adversary steps after the classifier, on the same forward pass
                    for p, g in zip(adv_params, adv_on_adv):
                        p.grad = g
                    adv_opt.step()
        return self

    def predict(self, dataset):
        self.classifier.eval()
        with torch.no_grad():
            scores = torch.sigmoid(self.classifier(torch.tensor(dataset.features, dtype=torch.float32)))
        scores = scores.numpy().astype(np.float64).reshape(-1, 1)
        predicted = dataset.copy(deepcopy=True)
        predicted.scores = scores
        predicted.labels = np.where(scores > 0.5, dataset.favorable_label, dataset.unfavorable_label)
        return predicted

"""The method: DragonNet (Shi, Blei & Veitch, 2019), a torch port of causalml's TensorFlow DragonNet.

train.py (protected) calls, once per run,

    estimate_ite(X_train, treatment_train, y_train, X_eval, config) -> np.ndarray

X_* are pandas DataFrames of the 20 covariates (float columns), treatment_train a 0/1 int array,
y_train the observed (factual) outcome, config the dict in config.json. Return one estimated
individual treatment effect, E[Y(1) - Y(0) | x], per row of X_eval.

The baseline reproduces causalml.inference.tf.DragonNet as the original task calls it
(neurons_per_layer=200, targeted_reg=True, val_split=0.3, the other arguments at causalml's
defaults): a shared three-layer ELU representation, a propensity head, two outcome heads with L2
penalties, summed squared-error + binary cross-entropy loss plus targeted regularisation, trained
first with Adam (early stopping on the held-out 30%) and then with Nesterov SGD. Like Keras'
``validation_split``, the held-out part is the last rows of the training data. Everything here may
change: the architecture, the loss, the training schedule, or a different estimator altogether
(causalml's meta-learners, e.g. causalml.inference.meta.BaseXRegressor, are installed).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
import torch.nn as nn


class EpsilonLayer(nn.Module):
    """The single trainable epsilon of targeted regularisation, broadcast to one per row."""

    def __init__(self):
        super().__init__()
        self.epsilon = nn.Parameter(torch.randn(1, 1) * 0.05)  # Keras' RandomNormal(stddev=0.05)

    def forward(self, t_pred: torch.Tensor) -> torch.Tensor:
        return self.epsilon * torch.ones_like(t_pred)


def _dense(n_in: int, n_out: int, random_normal: bool = False) -> nn.Linear:
    layer = nn.Linear(n_in, n_out)
    if random_normal:  # Keras "RandomNormal" kernel initialiser
        nn.init.normal_(layer.weight, std=0.05)
    else:  # Keras' default glorot_uniform
        nn.init.xavier_uniform_(layer.weight)
    nn.init.zeros_(layer.bias)
    return layer


class DragonNetModule(nn.Module):
    def __init__(self, input_dim: int, neurons: int):
        super().__init__()
        half = neurons // 2
        self.representation = nn.Sequential(
            _dense(input_dim, neurons, random_normal=True), nn.ELU(),
            _dense(neurons, neurons, random_normal=True), nn.ELU(),
            _dense(neurons, neurons, random_normal=True), nn.ELU(),
        )
        self.t_head = _dense(neurons, 1)
        self.y0_head = nn.Sequential(_dense(neurons, half), nn.ELU(), _dense(half, half), nn.ELU(), _dense(half, 1))
        self.y1_head = nn.Sequential(_dense(neurons, half), nn.ELU(), _dense(half, half), nn.ELU(), _dense(half, 1))
        self.epsilon = EpsilonLayer()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        phi = self.representation(x)
        t_pred = torch.sigmoid(self.t_head(phi)).squeeze(1)
        return self.y0_head(phi).squeeze(1), self.y1_head(phi).squeeze(1), t_pred, self.epsilon(t_pred)

    def l2_penalty(self) -> torch.Tensor:
        """Keras' l2(reg) kernel regulariser on the outcome heads: sum of squared kernel weights."""
        return sum((m.weight ** 2).sum() for head in (self.y0_head, self.y1_head)
                   for m in head if isinstance(m, nn.Linear))


def dragonnet_loss(y, t, y0, y1, t_pred, eps, targeted_reg: bool, ratio: float) -> torch.Tensor:
    """causalml's dragonnet_loss_binarycross (+ make_tarreg_loss), summed over the batch."""
    regression = ((1 - t) * (y - y0) ** 2).sum() + (t * (y - y1) ** 2).sum()
    t_clipped = (t_pred + 0.001) / 1.002
    classification = nn.functional.binary_cross_entropy(t_clipped, t, reduction="sum")
    loss = regression + classification
    if targeted_reg:
        t_tar = (t_pred + 0.01) / 1.02
        y_pred = t * y1 + (1 - t) * y0
        h = t / t_tar - (1 - t) / (1 - t_tar)
        loss = loss + ratio * ((y - (y_pred + eps * h)) ** 2).sum()
    return loss


class DragonNet:
    def __init__(self, config: dict):
        self.c = config

    def _loss(self, model, x, t, y) -> torch.Tensor:
        y0, y1, t_pred, eps = model(x)
        return dragonnet_loss(y, t, y0, y1, t_pred, eps, bool(self.c["targeted_reg"]), float(self.c["ratio"]))

    def _phase(self, model, optimizer, data, epochs: int, patience: int, min_delta: float) -> None:
        """Keras-style fit: shuffled mini-batches, EarlyStopping(val_loss) without restoring the best
        weights, ReduceLROnPlateau(loss, factor 0.5, patience 5)."""
        (x_tr, t_tr, y_tr), (x_va, t_va, y_va) = data
        batch = int(self.c["batch_size"])
        best_val, waited = np.inf, 0
        best_loss, lr_waited = np.inf, 0
        for _ in range(epochs):
            model.train()
            order = torch.randperm(len(x_tr), generator=self.generator)
            losses = []
            for start in range(0, len(order), batch):
                idx = order[start:start + batch]
                optimizer.zero_grad()
                loss = self._loss(model, x_tr[idx], t_tr[idx], y_tr[idx])
                loss = loss + float(self.c["reg_l2"]) * model.l2_penalty()
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
            if not np.all(np.isfinite(losses)):  # TerminateOnNaN
                break
            epoch_loss = float(np.mean(losses))
            if epoch_loss < best_loss - 1e-8:
                best_loss, lr_waited = epoch_loss, 0
            else:
                lr_waited += 1
                if lr_waited >= 5:
                    for group in optimizer.param_groups:
                        group["lr"] *= 0.5
                    lr_waited = 0
            if len(x_va) == 0:
                continue
            model.eval()
            with torch.no_grad():
                val_loss = float(np.mean([
                    (self._loss(model, x_va[s:s + batch], t_va[s:s + batch], y_va[s:s + batch])
                     + float(self.c["reg_l2"]) * model.l2_penalty()).item()
                    for s in range(0, len(x_va), batch)
                ]))
            if val_loss < best_val - min_delta:
                best_val, waited = val_loss, 0
            else:
                waited += 1
                if waited >= patience:
                    break

    def fit(self, X: np.ndarray, treatment: np.ndarray, y: np.ndarray) -> DragonNet:
        torch.manual_seed(int(self.c["seed"]))
        self.generator = torch.Generator().manual_seed(int(self.c["seed"]))
        x = torch.tensor(X, dtype=torch.float32)
        t = torch.tensor(treatment, dtype=torch.float32)
        y = torch.tensor(y, dtype=torch.float32)
        n_val = int(len(x) * float(self.c["val_split"]))
        cut = len(x) - n_val  # Keras' validation_split takes the last rows, before any shuffling
        data = ((x[:cut], t[:cut], y[:cut]), (x[cut:], t[cut:], y[cut:]))

        self.model = DragonNetModule(x.shape[1], int(self.c["neurons_per_layer"]))
        if self.c["use_adam"]:
            adam = torch.optim.Adam(self.model.parameters(), lr=float(self.c["adam_learning_rate"]))
            self._phase(self.model, adam, data, int(self.c["adam_epochs"]), patience=2, min_delta=0.0)
        sgd = torch.optim.SGD(self.model.parameters(), lr=float(self.c["learning_rate"]),
                              momentum=float(self.c["momentum"]), nesterov=True)
        self._phase(self.model, sgd, data, int(self.c["epochs"]), patience=40, min_delta=0.0)
        return self

    def predict_tau(self, X: np.ndarray) -> np.ndarray:
        self.model.eval()
        with torch.no_grad():
            y0, y1, _, _ = self.model(torch.tensor(X, dtype=torch.float32))
        return (y1 - y0).numpy()


def estimate_ite(X_train: pd.DataFrame, treatment_train: np.ndarray, y_train: np.ndarray,
                 X_eval: pd.DataFrame, config: dict) -> np.ndarray:
    model = DragonNet(config).fit(X_train.to_numpy(dtype=np.float32), treatment_train, y_train)
    return model.predict_tau(X_eval.to_numpy(dtype=np.float32))

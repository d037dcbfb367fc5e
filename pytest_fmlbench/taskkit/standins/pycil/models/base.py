"""What every learner shares: a rehearsal memory chosen by herding, class means of exemplars, CNN and NME scoring."""

import numpy as np
import torch
from scipy.spatial.distance import cdist
from torch.utils.data import DataLoader

from utils.toolkit import accuracy, tensor2numpy

EPSILON = 1e-8
batch_size = 64


def _unit(vectors):
    return vectors / (np.linalg.norm(vectors, axis=-1, keepdims=True) + EPSILON)


class BaseLearner:
    def __init__(self, args):
        self.args = args
        self._cur_task = -1
        self._known_classes = 0
        self._total_classes = 0
        self._network = None
        self._old_network = None
        self._data_memory, self._targets_memory = np.array([]), np.array([])
        self.topk = 5
        self._memory_size = args["memory_size"]
        self._device = args["device"][0]
        self._multiple_gpus = args["device"]

    @property
    def exemplar_size(self):
        return len(self._targets_memory)

    @property
    def samples_per_class(self):
        return self._memory_size // self._total_classes

    @property
    def feature_dim(self):
        return self._network.feature_dim

    def after_task(self):
        pass

    def _get_memory(self):
        return None if len(self._data_memory) == 0 else (self._data_memory, self._targets_memory)

    def eval_task(self):
        y_pred, y_true = self._eval_cnn(self.test_loader)
        cnn_accy = self._evaluate(y_pred, y_true)
        nme_accy = None
        if hasattr(self, "_class_means"):
            y_pred, y_true = self._eval_nme(self.test_loader, self._class_means)
            nme_accy = self._evaluate(y_pred, y_true)
        return cnn_accy, nme_accy

    def _evaluate(self, y_pred, y_true):
        grouped = accuracy(y_pred.T[0], y_true, self._known_classes)
        return {"grouped": grouped, "top1": grouped["total"]}

    def _compute_accuracy(self, model, loader):
        model.eval()
        correct, total = 0, 0
        with torch.no_grad():
            for _, inputs, targets in loader:
                predicts = model(inputs.to(self._device))["logits"].argmax(dim=1).cpu()
                correct += int((predicts == targets).sum())
                total += len(targets)
        return np.around(correct * 100 / total, decimals=2)

    def _eval_cnn(self, loader):
        self._network.eval()
        y_pred, y_true = [], []
        with torch.no_grad():
            for _, inputs, targets in loader:
                logits = self._network(inputs.to(self._device))["logits"]
                y_pred.append(torch.topk(logits, k=self.topk, dim=1)[1].cpu().numpy())
                y_true.append(np.asarray(targets))
        return np.concatenate(y_pred), np.concatenate(y_true)

    def _eval_nme(self, loader, class_means):
        vectors, y_true = self._extract_vectors(loader)
        distances = cdist(class_means, _unit(vectors), "sqeuclidean").T
        return np.argsort(distances, axis=1)[:, : self.topk], y_true

    def _extract_vectors(self, loader):
        self._network.eval()
        vectors, targets = [], []
        with torch.no_grad():
            for _, inputs, labels in loader:
                vectors.append(tensor2numpy(self._network.extract_vector(inputs.to(self._device))))
                targets.append(np.asarray(labels))
        return np.concatenate(vectors), np.concatenate(targets)

    def _mean_of(self, data_manager, data, targets):
        dataset = data_manager.get_dataset([], source="train", mode="test", appendent=(data, targets))
        vectors, _ = self._extract_vectors(DataLoader(dataset, batch_size=batch_size, shuffle=False))
        mean = _unit(vectors).mean(axis=0)
        return mean / np.linalg.norm(mean)

    def build_rehearsal_memory(self, data_manager, per_class):
        """Keep the first ``per_class`` exemplars of every old class, herd ``per_class`` of every new one."""
        self._class_means = np.zeros((self._total_classes, self.feature_dim))
        kept_data, kept_targets = [], []
        for class_idx in range(self._known_classes):
            mask = np.flatnonzero(self._targets_memory == class_idx)[:per_class]
            kept_data.append(self._data_memory[mask])
            kept_targets.append(self._targets_memory[mask])
            self._class_means[class_idx] = self._mean_of(data_manager, kept_data[-1], kept_targets[-1])
        for class_idx in range(self._known_classes, self._total_classes):
            data, targets, dataset = data_manager.get_dataset([class_idx], source="train", mode="test", ret_data=True)
            vectors, _ = self._extract_vectors(DataLoader(dataset, batch_size=batch_size, shuffle=False))
            vectors = _unit(vectors)
            target_mean, chosen, running = vectors.mean(axis=0), [], np.zeros(vectors.shape[1])
            for k in range(1, per_class + 1):  # herding: each pick brings the running mean closest to the target
                gaps = np.linalg.norm(target_mean - (running + vectors) / k, axis=1)
                gaps[chosen] = np.inf
                pick = int(np.argmin(gaps))
                chosen.append(pick)
                running += vectors[pick]
            kept_data.append(data[chosen])
            kept_targets.append(np.full(len(chosen), class_idx))
            self._class_means[class_idx] = self._mean_of(data_manager, kept_data[-1], kept_targets[-1])
        self._data_memory, self._targets_memory = np.concatenate(kept_data), np.concatenate(kept_targets)

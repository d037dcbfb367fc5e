"""Domain-generalization algorithms: the stand-in's ERM, with DomainBed's constructor and update signatures."""

import torch
import torch.nn.functional as F

from domainbed import networks

ALGORITHMS = ["ERM"]


def get_algorithm_class(algorithm_name):
    if algorithm_name not in globals():
        raise NotImplementedError(f"Algorithm not found: {algorithm_name}")
    return globals()[algorithm_name]


class Algorithm(torch.nn.Module):
    """update(minibatches, unlabeled=None) takes one (x, y) pair per training environment; predict(x) gives logits."""

    def __init__(self, input_shape, num_classes, num_domains, hparams):
        super().__init__()
        self.hparams = hparams

    def update(self, minibatches, unlabeled=None):
        raise NotImplementedError

    def predict(self, x):
        raise NotImplementedError


class ERM(Algorithm):
    """Empirical risk minimisation over the pooled training environments."""

    def __init__(self, input_shape, num_classes, num_domains, hparams):
        super().__init__(input_shape, num_classes, num_domains, hparams)
        self.featurizer = networks.Featurizer(input_shape, self.hparams)
        self.classifier = networks.Classifier(self.featurizer.n_outputs, num_classes,
                                              self.hparams["nonlinear_classifier"])
        self.network = torch.nn.Sequential(self.featurizer, self.classifier)
        self.optimizer = torch.optim.Adam(self.network.parameters(), lr=self.hparams["lr"],
                                          weight_decay=self.hparams["weight_decay"])

    def update(self, minibatches, unlabeled=None):
        x = torch.cat([x for x, _ in minibatches])
        y = torch.cat([y for _, y in minibatches])
        loss = F.cross_entropy(self.predict(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return {"loss": loss.item()}

    def predict(self, x):
        return self.network(x)

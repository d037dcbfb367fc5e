"""What lets a classifier learn continually: Synaptic Intelligence (Zenke et al., 2017), the stand-in's.

Along each context's training path every parameter accumulates its contribution to the drop in loss
(minus gradient times step); at the context's end that sum, divided by the squared total change plus epsilon,
is added to the parameter's importance omega. Later contexts pay omega times the squared distance from the
parameters' values at the end of the previous context."""

import abc

import torch
from torch import nn


class ContinualLearner(nn.Module, metaclass=abc.ABCMeta):
    def __init__(self):
        super().__init__()
        self.optimizer, self.optim_type, self.optim_list = None, "adam", []
        self.scenario, self.classes_per_context, self.singlehead, self.neg_samples = "task", 2, False, "all"
        self.replay_mode, self.replay_targets, self.KD_temp, self.use_replay = "none", "hard", 2., "normal"
        self.eps_agem, self.lwf_weighting = 0., False
        self.mask_dict, self.excit_buffer_list = None, []
        self.weight_penalty, self.reg_strength, self.precondition, self.alpha = False, 0, False, 1e-10
        self.importance_weighting, self.epsilon = "fisher", 0.1

    def _device(self):
        return next(self.parameters()).device

    def _is_on_cuda(self):
        return next(self.parameters()).is_cuda

    def _trained(self):
        return [(name.replace(".", "__"), p) for name, p in self.named_parameters() if p.requires_grad]

    def register_starting_param_values(self):
        for name, p in self._trained():
            self.register_buffer(f"{name}_SI_prev_context", p.detach().clone())

    def prepare_importance_estimates_dicts(self):
        path = {name: torch.zeros_like(p) for name, p in self._trained()}
        before = {name: p.detach().clone() for name, p in self._trained()}
        return path, before

    def update_importance_estimates(self, path, before):
        for name, p in self._trained():
            if p.grad is not None:
                path[name].add_(-p.grad * (p.detach() - before[name]))
            before[name] = p.detach().clone()

    def update_omega(self, path, epsilon):
        for name, p in self._trained():
            change = p.detach() - getattr(self, f"{name}_SI_prev_context")
            omega = path[name] / (change ** 2 + epsilon)
            if hasattr(self, f"{name}_SI_omega"):
                omega = omega + getattr(self, f"{name}_SI_omega")
            self.register_buffer(f"{name}_SI_omega", omega)
            self.register_buffer(f"{name}_SI_prev_context", p.detach().clone())

    def surrogate_loss(self):
        terms = [(getattr(self, f"{name}_SI_omega") * (p - getattr(self, f"{name}_SI_prev_context")) ** 2).sum()
                 for name, p in self._trained() if hasattr(self, f"{name}_SI_omega")]
        return sum(terms) if terms else torch.zeros((), device=self._device())

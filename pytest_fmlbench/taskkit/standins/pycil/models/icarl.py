"""iCaRL: cross-entropy on new classes and exemplars, distillation from the previous session's network,
nearest-mean-of-exemplars scoring (the stand-in's, with the module-level hyper-parameters PyCIL's has)."""

import logging

import numpy as np
import torch
from torch import optim
from torch.nn import functional as F
from torch.utils.data import DataLoader

from models.base import BaseLearner
from utils.inc_net import IncrementalNet

init_epoch = 200
init_lr = 0.1
init_milestones = [60, 120, 170]
init_lr_decay = 0.1
init_weight_decay = 0.0005

epochs = 170
lrate = 0.1
milestones = [80, 120]
lrate_decay = 0.1
batch_size = 128
weight_decay = 2e-4
num_workers = 8
T = 2


class iCaRL(BaseLearner):
    def __init__(self, args):
        super().__init__(args)
        self._network = IncrementalNet(args, False)

    def after_task(self):
        self._old_network = self._network.copy().freeze()
        self._known_classes = self._total_classes

    def incremental_train(self, data_manager):
        self._cur_task += 1
        self._total_classes = self._known_classes + data_manager.get_task_size(self._cur_task)
        self._network.update_fc(self._total_classes)
        logging.info("Learning on %d-%d", self._known_classes, self._total_classes)
        train_dataset = data_manager.get_dataset(np.arange(self._known_classes, self._total_classes),
                                                 source="train", mode="train", appendent=self._get_memory())
        self.train_loader = DataLoader(train_dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers)
        test_dataset = data_manager.get_dataset(np.arange(0, self._total_classes), source="test", mode="test")
        self.test_loader = DataLoader(test_dataset, batch_size=batch_size, shuffle=False, num_workers=num_workers)
        self._train(self.train_loader, self.test_loader)
        self.build_rehearsal_memory(data_manager, self.samples_per_class)

    def _train(self, train_loader, test_loader):
        self._network.to(self._device)
        first = self._cur_task == 0
        optimizer = optim.SGD(self._network.parameters(), momentum=0.9, lr=init_lr if first else lrate,
                              weight_decay=init_weight_decay if first else weight_decay)
        scheduler = optim.lr_scheduler.MultiStepLR(optimizer, milestones=init_milestones if first else milestones,
                                                   gamma=init_lr_decay if first else lrate_decay)
        for epoch in range(init_epoch if first else epochs):
            self._network.train()
            losses = 0.0
            for _, inputs, targets in train_loader:
                inputs, targets = inputs.to(self._device), targets.to(self._device)
                logits = self._network(inputs)["logits"]
                loss = F.cross_entropy(logits, targets)
                if self._old_network is not None:
                    loss = loss + _KD_loss(logits[:, : self._known_classes], self._old_network(inputs)["logits"], T)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses += loss.item()
            scheduler.step()
            logging.info("Task %d, Epoch %d => Loss %.3f, Test_accy %.2f", self._cur_task, epoch + 1,
                         losses / len(train_loader), self._compute_accuracy(self._network, test_loader))


def _KD_loss(pred, soft, T):
    pred = torch.log_softmax(pred / T, dim=1)
    soft = torch.softmax(soft / T, dim=1)
    return -(soft * pred).sum() / pred.shape[0]

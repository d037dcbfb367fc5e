"""The stand-in's trainer: privacy meter's train() signature, plain SGD over the loader for a few epochs."""

import torch
from torch import nn


def train(model, train_loader, configs, test_loader=None):
    """Train ``model`` on ``train_loader`` as ``configs`` says (device, optimizer, learning_rate, weight_decay,
    momentum, epochs) and return it on the CPU; ``test_loader`` only reports accuracy when given."""
    device = configs.get("device", "cpu")
    model = model.to(device)
    optimizer = get_optimizer(model, configs)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(configs.get("epochs", 1)):
        model.train()
        seen, correct = 0, 0
        for data, target in train_loader:
            data, target = data.to(device), target.to(device).long()
            optimizer.zero_grad(set_to_none=True)
            output = model(data)
            loss_fn(output, target).backward()
            optimizer.step()
            seen += len(target)
            correct += int((output.argmax(dim=1) == target).sum())
        print(f"Epoch [{epoch + 1}/{configs.get('epochs', 1)}] | Train Acc: {correct / max(seen, 1):.4f}")
        if test_loader is not None:
            print(f"Test Acc: {inference(model, test_loader, device)[1]:.4f}")
    return model.to("cpu")


def inference(model, loader, device):
    """(mean loss, accuracy) of ``model`` on ``loader``."""
    model.eval().to(device)
    loss_fn = nn.CrossEntropyLoss(reduction="sum")
    total, correct, seen = 0.0, 0, 0
    with torch.no_grad():
        for data, target in loader:
            data, target = data.to(device), target.to(device).long()
            output = model(data)
            total += float(loss_fn(output, target))
            correct += int((output.argmax(dim=1) == target).sum())
            seen += len(target)
    return total / max(seen, 1), correct / max(seen, 1)


def get_optimizer(model, configs):
    name = configs.get("optimizer", "SGD")
    if name != "SGD":
        raise NotImplementedError(f"the stand-in knows SGD only, not {name}")
    return torch.optim.SGD(model.parameters(), lr=configs.get("learning_rate", 0.001),
                           weight_decay=configs.get("weight_decay", 0.0), momentum=configs.get("momentum", 0.0))

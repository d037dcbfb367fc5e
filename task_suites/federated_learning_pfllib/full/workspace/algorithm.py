"""The federated method (editable): FedAvg (McMahan et al., 2017) with PFLlib's FedAvgCNN, the original's baseline.

Every round each selected client copies the global model, runs one epoch of plain SGD (lr 0.005, batches of 10)
over its own training images, and sends its weights back with its number of images; the server replaces the
global model by the average of the clients' weights, each weighted by its share of the images.

train.py uses: get_fl_config() -> dict (global_rounds, local_epochs, lr, batch_size, join_ratio, num_clients,
num_classes: num_clients must stay 20); get_model(num_classes); FLClient(client_id, train_data, device) with
set_model(global_state) and local_train() -> (state_dict, weight); FLServer(device) with global_model,
get_global_state(), aggregate(client_states, client_weights) and evaluate(datasets) -> per-client accuracies.
train_data is a TensorDataset of float32 images (n, 3, 32, 32), normalised to [-1, 1], and int64 labels.
"""

import copy

import torch
from torch import nn
from torch.utils.data import DataLoader


def get_fl_config():
    return {
        "global_rounds": 100,
        "local_epochs": 1,
        "lr": 0.005,
        "batch_size": 10,
        "join_ratio": 1.0,
        "num_clients": 20,
        "num_classes": 10,
    }


class FedAvgCNN(nn.Module):
    """PFLlib's FedAvgCNN for 32x32 RGB: two 5x5 convolutions (32 and 64 channels) each followed by ReLU and 2x2
    max pooling, a 512-unit hidden layer and a linear head (1600 features reach the hidden layer)."""

    def __init__(self, in_features=3, num_classes=10, dim=1600):
        super().__init__()
        self.conv1 = nn.Sequential(nn.Conv2d(in_features, 32, kernel_size=5), nn.ReLU(inplace=True), nn.MaxPool2d(2))
        self.conv2 = nn.Sequential(nn.Conv2d(32, 64, kernel_size=5), nn.ReLU(inplace=True), nn.MaxPool2d(2))
        self.fc1 = nn.Sequential(nn.Linear(dim, 512), nn.ReLU(inplace=True))
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        return self.fc(self.fc1(torch.flatten(self.conv2(self.conv1(x)), 1)))


def get_model(num_classes=10):
    return FedAvgCNN(in_features=3, num_classes=num_classes, dim=1600)


class FLClient:
    def __init__(self, client_id, train_data, device="cuda"):
        self.client_id, self.train_data, self.device = client_id, train_data, device
        self.model = None

    def set_model(self, global_model_state):
        if self.model is None:
            self.model = get_model().to(self.device)
        self.model.load_state_dict(copy.deepcopy(global_model_state))

    def local_train(self):
        config = get_fl_config()
        self.model.train()
        optimizer = torch.optim.SGD(self.model.parameters(), lr=config["lr"])
        loss_fn = nn.CrossEntropyLoss()
        for _ in range(config["local_epochs"]):
            for x, y in DataLoader(self.train_data, batch_size=config["batch_size"], shuffle=True):
                x, y = x.to(self.device), y.to(self.device)
                optimizer.zero_grad()
                loss_fn(self.model(x), y).backward()
                optimizer.step()
        return self.model.state_dict(), len(self.train_data)


class FLServer:
    def __init__(self, device="cuda"):
        self.device = device
        self.global_model = get_model().to(device)

    def get_global_state(self):
        return self.global_model.state_dict()

    def aggregate(self, client_states, client_weights):
        """Each weight the average of the clients' values, weighted by their shares of the training images."""
        total = sum(client_weights)
        averaged = {key: sum(state[key].float() * (weight / total) for state, weight in zip(client_states, client_weights))
                    for key in self.global_model.state_dict()}
        self.global_model.load_state_dict(averaged)

    def evaluate(self, test_data_list):
        """The global model's accuracy on each non-empty data set."""
        self.global_model.eval()
        accuracies = []
        with torch.no_grad():
            for data in test_data_list:
                if len(data) == 0:
                    continue
                correct = 0
                for x, y in DataLoader(data, batch_size=64, shuffle=False):
                    correct += (self.global_model(x.to(self.device)).argmax(1) == y.to(self.device)).sum().item()
                accuracies.append(correct / len(data))
        return accuracies

"""The stand-in's DragonNet: DragonNet's constructor arguments and methods, a small Keras model behind them."""

import numpy as np
from tensorflow.keras import Input, Model
from tensorflow.keras.layers import Concatenate, Dense
from tensorflow.keras.optimizers import SGD, Adam

from causalml.inference.tf.utils import combined_loss


class DragonNet:
    def __init__(self, neurons_per_layer=200, targeted_reg=True, ratio=1.0, val_split=0.2, batch_size=64,
                 epochs=100, learning_rate=1e-5, momentum=0.9, reg_l2=0.01, use_adam=True, adam_epochs=30,
                 adam_learning_rate=1e-3, loss_func=combined_loss, verbose=True):
        self.neurons_per_layer, self.val_split, self.batch_size = neurons_per_layer, val_split, batch_size
        self.epochs, self.learning_rate, self.momentum = epochs, learning_rate, momentum
        self.use_adam, self.adam_epochs, self.adam_learning_rate = use_adam, adam_epochs, adam_learning_rate
        self.loss_func, self.verbose = loss_func, verbose
        self.model = None

    def _build(self, n_features):
        inputs = Input(shape=(n_features,))
        shared = Dense(self.neurons_per_layer, activation="elu")(inputs)
        heads = [Dense(1)(Dense(self.neurons_per_layer // 2, activation="elu")(shared)) for _ in range(2)]
        propensity = Dense(1, activation="sigmoid")(shared)
        return Model(inputs=inputs, outputs=Concatenate(axis=1)([*heads, propensity]))

    def fit(self, X, treatment, y, p=None):
        X, treatment, y = (np.asarray(v, dtype="float32") for v in (X, treatment, y))
        target = np.column_stack([y, treatment])
        self.model = self._build(X.shape[1])
        phases = [(Adam(learning_rate=self.adam_learning_rate), self.adam_epochs)] if self.use_adam else []
        phases.append((SGD(learning_rate=self.learning_rate, momentum=self.momentum, nesterov=True), self.epochs))
        for optimizer, epochs in phases:
            self.model.compile(optimizer=optimizer, loss=self.loss_func)
            self.model.fit(X, target, validation_split=self.val_split, epochs=epochs, batch_size=self.batch_size,
                           verbose=self.verbose)

    def predict(self, X, treatment=None, y=None, p=None):
        return self.model.predict(np.asarray(X, dtype="float32"), verbose=0)

    def predict_tau(self, X):
        prediction = self.predict(X)
        return (prediction[:, 1] - prediction[:, 0]).reshape(-1, 1)

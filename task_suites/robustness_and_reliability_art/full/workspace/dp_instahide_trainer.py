"""The defence (editable): the trainer class train.py builds, as the original's target file
art/defences/trainer/dp_instahide_trainer.py.

train.py calls, for each of the five poisoned pools:

    DPInstaHideTrainer(classifier=..., augmentations=Mixup(num_classes=10, num_mix=2), noise="laplacian",
                       scale=0.3, clip_values=(0, 1)).fit(x, y, nb_epochs=5, batch_size=128)

with x float32 (N, 1, 28, 28) in [0, 1] and y one-hot (N, 10), poisons unmarked; `classifier` is ART's
PyTorchClassifier around model.py's network, which train.py then uses to classify. The baseline is ART's
own DP-InstaHide trainer (Mixup, then additive noise, one optimiser step per batch). You may override
or replace any of it (the constructor's arguments are fixed by train.py, their use is yours): filter or
relabel suspicious examples, detect poisons (e.g. art.defences.detector.poison), change the augmentation
or the noise, train differently, compose defences.
"""

from art.defences.trainer import DPInstaHideTrainer as _ARTDPInstaHideTrainer


class DPInstaHideTrainer(_ARTDPInstaHideTrainer):
    """ART 1.20.1's DPInstaHideTrainer, unchanged."""

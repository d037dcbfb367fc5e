"""Pristine helpers shared by the tasks' harnesses (prepare/evaluate); a workspace never imports them.

``cifar`` reads CIFAR-10/100's pickled batches from the verified archive; ``mnist`` reads Keras's
``mnist.npz`` (and writes its fixture); ``splits`` carves the hidden test split as the original does;
``stratified`` cuts a labelled set per class, as some originals carve theirs;
``dp`` recomputes a DP-SGD run's epsilon from its recorded configuration; ``officehome`` lists
OfficeHome's archive in DomainBed's order (and writes its fixture); ``checkpoint`` writes a ``.pth``
state dict fixture for published weights; ``adult`` reads OpenML's Adult ARFF as ``fetch_openml`` frames it
(and writes its fixture); ``compas`` prepares ProPublica's COMPAS file with AIF360's code from its checkout (and
writes its fixture); ``probe_accuracy`` scores the full representation-learning tasks' linear probes; ``fixtures``
writes small stand-ins in the upstream formats for ``--scale=smoke``.

The small tasks' code shared between tasks, or between a harness and its workspace: ``shapes`` (synthetic
object images), ``cifar_resnet`` (the representation-learning backbones), ``linear_probe`` (their
evaluator), ``batched_views`` and ``ssl_pretraining`` (their workspaces' augmentations and loop),
``class_incremental`` (the continual-learning evaluators' checks), ``session_audit`` (what a continual
learner keeps), ``data_guard`` (the data tripwire), ``digit_convnets`` (privacy_privacymeter's networks),
``few_shot_episodes`` (data_efficiency_easyfsl's episodes). A workspace that needs one receives a copy of
its source (task.yaml's ``kit``). The package is visible inside the experiment's sandbox: nothing here may
hold a seed or anything else that rebuilds hidden data; that stays in each task's harness/.
"""

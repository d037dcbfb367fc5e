"""Pristine helpers shared by the full-profile tasks' harnesses (prepare/evaluate), never by the workspace.

``cifar`` reads CIFAR-10/100's pickled batches from the verified archive; ``mnist`` reads Keras's
``mnist.npz`` (and writes its fixture); ``splits`` carves the hidden test split as the original does;
``stratified`` cuts a labelled set per class, as some originals carve theirs;
``dp`` recomputes a DP-SGD run's epsilon from its recorded configuration; ``officehome`` lists
OfficeHome's archive in DomainBed's order (and writes its fixture); ``checkpoint`` writes a ``.pth``
state dict fixture for published weights; ``adult`` reads OpenML's Adult ARFF as ``fetch_openml`` frames it
(and writes its fixture); ``compas`` prepares ProPublica's COMPAS file with AIF360's code from its checkout (and
writes its fixture); ``fixtures``
writes small stand-ins in the upstream formats for ``--scale=smoke``.
"""

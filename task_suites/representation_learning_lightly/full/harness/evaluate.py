"""Score one run's linear probe: the top-1 accuracy of its predictions, with labels from PRIVATE only, in the
original's layout {"cifar10_linear_probing": {"means": {"test_acc_mean"}}} (on the val split, the val accuracy
under the same key, as the original). The scoring is taskkit.probe_accuracy's, shared with solo-learn's task."""

from pytest_fmlbench.taskkit.probe_accuracy import score

if __name__ == "__main__":
    score("cifar10_linear_probing", "test_acc_mean", num_classes=10)

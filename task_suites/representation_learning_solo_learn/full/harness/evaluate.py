"""Score one run's linear probe: the top-1 accuracy of its predictions, with labels from PRIVATE only, in the
original's layout {"cifar100_ssl": {"means": {"linear_eval_acc_mean"}}} (on the val split, the val accuracy
under the same key, as the original). The scoring is taskkit.probe_accuracy's, shared with lightly's task."""

from pytest_fmlbench.taskkit.probe_accuracy import score

if __name__ == "__main__":
    score("cifar100_ssl", "linear_eval_acc_mean", num_classes=100)

import numpy as np

from pytest_fmlbench.evalkit import harness_args

TEST_SEED = 424242  # lives only in harness/


def blobs(seed, n):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    X = rng.normal(size=(n, 5)) + y[:, None] * 0.9
    return X, y


args = harness_args()
if args.split == "val":
    X, y = blobs(7, 400)
    (args.workspace / "data").mkdir(exist_ok=True)
    np.savez(args.workspace / "data" / "dev.npz", X=X, y=y)
    np.save(args.private / "dev_labels.npy", y)
else:
    X, y = blobs(TEST_SEED, 300)
    np.savez(args.out / "test_inputs.npz", X=X)
    np.save(args.private / "test_labels.npy", y)

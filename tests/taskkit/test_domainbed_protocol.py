"""taskkit.domainbed: DomainBed's ColoredMNIST and holdout splits, as its train.py builds them."""

import numpy as np

from pytest_fmlbench.taskkit import domainbed


def test_seed_hash_is_domainbeds():
    # misc.seed_hash(0, env) at DomainBed b93c22a, the seeds of the three environments' holdout splits
    assert [domainbed.seed_hash(0, env) for env in range(3)] == [894182419, 1514274641, 1325548499]


def test_holdout_split_cuts_30_percent_out_with_the_environments_seed():
    out, kept = domainbed.holdout_split(23333, 2)
    assert (len(out), len(kept)) == (6999, 16334)
    assert sorted(np.concatenate([out, kept]).tolist()) == list(range(23333))
    keys = list(range(23333))
    np.random.RandomState(1325548499).shuffle(keys)
    assert out.tolist() == keys[:6999]
    assert not np.array_equal(domainbed.holdout_split(23333, 1)[0], out)


def test_colored_mnist_has_the_papers_shift():
    rng = np.random.default_rng(3)
    digits = rng.integers(0, 256, size=(30000, 28, 28)).astype(np.uint8)
    labels = rng.integers(0, 10, size=30000)
    environments = domainbed.colored_mnist(digits, labels)
    assert [len(y) for _, y in environments] == [10000, 10000, 10000]
    for (images, binary), flip in zip(environments, domainbed.COLORED_MNIST_FLIPS):
        assert images.shape == (10000, 2, 28, 28) and images.dtype == np.uint8 and set(np.unique(binary)) <= {0, 1}
        red, green = images[:, 0].reshape(len(images), -1), images[:, 1].reshape(len(images), -1)
        assert np.all((red == 0).all(1) | (green == 0).all(1))  # one channel zeroed per image
        colour = (green.sum(1) > 0).astype(int)  # the colour-th channel carries the digit, the other is zeroed
        assert abs(np.mean(colour != binary) - flip) < 0.015
    # the same draws every time (torch's CPU generator, seeded as DomainBed's train.py seeds it)
    again = domainbed.colored_mnist(digits, labels)
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(environments, again))


def test_the_label_noise_is_a_quarter():
    digits = np.zeros((30000, 28, 28), dtype=np.uint8)
    labels = np.arange(30000) % 10
    environments = domainbed.colored_mnist(digits, labels)
    order_free = np.concatenate([y for _, y in environments])
    # digits below 5 are half of them: a quarter flipped keeps the positive rate at one half
    assert abs(order_free.mean() - 0.5) < 0.01

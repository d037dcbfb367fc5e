"""Losses of the stand-in's three-headed network; predictions are (y0, y1, propensity) per row, targets
(y, treatment)."""

import tensorflow as tf


def outcome_loss(target, prediction):
    """Squared error of the head of the arm each unit received."""
    y, t = target[:, 0], target[:, 1]
    factual = t * prediction[:, 1] + (1.0 - t) * prediction[:, 0]
    return tf.reduce_sum(tf.square(y - factual))


def propensity_loss(target, prediction):
    """Binary cross-entropy of the treatment head, kept away from 0 and 1."""
    t, p = target[:, 1], tf.clip_by_value(prediction[:, 2], 1e-3, 1 - 1e-3)
    return -tf.reduce_sum(t * tf.math.log(p) + (1.0 - t) * tf.math.log(1.0 - p))


def combined_loss(target, prediction):
    return outcome_loss(target, prediction) + propensity_loss(target, prediction)

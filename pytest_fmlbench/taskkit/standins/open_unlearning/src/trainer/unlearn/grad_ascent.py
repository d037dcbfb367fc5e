"""Stand-in: the gradient-ascent objective, in the place open-unlearning keeps its trainers."""


def grad_ascent_loss(model, forget_inputs):
    """The forget batch's language-model loss, negated: minimising it climbs the forget loss."""
    return -model(**forget_inputs).loss

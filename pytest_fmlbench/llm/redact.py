"""Keeping API keys out of everything written: messages, logs, records."""

from __future__ import annotations

import logging
import re

# shapes of provider keys, as a second line of defence behind the exact values we know
_KEY_SHAPES = re.compile(
    r"(sk-[A-Za-z0-9_\-]{12,}|sk-ant-[A-Za-z0-9_\-]{12,}|AIza[0-9A-Za-z_\-]{20,}|(?<=Bearer )[^\s'\"]{8,})"
)
MASK = "[redacted]"
_known: set[str] = set()


def register_secret(value: str | None) -> None:
    """Remember a secret so every later ``redact`` masks it (short values would mask ordinary words)."""
    if value and len(value) >= 6:
        _known.add(value)


def redact(text: str) -> str:
    for secret in sorted(_known, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return _KEY_SHAPES.sub(MASK, text)


class RedactingFilter(logging.Filter):
    """Rewrites log records of the HTTP and SDK loggers, whose debug output may echo request headers."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


_SDK_LOGGERS = ("openai", "anthropic", "httpx", "httpx2", "httpcore", "httpcore2", "fmlbench")
_filter = RedactingFilter()


def guard_loggers() -> None:
    """Filter the SDK loggers and their children (a logger's filters do not see its children's records)."""
    names = set(_SDK_LOGGERS) | {
        name for name in logging.root.manager.loggerDict
        if any(name.startswith(prefix + ".") for prefix in _SDK_LOGGERS)
    }
    for name in names:
        logger = logging.getLogger(name)
        if _filter not in logger.filters:
            logger.addFilter(_filter)

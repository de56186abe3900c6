"""Errors that end a command with a one-line message instead of a traceback."""

from __future__ import annotations


class UsageError(Exception):
    """A mistake of the user's (bad arguments, bad targets file): exit status 2."""

    exit_code = 2


class ConfigError(UsageError):
    """A targets file that cannot be used; the message names the file and line."""

"""Errors a user can cause and fix; the CLI prints them as one line without a traceback."""


class UserError(Exception):
    """Bad file, bad option, unsupported model: the message says what was wrong and what to do."""

"""Stopping on a signal (lowest layer): SIGINT and SIGTERM become `Stopped`, never inside a write.

Schedulers, containers and pre-emptible machines stop a process with SIGTERM, a user with Ctrl-C (SIGINT).
`handling_signals` (around a command, `structattn.cli`) turns both into the exception `Stopped`
(a ``KeyboardInterrupt``), so ``finally`` blocks and context managers clean up as they do for Ctrl-C, and the
command line prints one line and exits with ``128 + signal number`` (130, 143).

A signal must not cut a write in two: torch's writer interrupted inside ``torch.save`` raises its own error on
top of the ``KeyboardInterrupt``, and a half-written folder must be removed, not left behind. Code that must
finish once started runs in `deferred`: a signal arriving inside is remembered and raised when the
outermost block ends (after the write was committed). ``deferred(raise_pending=False)`` only remembers it, for a
caller that stops at its own safe point (the training engine after an update, where it saves a checkpoint first;
`pending`, `raise_if_pending`). A signal stays pending until `raise_if_pending` raises it, so that
one raised where a library swallows exceptions (``except:`` around an optional import) is raised again at the next
safe point (the command line after loading its commands, the engine between its phases and after each update).
"""
from __future__ import annotations

import contextlib
import signal
import threading

#: the signals turned into `Stopped`
SIGNALS = (signal.SIGINT, signal.SIGTERM)

_depth = 0  # nesting of deferred() blocks of the main thread
_pending: int | None = None  # a signal received inside one, not raised yet


class Stopped(KeyboardInterrupt):
    """The process was asked to stop by ``signum`` (SIGINT or SIGTERM)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.resumable = False  # set by the code that made sure a rerun of the command continues (a trainer)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_status(self) -> int:
        """``128 + signum``, the shell's convention for a process ended by a signal: 130, 143."""
        return 128 + self.signum

    def message(self) -> str:
        """The line the command prints: ``stopped by SIGTERM; resume with the same command`` where a rerun continues
        (`resumable`); else ``stopped by SIGTERM``, or ``interrupted`` for Ctrl-C."""
        if self.resumable:
            return f"stopped by {self.name}; resume with the same command"
        return "interrupted" if self.signum == signal.SIGINT else f"stopped by {self.name}"


def _handler(signum, frame) -> None:
    global _pending
    _pending = _pending or signum  # kept until raised by raise_if_pending: code that swallows the exception below
    if not _depth:                 # (a bare except around an optional import) does not swallow the signal
        raise Stopped(signum)


@contextlib.contextmanager
def handling_signals():
    """Within the block, SIGINT and SIGTERM raise `Stopped` (outside `deferred` blocks); the previous
    handlers come back after it. A no-op outside the main thread (only it can set handlers)."""
    global _pending
    if not _in_main_thread():
        yield
        return
    previous = {s: signal.signal(s, _handler) for s in SIGNALS}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        _pending = None


def hold() -> None:
    """Start a region a signal does not cut (what `deferred` does on entry); end it with `release`. Only
    the main thread's regions count: the signal is raised there (another thread's write finishes anyway, as
    Python waits for its threads before it exits)."""
    global _depth
    if _in_main_thread():
        _depth += 1


def release(raise_pending: bool = True) -> None:
    """End a `hold` region; with ``raise_pending``, at the outermost one raise a signal received inside."""
    global _depth
    if not _in_main_thread():
        return
    _depth -= 1
    if raise_pending and _depth == 0:
        raise_if_pending()


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def deferred(raise_pending: bool = True):
    """A block that a signal does not cut: the signal is remembered and, with ``raise_pending``, raised as
    `Stopped` when the outermost block ends without another exception (with one, it stays pending)."""
    hold()
    try:
        yield
    except BaseException:
        release(raise_pending=False)
        raise
    release(raise_pending)


def pending() -> int | None:
    """The signal received inside a `deferred` block and not raised yet (None: none)."""
    return _pending


def raise_if_pending() -> None:
    """Raise `Stopped` for the signal `pending` gives, if any (and forget it)."""
    global _pending
    if _pending is not None:
        signum, _pending = _pending, None
        raise Stopped(signum)


#: ``STRUCTATTN_SIGNAL_AT=<point>:<SIGTERM|SIGINT>`` sends that signal to this process when it reaches ``point``
#: (`signal_point`), as a scheduler or a user would: the signal tests and the fault campaign.
SIGNAL_AT_ENV = "STRUCTATTN_SIGNAL_AT"


def signal_point(point: str) -> None:
    """Fault injection: signal this process here when `SIGNAL_AT_ENV` names ``point`` (the training engine's
    points: ``data``, ``update``, ``optimizer-save``, ``evaluation``, ``summary``)."""
    import os

    wanted = os.environ.get(SIGNAL_AT_ENV, "")
    if wanted.partition(":")[0] == point:
        os.environ.pop(SIGNAL_AT_ENV)  # once per process
        os.kill(os.getpid(), signal.Signals[wanted.partition(":")[2] or "SIGTERM"])

"""bounded.py - a time limit on one call (a torch.compile that may take minutes), shared by the PyTorch peers.

The limit is SIGALRM raising CompileTimeout in whatever Python frame runs when it fires. torch.compile catches and
logs exceptions in some of its own frames (its autotuning's benchmark workers did, and went on compiling until a
time limit outside the script killed it), or wraps them in exceptions of its own; so the alarm repeats every
`repeat_s` seconds until the call returns, and any exception out of the call once the alarm has fired is the
timeout."""
import signal

REPEAT_S = 5.0


class CompileTimeout(Exception):
    pass


def within(seconds, fn, repeat_s=REPEAT_S):
    """fn(), stopped after `seconds` (CompileTimeout); no limit when seconds is None. A call that swallows the
    exception and returns anyway returns its value."""
    if seconds is None:
        return fn()
    fired = []

    def expired(signum, frame):
        fired.append(True)
        raise CompileTimeout()
    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, max(1.0, float(seconds)), repeat_s)
    try:
        return fn()
    except Exception:
        if fired:
            raise CompileTimeout() from None
        raise
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)

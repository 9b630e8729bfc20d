"""bounded.py - a time limit on one call (a torch.compile that may take minutes), shared by the PyTorch peers."""
import signal


class CompileTimeout(Exception):
    pass


def within(seconds, fn):
    """fn(), stopped by SIGALRM after `seconds` (CompileTimeout)."""
    def expired(signum, frame):
        raise CompileTimeout()
    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(max(1, int(seconds)))
    try:
        return fn()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)

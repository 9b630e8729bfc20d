"""checks.py - how the script tests report, one way for all of them: a line per check ("ok: what" or "FAILED: what"
and the detail that explains it), then a summary line and an exit status that fails the test if any check failed.
The tests import it from their own folder (on sys.path as the running script's)."""
import json
import sys

failures = 0


def check(ok, what, detail=""):
    """Reports one check; `detail` (the output that explains it, its last 3000 characters) only when it failed."""
    global failures
    print(f"{'ok' if ok else 'FAILED'}: {what}")
    if not ok:
        if detail:
            print(detail[-3000:])
        failures += 1


def finish(tag):
    """Prints `TAG {"failures": n}` and exits 1 if any check failed, else 0."""
    print(tag, json.dumps({"failures": failures}))
    sys.exit(1 if failures else 0)

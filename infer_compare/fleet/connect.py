"""The driver's connection to the head: the token checked first by one connection attempt (a rejected
token is one line at once, where ``ray.init`` retries for about 20 s and then only says it could not
connect), then ``ray.init`` without a dashboard and without the workers' output."""

from __future__ import annotations

import os

from infer_compare.base.errors import UsageError
from infer_compare.fleet.auth import token_path
from infer_compare.fleet.join import mismatch_line


def _whose_token() -> str:
    if os.environ.get("RAY_AUTH_MODE", "token") != "token":
        return (f"authentication is off here (RAY_AUTH_MODE={os.environ['RAY_AUTH_MODE']}) "
                "and the head requires a token")
    held = "RAY_AUTH_TOKEN" if os.environ.get("RAY_AUTH_TOKEN") else str(token_path())
    return f"the token this machine holds ({held}) is not the head's"


def rejected_line(address: str) -> str:
    return (f"the Ray head at {address} rejected this machine: {_whose_token()}; "
            "copy the head's ~/.ray/auth_token here (mode 600) or point RAY_AUTH_TOKEN_PATH at it "
            "(docs/fleet.md)")


def check_token(address: str, make=None) -> None:
    """One attempt of the GCS client ``ray.init`` would make, with this machine's credentials (about 0.3 s):
    a rejected token (Ray's AuthenticationError) is a one-line UsageError. Anything else is left to
    ``ray.init``, which says it better. ``make``: builds the client (tests)."""
    if make is None:
        try:
            from ray._raylet import GcsClient
        except ImportError:  # Ray moved its internals: ray.init reports
            return

        def make(addr: str):
            return GcsClient(address=addr)
    try:
        make(address)
    except Exception as e:  # noqa: BLE001 - only a rejected token is said here
        text = f"{type(e).__name__}: {e}"
        if "AuthenticationError" in text or "InvalidAuthToken" in text or "Unauthenticated" in text:
            raise UsageError(rejected_line(address)) from None


def connect(address: str):
    """ray, connected to the cluster at ``address``; UsageError in one line otherwise."""
    check_token(address)
    import ray

    try:
        ray.init(address=address, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    except Exception as e:  # noqa: BLE001 - ConnectionError, AuthenticationError, version mismatch
        text = str(e)
        if "InvalidAuthToken" in text or "Unauthenticated" in text:
            raise UsageError(rejected_line(address)) from None
        raise UsageError(mismatch_line(text) or f"cannot connect to the Ray cluster at {address}: "
                         f"{type(e).__name__}: {text.strip().splitlines()[-1] if text.strip() else ''}"[:400]
                         + " (is the head up, and does this machine hold the head's token? "
                           "docs/fleet.md)") from None
    return ray

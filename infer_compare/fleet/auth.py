"""Ray's token authentication, on by default for every fleet command: without it anyone who can
reach the cluster's ports runs code on every node. ``RAY_AUTH_MODE=disabled`` opts out (a one-host
loopback cluster only: refused when any address involved is not loopback); the token is Ray's own:
``RAY_AUTH_TOKEN``, the file ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``, the same on every
node; a token file that group or others may read is refused (``chmod 600``)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from infer_compare.base.errors import UsageError


def token_path() -> Path:
    return Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")


def has_token() -> bool:
    return bool(os.environ.get("RAY_AUTH_TOKEN")) or token_path().is_file()


def check_private(path: Path) -> None:
    """A token file that group or others can read is refused (UsageError, one line): whoever reads it runs
    code on every node of the cluster."""
    try:
        mode = path.stat().st_mode & 0o777
    except OSError:
        return
    if mode & 0o077:
        raise UsageError(f"the Ray token file {path} is readable by others (mode {mode:o}): chmod 600 {path}")


def is_loopback(host: str) -> bool:
    """True when ``host`` (an address or a name) resolves to loopback addresses only."""
    import ipaddress
    import socket

    h = host.strip().strip("[]")
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        pass
    try:
        found = {ai[4][0] for ai in socket.getaddrinfo(h, None)}
    except OSError:
        return False
    return bool(found) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in found)


def host_of(address: str) -> str:
    """'10.0.0.1:6379' -> '10.0.0.1'; '[::1]:6379' -> '::1'; a bare host as is."""
    a = address.strip()
    if a.startswith("["):
        return a[1:a.index("]")] if "]" in a else a
    return a.rpartition(":")[0] if a.count(":") == 1 else a


def enable(create: bool = False, addresses: tuple[str, ...] = ()) -> str:
    """Turn token authentication on in this process's environment (the Ray processes started from it
    inherit it); with ``create`` (the head) write a new 256-bit token if there is none. Returns a line
    for the user, or "" when the user opted out, which is refused (UsageError) unless every address
    involved (``addresses``: this node's --ip, the head's address) is loopback."""
    mode = os.environ.setdefault("RAY_AUTH_MODE", "token")
    if mode != "token":
        off = [a for a in addresses if not is_loopback(host_of(a))]
        if off or not addresses:
            raise UsageError(f"RAY_AUTH_MODE={mode} is refused: "
                             + (f"{', '.join(off)} is not a loopback address" if off
                                else "no address to check")
                             + "; authentication may be off only for a one-host loopback cluster "
                               "(every address 127.0.0.1): unset RAY_AUTH_MODE and use the token "
                               "(docs/fleet.md)")
        return ""
    if has_token():
        if not os.environ.get("RAY_AUTH_TOKEN"):
            check_private(token_path())
        return ("token authentication on (token: "
                f"{'RAY_AUTH_TOKEN' if os.environ.get('RAY_AUTH_TOKEN') else token_path()})")
    if not create:
        raise UsageError(f"no Ray authentication token here ({token_path()}): copy the head's token file "
                         "to this machine or set RAY_AUTH_TOKEN_PATH (docs/fleet.md)")
    p = token_path()
    p.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))
    return f"token authentication on: new token written to {p} (mode 600); copy it to every node"

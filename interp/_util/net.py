"""Every request interp makes to a hub has a deadline, and a network failure falls back to the cache, in one place.

Why a module of its own (beside interp._util.offline): models (interp.hf.hub) and dataset texts (interp.data.hub_text)
both ask the hub, and neither may import the other. Two deadlines, one variable (INTERP_HUB_TIMEOUT, seconds,
default 60):
  * every socket operation of huggingface_hub's shared HTTP client (connect, each read, each write) gets it as its
    timeout, unless the user's own client already has a read timeout (limit_session): its default has none, so a
    server that accepts the connection and never answers held every command forever;
  * every metadata request (model info, a repo's refs, dataset info) must finish within it as a whole (bounded): a
    read timeout alone never fires on a server that trickles a byte every few seconds.
File downloads keep huggingface_hub's own HF_HUB_ETAG_TIMEOUT / HF_HUB_DOWNLOAD_TIMEOUT (a big file may take hours;
each of its reads may not). A stalled request is one line naming the host and the variable (HubStalled).

online_or_cached is the one fallback: a network failure (refused, reset, timed out, stalled: is_network_error), not
an answer of the server (404, 401, 500 are answers), gives the cached answer and says so on stderr.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import urlsplit

from interp._util.errors import InputError, one_line

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "TIMEOUT_VAR",
    "HubStalled",
    "bounded",
    "hub_host",
    "hub_timeout",
    "is_network_error",
    "limit_session",
    "online_or_cached",
]

T = TypeVar("T")
TIMEOUT_VAR = "INTERP_HUB_TIMEOUT"
DEFAULT_TIMEOUT_S = 60.0
_HTTP_STACKS = ("httpx", "httpcore", "requests", "urllib3", "h11", "aiohttp")   # forks too: httpx2, httpcore2 ...


class HubStalled(InputError):
    """A request that did not finish within its deadline: the server is up but does not answer (or trickles)."""


def hub_timeout() -> float:
    """INTERP_HUB_TIMEOUT in seconds (default 60); InputError naming the variable when it is not a positive number."""
    raw = os.environ.get(TIMEOUT_VAR, "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not (0 < value < 86_400):
        raise InputError(f"{raw!r} is not a number of seconds in (0, 86400)", field=TIMEOUT_VAR,
                         fix=f"e.g. {TIMEOUT_VAR}=60, or unset it for the default {DEFAULT_TIMEOUT_S:g} s")
    return value


def hub_host() -> str:
    """host:port of the hub huggingface_hub talks to (HF_ENDPOINT, else huggingface.co)."""
    from huggingface_hub import constants

    return urlsplit(constants.ENDPOINT).netloc or constants.ENDPOINT


def limit_session() -> None:
    """Give huggingface_hub's shared client a deadline per socket operation (module doc), once its own is unset.

    Applied before each request (cheap): the client is created lazily and may be replaced (set_client_factory);
    a client whose read timeout a user set is left alone."""
    import httpx2
    from huggingface_hub.utils import get_session

    session = get_session()
    if session.timeout.read is None:
        seconds = hub_timeout()
        session.timeout = httpx2.Timeout(seconds, connect=seconds)


def bounded(call: Callable[[], T], what: str) -> T:
    """call() within hub_timeout() seconds as a whole, else HubStalled naming `what`, the host and the variable.

    The call runs in a daemon thread that is abandoned on a stall (it ends when its socket times out: limit_session);
    the caller's thread waits on a join that a Ctrl-C still interrupts."""
    limit_session()
    seconds = hub_timeout()
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as err:  # noqa: BLE001  (re-raised in the caller's thread)
            box["error"] = err

    worker = threading.Thread(target=run, name=f"interp-hub: {what}", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise HubStalled(f"the hub at {hub_host()} did not answer {what} within {seconds:g} s (it accepted the "
                         "connection but sent no answer, or too slowly)", field=TIMEOUT_VAR,
                         fix=f"check HF_ENDPOINT and the network, raise {TIMEOUT_VAR} for a slow link, or set "
                             "HF_HUB_OFFLINE=1 to use the cache only")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


def is_network_error(err: BaseException) -> bool:
    """The network failed (as opposed to the server answering an error): a stall, an OSError (refused, reset, a
    file cut short), or an exception of an HTTP stack (httpx / httpcore and their forks, requests, urllib3)."""
    if isinstance(err, HubStalled | OSError | TimeoutError):
        return True
    return any(c.__module__.split(".")[0].rstrip("0123456789") in _HTTP_STACKS for c in type(err).__mro__)


def online_or_cached(ask: Callable[[], T], cached: Callable[[], T | None], what: str,
                     failed: Callable[[BaseException], Exception], is_answer: Callable[[BaseException], bool],
                     describe: Callable[[T], str] = lambda _found: "copy") -> T:
    """ask(); on a network failure, cached() (said on stderr: "using the cached <describe(found)>"), or
    failed(err) when the cache has nothing.

    `is_answer(err)` tells the server's answers (an HTTP error status: never a reason to use the cache, they
    propagate); a stall (HubStalled) with nothing cached is raised as it is, since its line names the variable."""
    try:
        return ask()
    except Exception as err:
        if is_answer(err) or not is_network_error(err):
            raise
        found = cached()
        if found is None:
            if isinstance(err, HubStalled):
                raise
            raise failed(err) from None
        state = "stalled" if isinstance(err, HubStalled) else "unreachable"
        print(f"[hub] {what}: the hub is {state} ({hub_host()}: {type(err).__name__}: {one_line(err)[:100]}); "
              f"using the cached {describe(found)}", file=sys.stderr)
        return found

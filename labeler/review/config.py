"""Settings of `labeler view`, each declared once (its flags are generated from them)."""

from __future__ import annotations

import getpass
from dataclasses import dataclass

from labeler.labeling.config import check_numbers, setting

VIEW = "view"
EVERY_INTERFACE = ("0.0.0.0", "::", "")  # a bind to these is reached under any name


def _default_reviewer() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in this environment (a container without one)
        return "reviewer"


@dataclass(frozen=True)
class ViewConfig:
    host: str = setting(
        "127.0.0.1",
        help="address to bind; another one (0.0.0.0) lets other machines read and correct: there is no login. "
        "Every interface (0.0.0.0, ::) needs --allowed-host",
        group=VIEW,
    )
    allowed_host: tuple[str, ...] = setting(
        (),
        metavar="NAME",
        help="a host name (or address) other machines reach the app under, as their browsers' address bar shows it "
        "(repeatable; needed with --host 0.0.0.0 or ::); a request under any other name is refused, so that a page of "
        "another site cannot post corrections through DNS rebinding. The local names and a --host address are always served",
        default_text="none: the local names and --host",
        group=VIEW,
    )
    port: int = setting(8765, at_least=0, at_most=65535, help="port to listen on; 0 picks a free one (printed)", group=VIEW)
    reviewer: str = setting(
        None, help="the name your corrections are saved under", group=VIEW, default_text="your user name"
    )
    read_only: bool = setting(False, help="save no correction, whoever owns the outputs", group=VIEW)
    allow_writes: bool = setting(
        False,
        help="save corrections in outputs you do not own (you still need write access), and in an object store's",
        group=VIEW,
    )
    checker_timeout: float = setting(5.0, above=0, help="seconds per answer check of `check --explain` on a rollout", group=VIEW)

    def __post_init__(self):
        check_numbers(self)
        if self.reviewer is None:
            object.__setattr__(self, "reviewer", _default_reviewer())
        if not self.reviewer.strip():
            raise ValueError("--reviewer must not be empty")
        if self.host in EVERY_INTERFACE and not self.allowed_host:
            raise ValueError(
                f"--host {self.host or repr('')} serves every interface: pass --allowed-host NAME (repeatable) with each host name "
                "or address other machines open the app under (e.g. --allowed-host review.lab.example); any other name is refused"
            )
        for name in self.allowed_host:
            if (problem := host_name_problem(name)) is not None:
                raise ValueError(f"--allowed-host {name!r}: {problem}; give the name or address alone, as in review.lab.example")
        # the Host header is matched without its port and in lower case: so are the names
        object.__setattr__(self, "allowed_host", tuple(name.strip().lower() for name in self.allowed_host))


def host_name_problem(name: str) -> str | None:
    """Why `name` is not a host name or address (None: it is one): a scheme, a port, a path, a wildcard, a blank."""
    name = name.strip()
    if not name or any(c in name for c in "/ *?#@"):
        return "not a host name (a name or address, without scheme, port, path or wildcard)"
    if name.startswith("["):  # a bracketed IPv6 address, and nothing after it
        return None if name.endswith("]") and _is_ipv6(name[1:-1]) else "not a host name: a port after the address?"
    if name.count(":") == 1:  # name:port, or scheme:name
        return "a port or scheme is not part of the name (the Host header is matched without its port)"
    if ":" in name and not _is_ipv6(name):
        return "not a host name or IPv6 address"
    return None


def _is_ipv6(text: str) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(text).version == 6
    except ValueError:
        return False

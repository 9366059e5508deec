"""What the database servers iolab starts (PostgreSQL for pgbench, MariaDB for sql-bench) share:
the account a server runs as (:class:`Account`, :func:`server_account`) and quoting its log (:func:`tail`).
"""
from __future__ import annotations

import dataclasses
import os
import pwd
import re
import shutil
from pathlib import Path

from iolab.core.errors import IolabError


@dataclasses.dataclass(frozen=True)
class Account:
    """Who the server runs as."""
    name: str
    uid: int
    gid: int

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run as this account (unchanged when we already are it)."""
        if os.geteuid() == self.uid:
            return list(argv)
        setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
        if not os.access(setpriv, os.X_OK):
            raise IolabError("setpriv is needed to run PostgreSQL as an unprivileged user",
                             context="pgbench", hint="install it with: apt-get install util-linux")
        return [setpriv, f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", "--", *argv]


class ServerLifecycle:
    """``destroy()`` for a server with ``stop()`` and ``remove()``: safe at any point, also twice."""

    def destroy(self) -> list[str]:
        """Stop and remove; the files go even when stopping fails."""
        try:
            return self.stop()
        finally:
            self.remove()


def recipe_options(recipe, allowed: set) -> tuple[str, str, dict]:
    """A database recipe's ``options`` with no unknown field: (source, "<source>: options", options)."""
    source = recipe.source or recipe.name
    ctx = f"{source}: options"
    data = recipe.options or {}
    extra = sorted(set(data) - allowed)
    if extra:
        raise IolabError(f"unknown field {extra[0]!r} (allowed: {', '.join(sorted(allowed))})", context=ctx)
    return source, ctx, data


def server_account(name: str | None, *, candidates: tuple, server: str, context: str,
                   only_root_chooses: bool) -> Account:
    """The account ``server`` runs as: ourselves unless root; as root ``name``, else the first of
    ``candidates`` that exists (never root). ``only_root_chooses``: a non-root caller naming
    another account is refused rather than ignored."""
    if os.geteuid() != 0:
        entry = pwd.getpwuid(os.geteuid())
        if only_root_chooses and name is not None and name != entry.pw_name:
            raise IolabError(f"only root can run the server as {name!r}", context=context)
        return Account(entry.pw_name, entry.pw_uid, entry.pw_gid)
    for candidate in ([name] if name else list(candidates)):
        try:
            entry = pwd.getpwnam(candidate)
        except KeyError:
            continue
        if entry.pw_uid == 0:
            raise IolabError(f"{server} refuses to run as root; name an unprivileged account", context=context)
        return Account(entry.pw_name, entry.pw_uid, entry.pw_gid)
    raise IolabError(f"no such user account: {name or ' or '.join(candidates)}", context=context)


def tail(path: Path, lines: int = 5, *, pattern: str = r"(FATAL|PANIC|ERROR|could not|No space)",
         fallback: bool = True) -> str:
    """The lines of a log worth quoting: the last errors, else (``fallback``) its last lines."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    hits = [line.strip() for line in text if re.search(pattern, line)]
    chosen = hits[-lines:] if hits or not fallback else [line.strip() for line in text[-lines:]]
    return " | ".join(x for x in chosen if x)

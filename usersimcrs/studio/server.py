"""Serving a study: open its folder, check its CRSs, print its links, run uvicorn until stopped."""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from usersimcrs.engine.loop import run_coroutine
from usersimcrs.engine.preflight import check_distinct
from usersimcrs.engine.runner import build_context
from usersimcrs.errors import UserError
from usersimcrs.studio.admin import participant_rows
from usersimcrs.studio.config import Study
from usersimcrs.studio.crs import CRSSessions
from usersimcrs.studio.generate import ensure_annotation_source
from usersimcrs.studio.service import StudyService, load_pools
from usersimcrs.studio.store import Keys, StudyStore, read_secret

EXTRA = "studio"
WEB_MODULES = ("starlette", "uvicorn", "jinja2", "multipart", "limits")
LINKS = "links.txt"

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.studio.service import StudyService


def require_web_stack() -> None:
    """One line naming the extra when the web packages are missing."""
    import importlib.util

    missing = [name for name in WEB_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise UserError(
            f"usersimcrs studio needs the '{EXTRA}' extra (missing: {', '.join(missing)}): "
            f"pip install 'usersimcrs[{EXTRA}]'"
        )


def study_keys(study: Study, *, create: bool) -> Keys:
    """The study's keys; the admin token comes from `admin_token_env` when the study names one."""
    admin = None
    if study.config.admin_token_env:
        admin = os.environ.get(study.config.admin_token_env, "")
        if len(admin) < 16:
            raise UserError(
                f"{study.path}: admin_token_env: environment variable {study.config.admin_token_env} "
                "is unset or shorter than 16 characters"
            )
    return Keys(read_secret(study.folder, create=create), admin)


@dataclass
class Urls:
    """Where the study is reachable once bound."""

    base: str
    admin: str
    open_link: str | None


def write_links(service: StudyService, base: str, folder: Path) -> Path:
    """Every participant's personal link, one per line, in STUDY/links.txt (mode 0600)."""
    path = folder / LINKS
    rows = participant_rows(service, base)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.writelines(f"{row['participant_id']}\t{row['link']}\n" for row in rows)
    return path


def open_service(study: Study, store: StudyStore, keys: Keys) -> StudyService:
    """The study's service over an open store: its conversation pools and, for chat and battle, its CRSs.

    Issues the study's `participants.links` when the folder has no participant yet.
    """
    pools = load_pools(study)
    sessions = None
    if study.crs_configs and (study.config.tasks.chat or study.config.tasks.battle):
        sessions = CRSSessions(study, build_context(next(iter(study.crs_configs.values()))))
    service = StudyService(study, store, keys, pools, sessions)
    if not store.state.participants and study.config.participants.links:
        service.issue_links(study.config.participants.links)
    return service


async def check_crs(study: Study) -> None:
    """A dead CRS URL stops the studio before it serves anyone (one line naming the URL)."""
    if study.config.tasks.chat or study.config.tasks.battle:
        await check_distinct(
            [(config.crs, f"{study.path}: crs {name}") for name, config in study.crs_configs.items()],
            run_seed=study.config.seed,
        )


def serve(
    study: Study,
    *,
    host: str | None = None,
    port: int | None = None,
    announce: Callable[[str], None] = print,
) -> None:
    """Run the study's server until interrupted (Ctrl-C) or killed; every answer is on disk when acknowledged."""
    require_web_stack()
    import uvicorn

    # lazy: starlette and jinja2 (the studio extra) only when the server starts
    from usersimcrs.studio.app import build_app

    host = host or study.config.host
    port = study.config.port if port is None else port
    store = StudyStore(study.folder)
    try:
        keys = study_keys(study, create=True)
        if study.config.tasks.annotate is not None and study.config.tasks.annotate.generate is not None:
            announce(f"studio: making the conversations to annotate in {study.annotate_source()} (once)")
            ensure_annotation_source(study)
        sock = _bind(host, port)
        base = f"http://{_display_host(host)}:{sock.getsockname()[1]}"

        async def main() -> None:
            await check_crs(study)
            service = open_service(study, store, keys)
            links = write_links(service, base, study.folder)
            sessions = service.sessions
            app = build_app(service, on_shutdown=sessions.aclose if sessions else None)
            announce(f"studio: {study.name} listening on {base}/ (records in {study.folder})")
            announce(f"admin: {base}/admin/{keys.admin}/")
            if study.config.participants.open_link:
                announce(f"open link: {base}/join/{keys.open_key}")
            announce(f"personal links: {links} ({len(store.state.participants)})")
            sys.stdout.flush()
            config = uvicorn.Config(
                app, log_level="warning", access_log=False, lifespan="on", ws="none", timeout_graceful_shutdown=5
            )
            await uvicorn.Server(config).serve(sockets=[sock])

        run_coroutine(main())
    finally:
        store.close()


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UserError(f"cannot listen on {host}:{port} ({exc.strerror or exc})") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _display_host(host: str) -> str:
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host

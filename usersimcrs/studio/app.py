"""The studio's web pages: Starlette routes over `StudyService`, Jinja2 templates, no JavaScript build.

Security, as for any server on the internet:
- a participant is their link's token (an HMAC of the study secret): pages under ``/p/<token>/`` show
  only that participant's assignments (another's is 403); admin pages need the admin token;
- every POST carries a form token bound to the participant (or the admin, or the join page); a
  form without it, or with another's, is refused (403);
- templates escape every text (Jinja2 autoescape), the Content-Security-Policy allows no inline
  script, and responses are not cached and send no Referer (tokens live in URLs);
- request bodies are capped (`limits.body_bytes`), texts are length-checked, and requests are rate
  limited per participant and, for the open link and unknown tokens, per client address (`limits`);
- a CRS that fails or is slow gives the participant a message on the chat page and is recorded;
  any other unexpected error shows a plain error page and is logged.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

import jinja2
from limits import parse as parse_limit
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from usersimcrs.studio.admin import admin_overview, participant_rows
from usersimcrs.studio.config import dialogue_criteria, turn_criteria
from usersimcrs.studio.dialogues import history
from usersimcrs.studio.records import AssignmentRecord
from usersimcrs.studio.service import Forbidden, FormError, Page, StudyClosed, StudyService

logger = logging.getLogger(__name__)
HERE = Path(__file__).resolve().parent
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


class SecurityHeaders:
    """Adds `SECURITY_HEADERS` to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.decode().lower() for name, _ in headers}
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items() if k not in present]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


class RateLimits:
    """Moving-window limits: per participant on every request, per address on joins and bad tokens."""

    def __init__(self, service: StudyService) -> None:
        limits = service.study.config.limits
        self._limiter = MovingWindowRateLimiter(MemoryStorage())
        self.participant = parse_limit(f"{limits.requests_per_minute}/minute")
        self.join = parse_limit(f"{limits.joins_per_minute}/minute")
        self.bad_token = parse_limit(f"{limits.bad_tokens_per_minute}/minute")

    def hit(self, kind: str, key: str) -> bool:
        item = {"participant": self.participant, "join": self.join, "bad_token": self.bad_token}[kind]
        return self._limiter.hit(item, kind, key)

    def blocked(self, kind: str, key: str) -> bool:
        item = {"participant": self.participant, "join": self.join, "bad_token": self.bad_token}[kind]
        return not self._limiter.test(item, kind, key)


def _client(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def _form_dict(form: Any) -> dict[str, str]:
    return {key: value for key, value in form.multi_items() if isinstance(value, str)}


class StudioApp:
    """Routes and their handlers for one study."""

    def __init__(self, service: StudyService, *, on_shutdown: Any = None) -> None:
        self.service = service
        self.study = service.study
        self.keys = service.keys
        self.limits = RateLimits(service)
        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        self.templates = Jinja2Templates(env=env)
        self._on_shutdown = on_shutdown
        self._export_lock = asyncio.Lock()

    # ------------------------------------------------------------------ plumbing

    def render(self, request: Request, name: str, status: int = 200, **context: Any) -> Response:
        context.setdefault("title", self.study.config.title)
        context.setdefault("error", None)
        return self.templates.TemplateResponse(request, name, context, status_code=status)

    def error_page(self, request: Request, status: int, message: str) -> Response:
        try:
            return self.render(request, "error.html", status=status, message=message, status_code=status)
        except Exception:  # noqa: BLE001 - the error page itself must not fail
            logger.exception("the error page could not be rendered")
            return PlainTextResponse(f"{status}: {message}", status_code=status)

    def participant(self, request: Request) -> tuple[str, str]:
        """(participant ID, token) of the URL; 403 for an unknown token, 429 past the limits."""
        token = request.path_params["token"]
        client = _client(request)
        if self.limits.blocked("bad_token", client):
            raise HTTPException(429, "Too many requests with unknown links; please wait a minute.")
        participant_id = self.service.participant_for(token)
        if participant_id is None:
            self.limits.hit("bad_token", client)
            raise HTTPException(403, "This link is not valid.")
        if not self.limits.hit("participant", participant_id):
            raise HTTPException(429, "Too many requests; please wait a moment and try again.")
        return participant_id, token

    def admin(self, request: Request) -> str:
        token = request.path_params["token"]
        client = _client(request)
        if self.limits.blocked("bad_token", client):
            raise HTTPException(429, "Too many requests with unknown links; please wait a minute.")
        if not hmac.compare_digest(token, self.keys.admin):
            self.limits.hit("bad_token", client)
            raise HTTPException(403, "This page needs the admin link.")
        return token

    async def checked_form(self, request: Request, scope: str) -> dict[str, str]:
        """The posted form after the CSRF check (403 without the right token)."""
        form = _form_dict(await request.form())
        if not self.keys.check_csrf(scope, form.get("csrf")):
            raise HTTPException(403, "This form was not sent from the study's page (missing or wrong form token).")
        return form

    @staticmethod
    def submission_id() -> str:
        return secrets.token_urlsafe(12)

    # ------------------------------------------------------------------ public pages

    async def landing(self, request: Request) -> Response:
        return self.render(request, "landing.html")

    async def join_page(self, request: Request) -> Response:
        self._check_open_key(request)
        external = request.query_params.get("PROLIFIC_PID") or request.query_params.get("participant")
        return self.render(
            request,
            "join.html",
            instructions=self.study.config.instructions,
            csrf=self.keys.csrf("join"),
            submission_id=self.submission_id(),
            external_id=external or "",
        )

    async def join(self, request: Request) -> Response:
        self._check_open_key(request)
        if not self.limits.hit("join", _client(request)):
            raise HTTPException(429, "Too many new participants from this address; please wait a minute.")
        form = await self.checked_form(request, "join")
        try:
            participant_id = await self.service.join(form.get("submission_id", ""), form.get("external_id") or None)
        except StudyClosed:
            return self.error_page(request, 403, "This study is full; thank you for your interest.")
        except FormError as exc:
            return self.error_page(request, 400, str(exc))
        token = self.keys.participant_token(participant_id)
        return RedirectResponse(f"/p/{token}/", status_code=303)

    def _check_open_key(self, request: Request) -> None:
        key = request.path_params["key"]
        if not self.study.config.participants.open_link or not hmac.compare_digest(key, self.keys.open_key):
            self.limits.hit("bad_token", _client(request))
            raise HTTPException(403, "This link is not valid.")

    # ------------------------------------------------------------------ participant pages

    async def home(self, request: Request) -> Response:
        participant_id, token = self.participant(request)
        if self.service.completed(participant_id):
            return self.render_done(request)
        return self.render(
            request,
            "home.html",
            token=token,
            instructions=self.study.config.instructions,
            progress=self.service.progress(participant_id),
            csrf=self.keys.csrf(participant_id),
        )

    def render_done(self, request: Request) -> Response:
        return self.render(request, "done.html", completion=self.study.config.completion)

    async def next(self, request: Request) -> Response:
        participant_id, token = self.participant(request)
        await self.checked_form(request, participant_id)
        assignment = await self.service.next_assignment(participant_id)
        if assignment is None:
            return RedirectResponse(f"/p/{token}/", status_code=303)
        return RedirectResponse(f"/p/{token}/a/{assignment.assignment_id}", status_code=303)

    def _assignment(self, request: Request, participant_id: str) -> AssignmentRecord:
        try:
            return self.service.assignment_of(participant_id, request.path_params["assignment"])
        except Forbidden:
            raise HTTPException(403, "This assignment is not yours.") from None

    async def assignment_page(self, request: Request) -> Response:
        participant_id, token = self.participant(request)
        assignment = self._assignment(request, participant_id)
        return self.render_page(request, token, participant_id, self.service.page(assignment))

    def render_page(
        self, request: Request, token: str, participant_id: str, page: Page, *, error: str | None = None, **extra: Any
    ) -> Response:
        if page.kind == "done":
            return RedirectResponse(f"/p/{token}/", status_code=303)
        assignment = page.assignment
        base = f"/p/{token}/a/{assignment.assignment_id}"
        context: dict[str, Any] = {
            "token": token,
            "base": base,
            "csrf": self.keys.csrf(participant_id),
            "submission_id": self.submission_id(),
            "error": error,
            "assignment": assignment,
            "page": page,
            "limits": self.study.config.limits,
            **extra,
        }
        status = 400 if error else 200
        if page.kind in ("chat", "label"):
            conversation = page.conversation
            assert conversation is not None
            task = self.service.chat_task(assignment)
            last = conversation.exchanges[-1] if conversation.exchanges else None
            context.update(
                conversation=conversation,
                dialogue=history(conversation),
                system_name=_system_name(assignment, page.side),
                task=task,
                failure=last.error if last is not None and last.error is not None else None,
                retry_text=(last.user_text or "") if last is not None and last.error is not None else "",
                can_end=conversation.user_turns >= task.min_turns,
                criteria=self.service.chat_criteria(assignment),
                rubric=self.study.chat_rubric,
                opening=task.opening == "crs" and not conversation.exchanges,
            )
            return self.render(request, f"{page.kind}.html", status=status, **context)
        if page.kind == "vote":
            a, b = (self.service.state.conversations[c] for c in assignment.conversation_ids)
            context.update(dialogues=[("A", history(a)), ("B", history(b))])
            return self.render(request, "vote.html", status=status, **context)
        entry = page.entry
        if entry is None:
            return self.error_page(
                request, 410, "This conversation is no longer available; please contact the researcher."
            )
        context.update(dialogue=entry.dialogue, position=page.position, total=len(assignment.shown))
        if page.kind == "annotate":
            rubric = self.study.rubric
            assert rubric is not None
            context.update(
                rubric=rubric, turn_criteria=turn_criteria(rubric), dialogue_criteria=dialogue_criteria(rubric)
            )
        return self.render(request, f"{page.kind}.html", status=status, **context)

    async def _act(self, request: Request, action: Action) -> Response:
        """Run one form action of an assignment page; form errors re-render the page with the message."""
        participant_id, token = self.participant(request)
        assignment = self._assignment(request, participant_id)
        form = await self.checked_form(request, participant_id)
        aid = assignment.assignment_id
        service = self.service
        try:
            await action(service, participant_id, aid, form)
        except Forbidden:
            raise HTTPException(403, "This assignment is not yours.") from None
        except FormError as exc:
            page = service.page(service.state.assignments[aid])
            return self.render_page(request, token, participant_id, page, error=str(exc), form=form)
        page = service.page(service.state.assignments[aid])
        if page.kind == "done":
            await service.finish_if_done(participant_id)  # the last step done: the completion code shows at home
            return RedirectResponse(f"/p/{token}/", status_code=303)
        return RedirectResponse(f"/p/{token}/a/{aid}", status_code=303)

    def action_route(self, name: str, action: Action) -> Route:
        async def endpoint(request: Request) -> Response:
            return await self._act(request, action)

        return Route(f"/p/{{token}}/a/{{assignment}}/{name}", endpoint, methods=["POST"])

    # ------------------------------------------------------------------ admin

    async def admin_page(self, request: Request) -> Response:
        token = self.admin(request)
        base = str(request.base_url).rstrip("/")
        return self.render(
            request,
            "admin.html",
            token=token,
            csrf=self.keys.csrf("admin"),
            overview=admin_overview(self.service),
            participants=participant_rows(self.service, base),
            open_link=f"{base}/join/{self.keys.open_key}" if self.study.config.participants.open_link else None,
            exported=None,
        )

    async def admin_links(self, request: Request) -> Response:
        token = self.admin(request)
        form = await self.checked_form(request, "admin")
        count = max(0, min(_int(form.get("count")), 500))
        await self.service.issue_links_async(count)
        return RedirectResponse(f"/admin/{token}/", status_code=303)

    async def admin_links_text(self, request: Request) -> Response:
        self.admin(request)
        base = str(request.base_url).rstrip("/")
        lines = [f"{row['participant_id']}\t{row['link']}" for row in participant_rows(self.service, base)]
        return PlainTextResponse("\n".join(lines) + "\n")

    async def admin_export(self, request: Request) -> Response:
        from usersimcrs.studio.export import export_study  # lazy: pandas only when an admin asks for the export

        token = self.admin(request)
        await self.checked_form(request, "admin")
        base = str(request.base_url).rstrip("/")
        async with self._export_lock:
            # the export replays the log from disk in a thread: the live state is not touched
            summary = await asyncio.to_thread(export_study, self.study, self.study.folder / "export")
        return self.render(
            request,
            "admin.html",
            token=token,
            csrf=self.keys.csrf("admin"),
            overview=admin_overview(self.service),
            participants=participant_rows(self.service, base),
            open_link=f"{base}/join/{self.keys.open_key}" if self.study.config.participants.open_link else None,
            exported=summary,
        )

    # ------------------------------------------------------------------ errors

    async def http_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return self.error_page(request, exc.status_code, exc.detail)

    async def server_error(self, request: Request, exc: Exception) -> Response:
        logger.exception("unexpected error on %s", request.url.path, exc_info=exc)
        return self.error_page(request, 500, "Something went wrong on our side; your answers so far are saved.")

    def build(self) -> Starlette:
        routes = [
            Route("/", self.landing),
            Route("/join/{key}", self.join_page, methods=["GET"]),
            Route("/join/{key}", self.join, methods=["POST"]),
            Route("/p/{token}/", self.home, methods=["GET"]),
            Route("/p/{token}/next", self.next, methods=["POST"]),
            Route("/p/{token}/a/{assignment}", self.assignment_page, methods=["GET"]),
            *(self.action_route(name, action) for name, action in ACTIONS.items()),
            Route("/admin/{token}/", self.admin_page, methods=["GET"]),
            Route("/admin/{token}/links", self.admin_links, methods=["POST"]),
            Route("/admin/{token}/links.txt", self.admin_links_text, methods=["GET"]),
            Route("/admin/{token}/export", self.admin_export, methods=["POST"]),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ]

        @asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            yield
            if self._on_shutdown is not None:
                await self._on_shutdown()

        return Starlette(
            routes=routes,
            middleware=[Middleware(SecurityHeaders)],
            exception_handlers={HTTPException: self.http_error, Exception: self.server_error},
            lifespan=lifespan,
            max_body_size=self.study.config.limits.body_bytes,
        )


Action = Callable[[StudyService, str, str, dict[str, str]], Awaitable[object]]
"""(service, participant ID, assignment ID, posted form) -> the stored record."""

ACTIONS: dict[str, Action] = {
    "message": lambda s, p, a, f: s.send_message(
        p, a, f.get("conversation_id", ""), _int(f.get("turn")), f.get("submission_id", ""), f.get("text", "")
    ),
    "end": lambda s, p, a, f: s.end_chat(p, a, f.get("conversation_id", "")),
    "label": lambda s, p, a, f: s.label(p, a, f.get("conversation_id", ""), f),
    "vote": lambda s, p, a, f: s.vote(p, a, f.get("outcome", ""), f.get("feedback", "")),
    "annotate": lambda s, p, a, f: s.annotate(p, a, _int(f.get("position")), f),
    "turing": lambda s, p, a, f: s.answer_turing(
        p, a, _int(f.get("position")), f.get("answer", ""), f.get("confidence")
    ),
}


def _system_name(assignment: AssignmentRecord, side: int | None) -> str:
    if assignment.task == "battle":
        return f"System {'AB'[side or 0]}"
    return "the system"


def _int(value: str | None) -> int:
    try:
        return int(value or "")
    except ValueError:
        return -1


def build_app(service: StudyService, *, on_shutdown: Any = None) -> Starlette:
    """The ASGI app of a study (`on_shutdown`: an async callable run when the server stops)."""
    return StudioApp(service, on_shutdown=on_shutdown).build()

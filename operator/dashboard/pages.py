"""The HTML pages: server-rendered, one template each, live through ``static/dashboard.js``.

Every page's ``<main>`` is also served alone (``?fragment=main``): on a server-sent event that
concerns the page, the script fetches that fragment and swaps it in, so one rendering path
serves the first load and every live update, and the page works without JavaScript too.
Actions are plain HTML forms (POST, CSRF token, then a redirect back with the outcome).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlsplit

from aiohttp import web
from spindle.operator.dashboard import api
from spindle.operator.dashboard.actions import ActionError
from spindle.operator.dashboard.context import COOKIE, STATIC, dashboard, same_origin, session_of

LIVE_OVERVIEW = "Broker,LogVolume"
# Every page registers itself here; the app adds the table.
routes = web.RouteTableDef()


def render(
    request: web.Request, template: str, *, status: int = 200, live: str = "", **values: Any
) -> web.Response:
    """A page (or only its ``<main>`` for ``?fragment=main``), with the session's user, CSRF
    token and pending messages."""
    board = dashboard(request)
    session = session_of(request)
    context = {
        "user": session.user.username if session else None,
        "csrf": session.csrf if session else "",
        "flash": list(session.flash) if session else [],
        "read_access": board.settings.read_access,
        "live": live,
        "path": request.path,
        "static": request.app[STATIC].url,
        **values,
    }
    tmpl = board.templates.get_template(template)
    if request.query.get("fragment") == "main":
        body = "".join(tmpl.blocks["main"](tmpl.new_context(context)))
    else:
        if session:
            session.flash.clear()
        body = tmpl.render(context)
    return web.Response(text=body, status=status, content_type="text/html")


async def guard(request: web.Request) -> web.Response | None:
    """A redirect to the login page when reads need authentication and there is none."""
    if await api.readable(request):
        return None
    raise web.HTTPSeeOther(f"/login?next={quote(request.path_qs)}")


@routes.get("/")
async def overview(request: web.Request) -> web.StreamResponse:
    await guard(request)
    data = api.overview_data(request)
    return render(request, "overview.html", live=LIVE_OVERVIEW, title="Cluster overview", **data)


@routes.get("/reassignments")
async def reassignments(request: web.Request) -> web.StreamResponse:
    await guard(request)
    return render(
        request,
        "reassignments.html",
        live="Reassignment,Rebalance",
        title="Reassignments and rebalances",
        reassignments=api.reassignments_data(request),
        rebalances=api.rebalances_data(request),
    )


# Each object's page: (its kind in api.DETAILS, page path prefix, template, the template's
# name for the view, kinds whose changes refresh it live).
DETAIL_PAGES = (
    ("LogVolume", "volumes", "volume.html", "v", "LogVolume,Reassignment"),
    ("Reassignment", "reassignments", "reassignment.html", "r", "Reassignment"),
    ("Rebalance", "rebalances", "rebalance.html", "r", "Rebalance,Reassignment"),
)


def _detail_page(detail: api.Detail, template: str, var: str, live: str) -> api.Handler:
    async def page(request: web.Request) -> web.StreamResponse:
        """One object's page, or 404 naming its kind."""
        await guard(request)
        data = await detail.data(request)
        if data is None:
            message = f"No such {detail.kind}."
            return render(request, "error.html", status=404, title="Not found", message=message)
        title = f"{detail.kind} {data['name']}"
        values: dict[str, Any] = {var: data}
        return render(request, template, live=live, title=title, **values)

    return page


for _kind, _prefix, _template, _var, _live in DETAIL_PAGES:
    _page = _detail_page(api.DETAILS[_kind], _template, _var, _live)
    routes.get(f"/{_prefix}/{{namespace}}/{{name}}")(_page)


def _back(request: web.Request, form: dict[str, str]) -> str:
    """Where to return after an action: the page it came from (this site's paths only)."""
    target = form.get("next") or "/"
    parts = urlsplit(target)
    # "//host" and "/\\host" are other sites to a browser, though they start with a slash.
    local = target.startswith("/") and not target.startswith(("//", "/\\"))
    return target if local and not parts.scheme and not parts.netloc else "/"


@routes.post("/actions/{plural}/{namespace}/{name}/{action}")
async def action(request: web.Request) -> web.StreamResponse:
    """An action form: on success back to the page with a message; on refusal an error page
    with the status (401, 403, 404, 409) and the reason."""
    form = {k: str(v) for k, v in (await request.post()).items()}
    try:
        await api.run_action(request, form)
    except ActionError as exc:
        return render(
            request, "error.html", status=exc.status, title="Action refused", message=exc.message
        )
    session = session_of(request)
    if session is not None:
        session.flash.append(
            f"{request.match_info['action'].capitalize()} {request.match_info['namespace']}/"
            f"{request.match_info['name']}: done."
        )
    raise web.HTTPSeeOther(_back(request, form))


@routes.get("/login")
async def login_form(request: web.Request) -> web.StreamResponse:
    return render(
        request, "login.html", title="Log in", next=request.query.get("next", "/"), error=None
    )


@routes.post("/login")
async def login(request: web.Request) -> web.StreamResponse:
    """Check the pasted token with TokenReview; on success start a session (cookie)."""
    form = {k: str(v) for k, v in (await request.post()).items()}
    next_page = _back(request, form)
    if not same_origin(request):
        return render(
            request,
            "login.html",
            status=403,
            title="Log in",
            next=next_page,
            error="Cross-site login refused.",
        )
    board = dashboard(request)
    token = form.get("token", "").strip()
    user = await board.authority.authenticate(token) if token else None
    if user is None:
        return render(
            request,
            "login.html",
            status=401,
            title="Log in",
            next=next_page,
            error="The API server did not accept this token.",
        )
    board.sessions.drop(request.cookies.get(COOKIE))
    session = board.sessions.create(token, user)
    response = web.HTTPSeeOther(next_page)
    response.set_cookie(
        COOKIE,
        session.id,
        httponly=True,
        samesite="Strict",
        path="/",
        secure=board.settings.secure_cookies,
    )
    raise response


@routes.post("/logout")
async def logout(request: web.Request) -> web.StreamResponse:
    if same_origin(request):
        dashboard(request).sessions.drop(request.cookies.get(COOKIE))
    response = web.HTTPSeeOther("/")
    response.del_cookie(COOKIE, path="/")
    raise response

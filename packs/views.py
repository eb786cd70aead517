"""Pack pages: list, drafts in the YAML editor, publish, version history, diff, asset links.

One template per page; htmx fragments are named partials of that page. Writes need an
owner or editor (403 for viewers); every object is fetched through ``packs.access`` (404
for outsiders).
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect, render
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from agentclash_site.lib.pagination import InvalidCursor, keyset_page, page_into, query_without
from agentclash_site.lib.params import BadParameter, int_param
from agentclash_site.workspaces.access import check_write, membership_for
from agentclash_site.workspaces.views import member_page
from packs import selectors, services
from packs.access import get_asset_for_user, get_draft_for_user, get_pack_for_user, get_version_for_user
from packs.bundle import archive
from packs.forms import CaseEditor, DraftTextForm, FileUploadForm, NewDraftForm, OpenPackFileForm
from packs.models import Artifact, Asset, Case, Draft, Pack, PackVersion
from packs.services import draft_reports, yaml_edit

CASES_SHOWN = 500


def _can_write(request: HttpRequest, workspace: Any) -> bool:
    membership = membership_for(request, workspace)
    return bool(membership and membership.can_write)


# --- pack list ------------------------------------------------------------------------------


# The packs page lists two keyset-paged tables, each with its own cursor: packs by slug
# (``after``) and drafts, most recently edited first (``drafts_after``).
PACK_PAGE = 50
DRAFT_PAGE = 50
# Version badges on a pack's row, newest first; the pack's page lists them all, a page at a time.
VERSIONS_SHOWN = 10
VERSION_PAGE = 50
_LIST_PARTIALS = ("pack_rows", "draft_rows")


@login_required
@require_GET
@member_page("Challenge packs")
def pack_list(request: HttpRequest) -> HttpResponse:
    workspace = request.workspace  # type: ignore[attr-defined]
    context: dict[str, Any] = {
        "workspace": workspace,
        "can_write": _can_write(request, workspace),
        "new_form": NewDraftForm(templates=services.draft_templates()),
        "open_form": OpenPackFileForm(),
        "versions_shown": VERSIONS_SHOWN,
        "pack_query": query_without(request.GET, "after"),
        "draft_query": query_without(request.GET, "drafts_after"),
    }
    partial = request.GET.get("partial") if request.htmx else None  # type: ignore[attr-defined]
    partial = partial if partial in _LIST_PARTIALS else None
    try:
        if partial != "draft_rows":
            context["pack_page"] = keyset_page(
                Pack.objects.for_list(workspace, versions_shown=VERSIONS_SHOWN),
                sort="slug",
                after=request.GET.get("after") or None,
                size=PACK_PAGE,
            )
        if partial != "pack_rows":
            context["draft_page"] = keyset_page(
                Draft.objects.for_list(workspace),
                sort="-updated_at",
                after=request.GET.get("drafts_after") or None,
                size=DRAFT_PAGE,
            )
    except InvalidCursor as exc:
        context["error"] = exc.page_message()
        return render(request, "packs/pack_list.html", context, status=400)
    if partial:
        return render(request, f"packs/pack_list.html#{partial}", {**context, "more": True})
    return render(request, "packs/pack_list.html", context)


@login_required
@require_http_methods(["GET", "POST"])
@member_page("Challenge packs")
def draft_new(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        # The "New pack" form lives on the packs page (a bookmark or a typed URL was a
        # blank 405 here).
        return redirect("pack-list")
    workspace = request.workspace  # type: ignore[attr-defined]
    check_write(request, workspace)
    form = NewDraftForm(request.POST, templates=services.draft_templates())
    if not form.is_valid():
        messages.error(request, "Choose one of the templates.")
        return redirect("pack-list")
    template = form.cleaned_data["template"]
    name = form.cleaned_data["name"]
    if template:
        draft = services.draft_from_template(
            workspace=workspace, user=request.user, template=template, name=name
        )
    else:
        draft = services.draft_blank(workspace=workspace, user=request.user, name=name)
    return redirect("draft-editor", draft_id=draft.public_id)


@login_required
@require_http_methods(["GET", "POST"])
@member_page("Challenge packs")
def draft_open_file(request: HttpRequest) -> HttpResponse:
    """A pack file (YAML or zip bundle) the author has, opened as a new draft."""
    if request.method == "GET":  # the form lives on the packs page
        return redirect("pack-list")
    workspace = request.workspace  # type: ignore[attr-defined]
    check_write(request, workspace)
    form = OpenPackFileForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, " ".join(e for errors in form.errors.values() for e in errors))
        return redirect("pack-list")
    upload = form.cleaned_data["file"]
    if upload.size > archive.MAX_BUNDLE_BYTES:  # refused before it is read into memory
        limit = archive.MAX_BUNDLE_BYTES // (1024 * 1024)
        messages.error(request, f"{upload.name} not opened: a pack bundle is at most {limit} MiB.")
        return redirect("pack-list")
    try:
        draft = services.draft_from_file(
            workspace=workspace,
            user=request.user,
            data=upload.read(),
            filename=upload.name,
            name=form.cleaned_data["name"].strip(),
        )
    except services.DraftError as exc:
        messages.error(request, f"Not opened: {exc}")
        return redirect("pack-list")
    messages.success(request, f"{upload.name} opened as a draft: validate it here, then publish.")
    return redirect("draft-editor", draft_id=draft.public_id)


# --- the draft editor -----------------------------------------------------------------------


def post_or_back_to_editor(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A form address of the editor: POST, and a GET (the address a refused form was answered
    at, typed again; the ``next`` of the login page after the session ended mid-edit) goes
    back to the editor, which checks access itself; other methods are 405."""

    @functools.wraps(view)
    def wrapped(request: HttpRequest, draft_id: Any) -> HttpResponse:
        if request.method in ("GET", "HEAD"):
            return redirect("draft-editor", draft_id=draft_id)
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        return view(request, draft_id)

    return wrapped


# Above this many lines the line-number gutter is left to editor.js, which builds it on load
# anyway: 140,000 server-rendered spans were 4 MB of the page and seconds of rendering.
GUTTER_SERVER_LINES = 5000


def _gutter(text: str) -> range:
    lines = text.count("\n") + 1
    return range(1, lines + 1) if lines <= GUTTER_SERVER_LINES else range(0)


def _files(draft: Draft) -> list[dict[str, Any]]:
    artifacts = {
        str(a.public_id): a
        for a in Artifact.objects.filter(workspace=draft.workspace, public_id__in=list(draft.files.values()))
    }
    return [
        {"path": path, "artifact": artifacts.get(artifact_id)}
        for path, artifact_id in sorted(draft.files.items())
    ]


def _editor_context(
    request: HttpRequest, draft: Draft, *, report: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    """The editor page's context; its report is ``report``, else the draft's stored or
    computed one (``draft_reports.draft_report``), or a pending one that editor.js loads
    when another request is still computing it."""
    if report is None:
        report = draft_reports.draft_report(draft)
    outline = report["outline"] if report is not None else None
    context = {
        "draft": draft,
        "report": report,
        "report_pending": report is None,
        "outline": outline,
        "files": _files(draft),
        "gutter": _gutter(draft.bundle_text),
        "can_write": _can_write(request, draft.workspace),
        "text_form": DraftTextForm(
            initial={"name": draft.name, "bundle_text": draft.bundle_text, "revision": draft.revision}
        ),
        "upload_form": FileUploadForm(),
        "case_editor": None,
        "case_error": None,
    }
    context.update(extra)
    if context["case_editor"] is None and outline is not None:
        first_set = outline["input_sets"][0]["key"] if outline["input_sets"] else "default"
        first_challenge = outline["challenges"][0]["key"] if outline["challenges"] else ""
        context["case_editor"] = CaseEditor(
            initial={"input_set_key": first_set, "challenge_key": first_challenge}
        )
    return context


@login_required
@require_GET
def draft_editor(request: HttpRequest, draft_id: Any) -> HttpResponse:
    draft = get_draft_for_user(request, draft_id=draft_id)
    return render(request, "packs/draft_editor.html", _editor_context(request, draft))


def _text_form(request: HttpRequest, draft: Draft) -> DraftTextForm:
    """The posted name and text; a field left out of the POST keeps the draft's value (a
    client posting only the name does not empty the text)."""
    data = request.POST.copy()
    data.setdefault("name", draft.name)
    data.setdefault("bundle_text", draft.bundle_text)
    return DraftTextForm(data)


def _save_text(draft: Draft, form: DraftTextForm) -> bool:
    """Save a valid form's name and text; False (the form holding why) when nothing was saved."""
    if not form.is_valid():
        return False
    try:
        services.draft_update(
            draft=draft,
            name=form.cleaned_data["name"] or None,
            bundle_text=form.cleaned_data["bundle_text"],
            revision=form.cleaned_data["revision"],
        )
    except services.DraftConflict as exc:
        draft.refresh_from_db()  # the report and structure shown are of the saved draft
        form.add_error(None, ValidationError(str(exc), code="conflict"))
        return False
    except services.DraftError as exc:
        form.add_error(None, str(exc))
        return False
    return True


def _save_refused(request: HttpRequest, draft: Draft, form: DraftTextForm, *, what: str) -> HttpResponse:
    """Nothing was saved (400, or 409 when the draft changed since the editor loaded it): the
    editor again with each error next to its field and the posted name and text kept in the
    form, or for htmx (the autosave) the message alone, which the editor's script shows as
    the save status."""
    errors = [message for field_errors in form.errors.values() for message in field_errors]
    fields = [name for name in form.errors if name in form.fields]
    conflict = form.has_error(NON_FIELD_ERRORS, code="conflict")
    status = 409 if conflict else 400
    kept = (
        "Your text is still here: copy it before you reload if you want to keep it."
        if conflict
        else "The draft keeps its last saved name and text."
    )
    message = f"Not {what}: {' '.join(errors)} {kept}"
    if request.htmx:  # type: ignore[attr-defined]
        context = {
            "save_error": message,
            "save_error_field": fields[0] if fields else "",
            "save_conflict": conflict,
        }
        return render(request, "packs/draft_editor.html#save_error", context, status=status)
    shown = form["bundle_text"].value() or ""
    context = _editor_context(
        request,
        draft,
        text_form=form,
        save_error=f"Not {what}. Your name and text are still in the form below; the draft keeps "
        "its last saved name and text, and the report is of that text.",
        save_conflict=conflict,
        gutter=_gutter(shown),
    )
    return render(request, "packs/draft_editor.html", context, status=status)


DRAFT_GONE = (
    "Not saved: this draft is gone (published or deleted, in another tab or by another user). "
    "Your text is only in this page now: copy it before you leave."
)


@login_required
@post_or_back_to_editor
def draft_save(request: HttpRequest, draft_id: Any) -> HttpResponse:
    """Save the text and name and answer the validation report: the debounced htmx POST of
    the editor, or a plain form submit. Both are saved or neither (400 naming the field)."""
    try:
        draft = get_draft_for_user(request, write=True, draft_id=draft_id)
    except Http404:
        if not request.htmx:  # type: ignore[attr-defined]
            raise
        # An editor still open on a draft published or deleted since (another tab, another
        # user): its autosave said "the server answered 404 ... try again", which never works.
        context = {"save_error": DRAFT_GONE, "save_error_field": "", "save_gone": True}
        return render(request, "packs/draft_editor.html#save_error", context, status=404)
    form = _text_form(request, draft)
    if not _save_text(draft, form):
        return _save_refused(request, draft, form, what="saved")
    if request.htmx:  # type: ignore[attr-defined]
        # Answered at once: with the stored report when it is of this text (a rename), else
        # with a pending report that editor.js loads from draft_report (a full validation
        # of a 10,000-case pack takes seconds; the save does not wait for it).
        report = draft_reports.stored_report(draft)
        if report is None:
            context = _pending_context(request, draft)
        else:
            context = _editor_context(request, draft, report=report)
        return render(request, "packs/draft_editor.html#autosave", context)
    messages.success(request, "Draft saved.")
    return redirect("draft-editor", draft_id=draft.public_id)


def _pending_context(request: HttpRequest, draft: Draft) -> dict[str, Any]:
    return {
        "draft": draft,
        "report": None,
        "report_pending": True,
        "report_saved": True,
        "can_write": _can_write(request, draft.workspace),
    }


@login_required
@require_GET
def draft_report(request: HttpRequest, draft_id: Any) -> HttpResponse:
    """The report of the draft at ``?revision=N`` (and the side panel, out of band), loaded by
    the editor after an autosave answered without it. 204 when the draft is no longer at that
    revision: a later save's own request loads the report of its text, and a report of one
    revision is never shown as another's."""
    draft = get_draft_for_user(request, draft_id=draft_id)
    try:
        revision = int_param(request.GET, "revision")
    except BadParameter as exc:
        return HttpResponse(exc.message, status=400, content_type="text/plain")
    if revision is not None and revision != draft.revision:
        return HttpResponse(status=204)
    context = _editor_context(request, draft)
    return render(request, "packs/draft_editor.html#report_answer", context)


@login_required
@require_GET
def draft_case_form(request: HttpRequest, draft_id: Any) -> HttpResponse:
    """The structured form for one case (``?set=&case=``), or for a new case."""
    draft = get_draft_for_user(request, draft_id=draft_id)
    set_key, case_key = request.GET.get("set", ""), request.GET.get("case", "").strip()
    editor = None
    error = None
    if case_key:
        try:
            case = yaml_edit.find_case(draft.bundle_text, input_set_key=set_key, case_key=case_key)
        except yaml_edit.YamlEditError:
            case = None
        if case is None:
            # A key typed into "open one by key" (or an Edit link the text has moved past):
            # the editor says so where the form would be, not a bare 404 page.
            error = f"Input set {set_key} has no case {case_key}; keys are case-sensitive."
        else:
            editor = CaseEditor.for_case(set_key, case)
    context = _editor_context(request, draft, case_editor=editor, case_error=error)
    if request.htmx and context["case_editor"] is not None:  # type: ignore[attr-defined]
        # htmx focuses [autofocus] in swapped content: the keyboard lands in the new form.
        context["case_editor"].form.fields["case_key"].widget.attrs["autofocus"] = True
        return render(request, "packs/draft_editor.html#case_form", context)
    return render(request, "packs/draft_editor.html", context, status=404 if error else 200)


@login_required
@post_or_back_to_editor
def draft_case_save(request: HttpRequest, draft_id: Any) -> HttpResponse:
    draft = get_draft_for_user(request, write=True, draft_id=draft_id)
    editor = CaseEditor(request.POST)
    if editor.is_valid():
        try:
            services.draft_case_upsert(draft=draft, edit=editor.to_edit())
        except services.DraftError as exc:
            return _case_refused(request, draft, editor, str(exc))
        messages.success(request, f"Case {editor.form.cleaned_data['case_key']!r} saved.")
        return redirect(reverse("draft-editor", kwargs={"draft_id": draft.public_id}) + "#structure")
    return _case_refused(request, draft, editor, "Fix the fields marked below.")


def _case_refused(request: HttpRequest, draft: Draft, editor: CaseEditor, message: str) -> HttpResponse:
    """The editor again (400) with the case form as posted and the focus in it, on the first
    field with an error (else the case key): the form is far down the side panel."""
    fields = editor.form.fields
    first = next((name for name in fields if name in editor.form.errors), "case_key")
    fields[first].widget.attrs["autofocus"] = True
    context = _editor_context(request, draft, case_editor=editor, case_error=message)
    return render(request, "packs/draft_editor.html", context, status=400)


@login_required
@post_or_back_to_editor
def draft_case_delete(request: HttpRequest, draft_id: Any) -> HttpResponse:
    draft = get_draft_for_user(request, write=True, draft_id=draft_id)
    try:
        services.draft_case_delete(
            draft=draft, input_set_key=request.POST.get("set", ""), case_key=request.POST.get("case", "")
        )
    except services.DraftError as exc:
        messages.error(request, str(exc))
    return redirect(reverse("draft-editor", kwargs={"draft_id": draft.public_id}) + "#structure")


@login_required
@post_or_back_to_editor
def draft_file_upload(request: HttpRequest, draft_id: Any) -> HttpResponse:
    draft = get_draft_for_user(request, write=True, draft_id=draft_id)
    form = FileUploadForm(request.POST, request.FILES)
    if form.is_valid():
        upload = form.cleaned_data["file"]
        path = form.cleaned_data["path"].strip()
        asset_key = ""
        if not path:
            asset_key, path = _asset_named(draft, upload.name) or ("", upload.name)
        limit = archive.MAX_UNPACKED_BYTES
        if upload.size > limit:  # no bundle can hold it: refused before it is read into memory
            messages.error(
                request, f"{path} not added: a bundle unpacks to at most {limit // (1024 * 1024)} MiB."
            )
            return redirect(reverse("draft-editor", kwargs={"draft_id": draft.public_id}) + "#files")
        before = dict(draft.files)
        try:
            services.draft_file_add(
                draft=draft, path=path, data=upload.read(), user=request.user, media_type=upload.content_type
            )
        except services.DraftError as exc:
            messages.error(request, str(exc))
        else:
            message = _upload_message(draft, before, path, upload.size)
            if asset_key:
                message = message.replace(
                    " added to the bundle.", f" added to the bundle (the path of asset {asset_key})."
                )
            messages.success(request, message)
    else:
        messages.error(request, "Choose a file to upload.")
    return redirect(reverse("draft-editor", kwargs={"draft_id": draft.public_id}) + "#files")


def _asset_named(draft: Draft, filename: str) -> tuple[str, str] | None:
    """``(key, path)`` of the one asset path of the draft ending in ``filename``
    (``data/invoices.json`` for ``invoices.json``) that has no file yet, else None: a file
    uploaded without a path goes there, where it binds, not beside it under its bare name."""
    found = {
        path: key
        for key, path in yaml_edit.asset_paths(draft.bundle_text)
        if path.rsplit("/", 1)[-1] == filename and path.removeprefix("./") not in draft.files
    }
    if len(found) != 1:
        return None
    path, key = found.popitem()
    return key, path


def _upload_message(draft: Draft, before: dict[str, str], path: str, size: int) -> str:
    """What an upload did: a new file, or one replacing the file at its path (the second
    upload to a path said "added" and the first file was gone)."""
    changed = next((p for p, artifact_id in draft.files.items() if before.get(p) != artifact_id), None)
    if changed is None:
        return f"{path} is unchanged: the bundle has these exact bytes at that path."
    if changed not in before:
        return f"{changed} added to the bundle."
    old = Artifact.objects.filter(workspace=draft.workspace, public_id=before[changed]).first()
    was = filesizeformat(old.size) if old is not None else "another file"
    return f"{changed} replaced (it was {was}, it is {filesizeformat(size)})."


@login_required
@post_or_back_to_editor
def draft_file_remove(request: HttpRequest, draft_id: Any) -> HttpResponse:
    draft = get_draft_for_user(request, write=True, draft_id=draft_id)
    path = request.POST.get("path", "")
    try:
        services.draft_file_remove(draft=draft, path=path)
        messages.success(request, f"{path} removed from the bundle.")
    except services.DraftError as exc:  # e.g. the draft was changed elsewhere in between
        messages.error(request, f"{path} not removed: {exc}")
    return redirect(reverse("draft-editor", kwargs={"draft_id": draft.public_id}) + "#files")


@login_required
@post_or_back_to_editor
def draft_publish(request: HttpRequest, draft_id: Any) -> HttpResponse:
    """Save the posted text, then publish; the server validates again whatever the button said."""
    draft = get_draft_for_user(request, write=True, draft_id=draft_id)
    form = _text_form(request, draft)
    if not _save_text(draft, form):
        return _save_refused(request, draft, form, what="saved or published")
    strict = request.POST.get("strict") == "on"
    try:
        result = services.draft_publish(draft=draft, user=request.user, strict=strict)
    except services.PackInvalid as exc:
        issues = exc.report_body["errors"]
        if strict and all(issue.get("rule") for issue in issues):
            # Under strict every warning is an error keeping its rule: these are warnings.
            message = (
                "Strict mode: warnings block publishing. Fix the warnings below, or publish without strict."
            )
        else:
            message = "The pack has errors; fix them before publishing."
        context = _editor_context(request, draft, publish_error=message, publish_issues=issues, strict=strict)
        return render(request, "packs/draft_editor.html", context, status=400)
    except services.PublishConflict as exc:
        # The conflicting value's position is at the end of the message; the editor also
        # offers it as a button that moves the cursor there, as the report's issues do.
        position = {"field": exc.field, "line": exc.line, "column": exc.column}
        context = _editor_context(
            request, draft, publish_error=exc.message, publish_position=position, strict=strict
        )
        return render(request, "packs/draft_editor.html", context, status=409)
    if result.already_published:
        messages.info(request, f"These exact bytes are already version {result.version.number}.")
    else:
        messages.success(request, f"Published {result.pack.slug} version {result.version.number}.")
    return redirect("version-detail", version_id=result.version.public_id)


@login_required
@post_or_back_to_editor
def draft_delete(request: HttpRequest, draft_id: Any) -> HttpResponse:
    draft = get_draft_for_user(request, write=True, draft_id=draft_id)
    services.draft_delete(draft=draft)
    messages.success(request, f"Draft {draft.name!r} deleted.")
    return redirect("pack-list")


# --- packs and versions ---------------------------------------------------------------------


@login_required
@require_GET
def pack_detail(request: HttpRequest, pack_id: Any) -> HttpResponse:
    """The pack and its history, newest first, a keyset page of versions at a time (a pack
    with thousands of versions listed them all, and twice more in the compare selects)."""
    pack = get_pack_for_user(request, pack_id=pack_id)
    context: dict[str, Any] = {
        "pack": pack,
        "can_write": _can_write(request, pack.workspace),
        "version_query": query_without(request.GET, "after"),
    }
    response = page_into(
        request,
        "packs/pack_detail.html",
        context,
        PackVersion.objects.for_history(pack),
        sort="-number",
        size=VERSION_PAGE,
        items="versions",
        partial="version_rows",
    )
    if response is not None:
        return response
    return render(request, "packs/pack_detail.html", context)


@login_required
@require_GET
def version_detail(request: HttpRequest, version_id: Any) -> HttpResponse:
    from packs.api import download_name

    version = get_version_for_user(request, queryset=PackVersion.objects.for_detail(), version_id=version_id)
    members = services.version_members(version)
    source = members.get("pack.yaml", b"").decode("utf-8", errors="replace")
    # The page shows the first cases only, so its cost does not grow with the version.
    cases = list(Case.objects.for_version(version).defer("document")[: CASES_SHOWN + 1])
    previous = (
        PackVersion.objects.filter(pack=version.pack, number__lt=version.number)
        .order_by("-number")
        .values_list("number", flat=True)
        .first()
    )
    return render(
        request,
        "packs/version_detail.html",
        {
            "version": version,
            "pack": version.pack,
            "download_name": download_name(version),
            "source_lines": source.splitlines(),
            "members": sorted((name, len(data)) for name, data in members.items() if name != "pack.yaml"),
            "cases": cases[:CASES_SHOWN],
            "more_cases": len(cases) > CASES_SHOWN,
            "previous_number": previous,
            "can_write": _can_write(request, version.pack.workspace),
        },
    )


@login_required
@require_GET
def version_bundle(request: HttpRequest, version_id: Any) -> HttpResponse:
    from packs.api import bundle_response

    version = get_version_for_user(request, version_id=version_id)
    return bundle_response(version)


@login_required
@require_POST
def version_new_draft(request: HttpRequest, version_id: Any) -> HttpResponse:
    version = get_version_for_user(request, write=True, version_id=version_id)
    draft = services.draft_from_version(version=version, user=request.user)
    messages.success(request, f"New draft {draft.name!r} created from version {version.number}.")
    return redirect("draft-editor", draft_id=draft.public_id)


@login_required
@require_GET
def version_diff(request: HttpRequest, pack_id: Any) -> HttpResponse:
    """``?from=&to=`` version numbers (default: the latest and the one before it). A value
    that is not a whole number a database can hold is a 400 naming its parameter; a version
    the pack does not have, a 404."""
    pack = get_pack_for_user(request, pack_id=pack_id)
    numbers = PackVersion.objects.filter(pack=pack).order_by("-number").values_list("number", flat=True)
    try:
        to_number = int_param(request.GET, "to")
        from_number = int_param(request.GET, "from")
    except BadParameter as exc:
        newest = numbers.first()
        typed = {"to": newest, "from": numbers.filter(number__lt=newest).first() if newest else None}
        context = {"pack": pack, "error": exc.message, "error_field": exc.name, "typed": typed}
        return render(request, "packs/version_diff.html", context, status=400)
    if to_number is None:
        to_number = numbers.first() or 0
    if from_number is None:
        from_number = numbers.filter(number__lt=to_number).first() or to_number
    found = {
        v.number: v
        for v in PackVersion.objects.for_source().filter(pack=pack, number__in=[from_number, to_number])
    }
    missing = next(
        ((name, n) for name, n in (("from", from_number), ("to", to_number)) if n not in found), None
    )
    if missing is not None:
        # The numbers are typed now (the selects listed every version): say which one is wrong.
        name, number = missing
        newest = numbers.first()
        has = f"its newest is v{newest}" if newest else "it has no version yet"
        context = {
            "pack": pack,
            "error": f"{name}: {pack.slug} has no version {number}; {has}.",
            "error_field": name,
            "typed": {"from": from_number, "to": to_number},
        }
        return render(request, "packs/version_diff.html", context, status=404)
    lines = selectors.version_diff(found[from_number], found[to_number])
    return render(
        request,
        "packs/version_diff.html",
        {"pack": pack, "old": found[from_number], "new": found[to_number], "lines": lines},
    )


# --- assets ------------------------------------------------------------------------------


_TOKEN = r"[A-Za-z0-9!#$%&'*+.^_`|~-]+"
# RFC 9110 §8.3.1: type "/" subtype *( ";" parameter ), a parameter's value a token or a
# quoted string without control characters.
_MEDIA_TYPE = re.compile(
    rf"{_TOKEN}/{_TOKEN}(?:[ \t]*;[ \t]*{_TOKEN}=(?:{_TOKEN}|\"[^\"\\\x00-\x1f\x7f]*\"))*"
)


def _served_media_type(media_type: str) -> str:
    """The asset's media type when it is a valid header value of that form, else
    ``application/octet-stream``: the pack's ``media_type`` is any text, and a line break in
    it made Django refuse the header (a 500 for every download of the asset)."""
    media_type = (media_type or "").strip()
    if len(media_type) <= 200 and _MEDIA_TYPE.fullmatch(media_type):
        return media_type
    return "application/octet-stream"


def _asset_file_response(asset: Asset) -> FileResponse:
    if not asset.file:
        raise Http404("This asset has no stored file.")
    handle = asset.file.storage.open(asset.file.name, "rb")
    filename = asset.path.rsplit("/", 1)[-1] or asset.key
    return FileResponse(
        handle,
        as_attachment=True,
        filename=filename,
        content_type=_served_media_type(asset.media_type),
    )


@require_GET
def asset_signed_download(request: HttpRequest, token: str) -> HttpResponse:
    """Agents fetch case assets without credentials through a signed, expiring link."""
    try:
        from agentclash_site.lib.signing import InvalidAssetToken, verify_asset_token
    except ImportError:  # pragma: no cover - the site helper ships with the foundation
        raise Http404("Asset links are not available.") from None
    try:
        asset_id = verify_asset_token(token)
    except InvalidAssetToken:
        raise Http404("This asset link is invalid or has expired.") from None
    asset = Asset.objects.filter(public_id=asset_id).first() if _is_uuid(asset_id) else None
    if asset is None:
        raise Http404("No such asset.")
    return _asset_file_response(asset)


@login_required
@require_GET
def asset_download(request: HttpRequest, asset_id: Any) -> HttpResponse:
    """A member of the asset's workspace downloads it from the version page."""
    return _asset_file_response(get_asset_for_user(request, asset_id=asset_id))


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True

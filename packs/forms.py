"""Forms of the pack editor: new draft, draft text, structured case editing, file upload."""

from __future__ import annotations

from typing import Any

from django import forms

from packs.services.drafts import MAX_BUNDLE_TEXT
from packs.services.yaml_edit import CaseEdit, format_value, parse_value

KEY_HELP = "letters, digits, dashes and underscores"


class NewDraftForm(forms.Form):
    template = forms.ChoiceField(label="Start from", required=False)
    name = forms.CharField(max_length=300, required=False)

    def __init__(self, *args: Any, templates: list[dict[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = [(t["name"], t["title"]) for t in templates]
        self.fields["template"].choices = [("", "A blank pack"), *choices]


class OpenPackFileForm(forms.Form):
    """A pack YAML or zip bundle opened as a new draft (the packs page)."""

    file = forms.FileField(
        label="Pack file", error_messages={"required": "Choose a pack YAML or zip to open."}
    )
    name = forms.CharField(max_length=300, required=False, label="Draft name")


class DraftTextForm(forms.Form):
    """The editor's name and text. Both are checked here, before anything is saved: a save
    stores both or neither."""

    name = forms.CharField(
        label="Draft name",
        max_length=300,
        required=False,
        error_messages={
            "max_length": "Draft name must be at most %(limit_value)d characters (it has %(show_value)d)."
        },
    )
    bundle_text = forms.CharField(label="pack.yaml", required=False, strip=False, widget=forms.Textarea)
    # The draft revision the editor loaded (or last saved): a save based on an older one is
    # refused. Left out (an older client), the save is based on the draft as it is now.
    revision = forms.IntegerField(
        required=False, min_value=1, widget=forms.HiddenInput(attrs={"id": "draft-revision"})
    )

    def clean_bundle_text(self) -> str:
        text = self.cleaned_data["bundle_text"].replace("\r\n", "\n")
        size = len(text.encode())
        if size > MAX_BUNDLE_TEXT:
            raise forms.ValidationError(
                f"pack.yaml must be at most 5 MiB ({MAX_BUNDLE_TEXT:,} bytes); this text is {size:,} "
                "bytes. Move large data into bundle files (see Bundle files)."
            )
        return text


def _cell(label: str, placeholder: str = "") -> forms.TextInput:
    return forms.TextInput(
        attrs={"aria-label": label, "placeholder": placeholder or label, "autocomplete": "off"}
    )


class PayloadRow(forms.Form):
    key = forms.CharField(max_length=200, required=False, widget=_cell("payload key", "key"))
    value = forms.CharField(required=False, strip=False, widget=_cell("payload value", "value"))


class InputRow(forms.Form):
    key = forms.CharField(max_length=200, required=False, widget=_cell("input key", "key"))
    kind = forms.CharField(max_length=100, required=False, initial="text", widget=_cell("input kind", "kind"))
    value = forms.CharField(required=False, strip=False, widget=_cell("input value", "value"))


class ExpectationRow(forms.Form):
    key = forms.CharField(max_length=200, required=False, widget=_cell("expectation key", "key"))
    kind = forms.CharField(
        max_length=100, required=False, initial="text", widget=_cell("expectation kind", "kind")
    )
    value = forms.CharField(required=False, strip=False, widget=_cell("expectation value", "value"))
    source = forms.CharField(
        max_length=300, required=False, widget=_cell("expectation source", "input:<key> or artifact:<key>")
    )


PayloadFormSet = forms.formset_factory(PayloadRow, extra=2)
InputFormSet = forms.formset_factory(InputRow, extra=1)
ExpectationFormSet = forms.formset_factory(ExpectationRow, extra=1)


class CaseForm(forms.Form):
    input_set_key = forms.CharField(
        label="Input set", max_length=200, widget=forms.TextInput(attrs={"list": "input-set-keys"})
    )
    challenge_key = forms.CharField(
        label="Challenge", max_length=200, widget=forms.TextInput(attrs={"list": "challenge-keys"})
    )
    case_key = forms.CharField(label="Case key", max_length=200)
    original_case_key = forms.CharField(required=False, widget=forms.HiddenInput)


class CaseEditor:
    """The case form and its three row formsets, bound or initial, as one unit."""

    def __init__(self, data: Any = None, *, initial: dict[str, Any] | None = None) -> None:
        initial = initial or {}
        self.form = CaseForm(data, initial=initial)
        self.payload = PayloadFormSet(data, prefix="payload", initial=initial.get("payload_rows"))
        self.inputs = InputFormSet(data, prefix="inputs", initial=initial.get("input_rows"))
        self.expectations = ExpectationFormSet(
            data, prefix="expectations", initial=initial.get("expectation_rows")
        )

    @property
    def editing(self) -> bool:
        return bool(self.form["original_case_key"].value())

    def is_valid(self) -> bool:
        return all(f.is_valid() for f in (self.form, self.payload, self.inputs, self.expectations))

    def to_edit(self) -> CaseEdit:
        data = self.form.cleaned_data
        payload = {
            row["key"].strip(): parse_value(row.get("value") or "")
            for row in self.payload.cleaned_data
            if row and row.get("key", "").strip()
        }
        return CaseEdit(
            input_set_key=data["input_set_key"].strip(),
            challenge_key=data["challenge_key"].strip(),
            case_key=data["case_key"].strip(),
            payload=payload,
            inputs=_rows(self.inputs.cleaned_data, ("kind",), "value"),
            expectations=_rows(self.expectations.cleaned_data, ("kind", "source"), "value"),
            original_case_key=(data.get("original_case_key") or "").strip(),
        )

    @classmethod
    def for_case(cls, input_set_key: str, case: dict[str, Any]) -> CaseEditor:
        """Initial values from a case mapping as the YAML holds it."""
        key = str(case.get("case_key") or case.get("item_key") or "").strip()
        payload = case.get("payload") or {}
        return cls(
            initial={
                "input_set_key": input_set_key,
                "challenge_key": case.get("challenge_key") or "",
                "case_key": key,
                "original_case_key": key,
                "payload_rows": [{"key": k, "value": format_value(v)} for k, v in payload.items()]
                if isinstance(payload, dict)
                else [],
                "input_rows": [
                    _row_initial(r, ("key", "kind")) for r in case.get("inputs") or [] if isinstance(r, dict)
                ],
                "expectation_rows": [
                    _row_initial(r, ("key", "kind", "source"))
                    for r in case.get("expectations") or []
                    if isinstance(r, dict)
                ],
            }
        )


def _row_initial(row: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    out = {name: str(row.get(name) or "") for name in names}
    out["value"] = format_value(row.get("value")) if "value" in row else ""
    return out


def _rows(
    cleaned: list[dict[str, Any]], text_fields: tuple[str, ...], value_field: str
) -> list[dict[str, Any]]:
    rows = []
    for row in cleaned:
        if not row or not (row.get("key") or "").strip():
            continue
        out: dict[str, Any] = {"key": row["key"].strip()}
        for name in text_fields:
            if (row.get(name) or "").strip():
                out[name] = row[name].strip()
        raw = row.get(value_field) or ""
        if raw.strip():
            out[value_field] = parse_value(raw)
        rows.append(out)
    return rows


class FileUploadForm(forms.Form):
    file = forms.FileField()
    path = forms.CharField(
        max_length=500,
        required=False,
        help_text="where the pack's asset path points; default: the path of the asset named like the file, else the file name",
    )

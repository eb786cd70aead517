"""Forms of the workspace pages: adding a member and changing one's role."""

from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser

from agentclash_site.workspaces.models import Role

ROLE_HELP = "Owners manage members; editors change packs, deployments and runs; viewers only look."


def _role_field() -> forms.ChoiceField:
    return forms.ChoiceField(
        choices=Role.choices,
        initial=Role.VIEWER,
        help_text=ROLE_HELP,
        error_messages={
            "required": "Choose a role: owner, editor or viewer.",
            "invalid_choice": "Choose a role: owner, editor or viewer (%(value)s is not one).",
        },
    )


def find_user(text: str) -> AbstractBaseUser:
    """The user whose username is ``text``, else the one whose email it is (any case).
    Raises ``ValidationError`` naming what to do when there is none, or several."""
    User = get_user_model()
    user = User._default_manager.filter(**{User.USERNAME_FIELD: text}).first()
    if user is not None:
        return user
    email_field = User.get_email_field_name()
    if "@" in text and email_field:
        found = list(User._default_manager.filter(**{f"{email_field}__iexact": text})[:2])
        if len(found) == 1:
            return found[0]
        if found:
            raise forms.ValidationError(
                f"Several users have the email {text}: give the username of the one to add."
            )
    raise forms.ValidationError(
        f"No user has the username or email {text!r}. Check the spelling; "
        "a person needs an account here before they can be added (an administrator creates accounts)."
    )


class MemberAddForm(forms.Form):
    member = forms.CharField(
        label="Username or email",
        max_length=254,
        error_messages={"required": "Give the username or email of the person to add."},
    )
    role = _role_field()

    def clean_member(self) -> AbstractBaseUser:
        return find_user(self.cleaned_data["member"].strip())


class MemberRoleForm(forms.Form):
    role = _role_field()

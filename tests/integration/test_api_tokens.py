"""The JSON API's tokens as an operator manages them: the admin's add form
makes a key and shows it once, and `manage.py api_tokens` lists, creates and
revokes them."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from runs.models import ApiToken

pytestmark = pytest.mark.django_db

KEY_IN_MESSAGE = re.compile(r": (\S{40,}) — copy it now, it is not shown again")


@pytest.fixture
def superuser(django_user_model):
    return django_user_model.objects.create_superuser("root", password="root-pass")


def add_in_admin(client: Client, user, name: str) -> str:
    """The key the admin shows after "Add API token"'s save."""
    response = client.post("/admin/runs/apitoken/add/", {"user": user.pk, "name": name}, follow=True)
    assert response.redirect_chain and response.status_code == 200, response.content.decode()[:2000]
    keys = KEY_IN_MESSAGE.findall(response.content.decode())
    assert len(keys) == 1, response.content.decode()
    return keys[0]


def runs_with(key: str):
    return Client().get("/api/runs", headers={"Authorization": f"Token {key}"})


def test_the_admin_makes_the_key_and_shows_it_once(superuser, owner):
    admin = Client()
    admin.force_login(superuser)
    form = admin.get("/admin/runs/apitoken/add/").content.decode()
    assert 'name="key_hash"' not in form and 'name="prefix"' not in form

    first = add_in_admin(admin, owner, "ci")
    second = add_in_admin(admin, owner, "laptop")  # was a 500: two empty key hashes

    assert first != second
    assert runs_with(first).status_code == 200
    assert runs_with(second).status_code == 200
    tokens = ApiToken.objects.order_by("id")
    assert [(t.name, t.prefix) for t in tokens] == [("ci", first[:8]), ("laptop", second[:8])]
    assert all(t.key_hash for t in tokens)
    # The key is in no page after that one message: not the list, not the token's own page.
    for page in ("/admin/runs/apitoken/", f"/admin/runs/apitoken/{tokens[0].pk}/change/"):
        html = admin.get(page).content.decode()
        assert first[:8] in html and first not in html


def test_a_token_deleted_in_the_admin_stops_working(superuser, owner):
    admin = Client()
    admin.force_login(superuser)
    key = add_in_admin(admin, owner, "ci")
    token = ApiToken.objects.get()
    admin.post(f"/admin/runs/apitoken/{token.pk}/delete/", {"post": "yes"})
    assert runs_with(key).status_code == 401


def test_the_database_refuses_a_token_without_a_key(owner):
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        ApiToken.objects.create(user=owner, prefix="", key_hash="")


def manage(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("api_tokens", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_the_command_creates_lists_and_revokes(owner, teammate):
    key, note = manage("create", "owner", "--name", "ci")
    key = key.strip()
    assert "not shown again" in note and key not in note
    assert runs_with(key).status_code == 200
    manage("create", "teammate", "--name", "laptop")

    listing, _ = manage("list")
    lines = listing.splitlines()
    assert lines[0].split() == ["id", "prefix", "user", "name", "created", "last", "used"]
    assert len(lines) == 3 and key[:8] in lines[1] and "owner" in lines[1] and "ci" in lines[1]
    assert key not in listing
    only_teammate, _ = manage("list", "--user", "teammate")
    assert "laptop" in only_teammate and "owner" not in only_teammate

    revoked, _ = manage("revoke", key[:8])
    assert f"revoked {key[:8]}" in revoked
    assert runs_with(key).status_code == 401
    assert ApiToken.objects.filter(user=teammate).count() == 1


def test_revoke_by_id_or_every_token_of_a_user(owner, teammate):
    manage("create", "owner")
    manage("create", "owner")
    manage("create", "teammate")
    first = ApiToken.objects.filter(user=owner).order_by("id").first()
    manage("revoke", str(first.id))
    assert ApiToken.objects.filter(user=owner).count() == 1
    manage("revoke", "--user", "owner")
    assert not ApiToken.objects.filter(user=owner).exists()
    assert ApiToken.objects.filter(user=teammate).count() == 1


def test_revoke_deletes_nothing_unless_it_finds_every_token(owner):
    key = manage("create", "owner")[0].strip()
    with pytest.raises(CommandError, match="no token 'nosuch'"):
        manage("revoke", key[:8], "nosuch")
    assert runs_with(key).status_code == 200
    with pytest.raises(CommandError, match="name the tokens"):
        manage("revoke")
    with pytest.raises(CommandError, match="no user 'ghost'"):
        manage("create", "ghost")

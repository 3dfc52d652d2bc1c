"""manage.py api_tokens list|create|revoke: the JSON API's tokens, for an
operator. A token is named by its prefix (the key's first 8 characters, shown
by ``list`` and the admin) or its id; only the key's hash is stored, so a key
is printed once, by ``create``."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from runs.api.auth import create_token
from runs.models import ApiToken


def _user(username: str):
    User = get_user_model()
    try:
        return User.objects.get(**{User.USERNAME_FIELD: username})
    except User.DoesNotExist:
        raise CommandError(f"no user {username!r}") from None


def _when(moment) -> str:
    return moment.strftime("%Y-%m-%d %H:%M") if moment else "never"


class Command(BaseCommand):
    help = "List, create or revoke the JSON API's tokens."

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True, metavar="list|create|revoke")
        listing = actions.add_parser("list", help="Every token: id, prefix, user, name, created, last used.")
        listing.add_argument("--user", help="Only this user's tokens.")
        create = actions.add_parser("create", help="A new token for a user; its key is printed once.")
        create.add_argument("username")
        create.add_argument("--name", default="", help="What the token is for, to tell tokens apart.")
        revoke = actions.add_parser("revoke", help="Delete tokens: their keys stop working at once.")
        revoke.add_argument("tokens", nargs="*", metavar="TOKEN", help="A token's prefix or id.")
        revoke.add_argument("--user", help="Every token of this user.")

    def handle(self, *args, action: str, **options):
        getattr(self, f"_{action}")(**options)

    def _list(self, user=None, **options):
        tokens = ApiToken.objects.select_related("user").order_by("id")
        if user:
            tokens = tokens.filter(user=_user(user))
        rows = [
            (str(t.id), t.prefix, t.user.get_username(), t.name, _when(t.created), _when(t.last_used)) for t in tokens
        ]
        if not rows:
            self.stderr.write("no tokens")
            return
        header = ("id", "prefix", "user", "name", "created", "last used")
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            self.stdout.write("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())

    def _create(self, username: str, name: str, **options):
        token, key = create_token(_user(username), name)
        # The key alone on stdout, so scripts can capture it; the note goes to stderr.
        self.stderr.write(f"token {token.prefix}… for {username}: store the key now, it is not shown again")
        self.stdout.write(key)

    def _revoke(self, tokens: list[str], user=None, **options):
        if not tokens and not user:
            raise CommandError("name the tokens to revoke (prefix or id), or --user USERNAME for all of theirs")
        chosen: dict[int, ApiToken] = {}
        for ref in tokens:
            matches = list(ApiToken.objects.select_related("user").filter(prefix=ref))
            if not matches and ref.isdigit():
                matches = list(ApiToken.objects.select_related("user").filter(pk=int(ref)))
            if not matches:
                raise CommandError(f"no token {ref!r} (give a prefix or an id from `api_tokens list`)")
            if len(matches) > 1:
                ids = ", ".join(str(t.id) for t in matches)
                raise CommandError(f"{len(matches)} tokens start with {ref!r} (ids {ids}): give the id")
            chosen[matches[0].id] = matches[0]
        if user:
            chosen.update({t.id: t for t in ApiToken.objects.select_related("user").filter(user=_user(user))})
        # Nothing is deleted unless every name was found.
        for token in chosen.values():
            self.stdout.write(f"revoked {token.prefix}… (id {token.id}) of {token.user.get_username()}")
        ApiToken.objects.filter(pk__in=chosen).delete()
        if not chosen:
            self.stderr.write(f"{user} has no tokens")

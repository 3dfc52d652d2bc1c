from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from runs.api.auth import create_token


class Command(BaseCommand):
    help = "Create an API token for a user and print its key (shown only this once)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="What the token is for, to tell tokens apart.")

    def handle(self, *args, username: str, name: str, **options):
        User = get_user_model()
        try:
            user = User.objects.get(**{User.USERNAME_FIELD: username})
        except User.DoesNotExist:
            raise CommandError(f"no user {username!r}") from None
        token, key = create_token(user, name)
        # The key alone on stdout, so scripts can capture it; the note goes to stderr.
        self.stderr.write(f"token {token.prefix}… for {username}: store the key now, it is not shown again")
        self.stdout.write(key)

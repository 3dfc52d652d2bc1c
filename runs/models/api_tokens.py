"""Tokens for scripts calling the JSON API."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    """A token for scripts calling the JSON API (``Authorization: Token <key>``).
    Only a hash of the key is stored; the key is shown once, when created."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=8)
    key_hash = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # A token saved without a key matched no key and blocked the next one (unique).
            models.CheckConstraint(condition=~models.Q(key_hash=""), name="api_token_has_key"),
        ]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

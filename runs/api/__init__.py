"""The JSON API for scripts and the browser, on django-ninja: commands, runs, approvals, workflows.

app.py         the NinjaAPI: auth, error handlers, the JSON renderer, the OpenAPI document's additions
views.py       the operations (a ninja Router): parse with a schema, call an action, answer with a schema
schemas.py     pydantic models of every request and response body
bodies.py      the response models built from the records
auth.py        ``Authorization: Token <key>`` or the session (with CSRF), as ninja security classes
errors.py      ApiError and every refusal answered as JSON ``{"error": ...}``
rate_limits.py commands per minute per token (429 with Retry-After)
links.py       the document's OpenAPI links between operations
urls.py        the routes: HEAD wherever GET, JSON 405 and 404
"""

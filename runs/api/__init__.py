"""The JSON API for scripts and the browser: commands, runs, approvals, workflows.

auth.py     session or ``Authorization: Token <key>``, CSRF, the ``api_view`` decorator
schemas.py  pydantic models of every request and response body
views.py    the views: parse with a schema, call an action, answer with a schema
openapi.py  the route table and the OpenAPI 3.1 document built from the schemas
"""

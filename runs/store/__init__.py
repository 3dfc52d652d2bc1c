"""The one store the core's decisions are applied through (DESIGN.md, Rooms)."""

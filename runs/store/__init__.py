"""The one store the core's decisions are applied through (docs/architecture.md, "Layers")."""

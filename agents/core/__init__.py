"""The orchestration core: which steps may start (``ready``) and the state
machine that turns what happened in a run into decisions (``machine``).
Pure Python: no Django, no I/O."""

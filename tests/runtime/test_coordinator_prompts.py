"""The coordinator's prompts show the run: inputs rendered, the command,
the steps with their states, bounded for a wide run."""

from __future__ import annotations

from agents.coordinator_prompts import PromptStep, RunView, plan_prompt, states_text, system_prompt


def test_it_renders_the_agent_s_system_text_and_the_steps_with_the_run_s_inputs():
    view = RunView(
        workflow="relay",
        inputs={"subject": "tides", "count": 3},
        steps=[PromptStep("first", "sender", "running", "Tell $step about $subject, $count times, for $$5.")],
        command="relay tides",
    )

    prompt = system_prompt(view, "You relay news about $subject.")

    assert prompt.startswith("You relay news about tides.\n\nYou are the coordinator of the zenweb workflow 'relay'.")
    assert "The command that started it: relay tides" in prompt
    assert 'Its inputs: {"subject": "tides", "count": 3}' in prompt
    assert "- first (running): agent sender; Tell first about tides, 3 times, for $5." in prompt


def test_a_planning_prompt_without_a_command_still_carries_the_inputs():
    view = RunView(workflow="brief", inputs={"query": "tablets"}, steps=[], description="Research a question.")

    assert plan_prompt(view).startswith(
        'Plan the work for: Research a question.\nThe run\'s inputs: {"query": "tablets"}'
    )


def test_a_wide_run_s_states_name_at_most_twenty_ids_each():
    steps = [PromptStep(f"s{i}", "a", "completed" if i < 50 else "running") for i in range(52)]

    text = states_text(steps)

    assert text.startswith("Steps now: 50 completed (s0, s1,")
    assert "s19 and 30 more); 2 running (s50, s51)." in text

"""Ids wrap only after their separators (runs/templatetags/ids.py), escaped."""

from __future__ import annotations

from runs.templatetags.ids import id_breaks


def test_an_id_may_wrap_after_each_separator_and_before_a_bracket():
    assert id_breaks("deploy[0].ship") == "deploy<wbr>[0]<wbr>.<wbr>ship"
    assert id_breaks("vm:3921:Pool-1_3") == "vm:<wbr>3921:<wbr>Pool-<wbr>1_<wbr>3"


def test_an_id_is_escaped():
    assert id_breaks('<b x="1">') == "&lt;b x=&quot;1&quot;&gt;"
    assert id_breaks(None) == ""

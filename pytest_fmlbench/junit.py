"""Benchmark metrics in JUnit XML, in the form each junit_family allows.

xunit1 (and legacy) allow ``<properties>`` inside each ``<testcase>``: an item's metrics stay there.
xunit2, pytest's default, does not (its schema allows properties on the ``<testsuite>`` only, and pytest
warns that ``record_property`` is incompatible with it). There, each item's metrics become suite-level
properties named ``<item>.<metric>`` (e.g. ``fairness_fairlearn[seed0].test_metric``), so the file
validates and strict readers such as junitparser still find every metric.
"""

from __future__ import annotations

import pytest

from _pytest.junitxml import xml_key

TESTCASE_FAMILIES = ("xunit1", "legacy")
SEPARATOR = "."


def junit_family(config: pytest.Config) -> str | None:
    """The family of the XML being written, or None without --junitxml."""
    xml = config.stash.get(xml_key, None)
    return None if xml is None else xml.family


def suite_property_name(nodeid: str, name: str) -> str:
    return f"{nodeid.split('::')[-1]}{SEPARATOR}{name}"


def move_to_suite(config: pytest.Config, report: pytest.TestReport) -> bool:
    """On a benchmark item's teardown report (the one junitxml turns into properties), move its
    properties to the suite when the family allows none on a testcase. Returns whether any moved."""
    xml = config.stash.get(xml_key, None)
    if xml is None or xml.family in TESTCASE_FAMILIES or report.when != "teardown" or not report.user_properties:
        return False
    for name, value in report.user_properties:
        xml.add_global_property(suite_property_name(report.nodeid, name), value)
    report.user_properties = []
    return True


NOTE = ("JUnit XML ({family}): each item's metrics are suite-level properties named '<item>.<metric>' "
        "(xunit2 allows no properties on a testcase); for properties on each <testcase>, pass "
        "-o junit_family=xunit1")

"""JUnit XML that strict consumers read: valid xunit2 with suite-level metrics, or xunit1 per testcase."""

import xml.etree.ElementTree as ET

import junitparser
import pytest

from conftest import junit_props

METRICS = {"task", "agent", "model", "seed", "test_metric", "normalized_improvement", "integrity", "sandbox", "status"}

# what pytest's xunit2 schema (junit-10.xsd) allows where our output puts things
XUNIT2_TESTCASE_ATTRIBUTES = {"name", "classname", "time", "assertions", "status"}
XUNIT2_TESTCASE_CHILDREN = {"skipped", "error", "failure", "system-out", "system-err"}
XUNIT2_SUITE_ATTRIBUTES = {"name", "tests", "failures", "errors", "skipped", "time", "timestamp", "hostname",
                           "id", "package", "disabled", "assertions", "file", "log", "url", "version", "group"}
XUNIT2_SUITE_CHILDREN = {"properties", "testcase", "testsuite", "system-out", "system-err"}


def assert_xunit2_structure(path):
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    for suite in root.iter("testsuite"):
        assert set(suite.attrib) <= XUNIT2_SUITE_ATTRIBUTES, suite.attrib
        children = [child.tag for child in suite]
        assert set(children) <= XUNIT2_SUITE_CHILDREN, children
        assert children.count("properties") <= 1 and (children[0] == "properties" or "properties" not in children)
        for prop in suite.findall("properties/property"):
            assert set(prop.attrib) == {"name", "value"}
    for case in root.iter("testcase"):
        assert set(case.attrib) <= XUNIT2_TESTCASE_ATTRIBUTES, case.attrib
        assert {child.tag for child in case} <= XUNIT2_TESTCASE_CHILDREN, [c.tag for c in case]


def junitparser_metrics(path) -> dict[str, dict[str, str]]:
    """Every item's metrics as a dashboard script reads them with junitparser (the outcomes page's example)."""
    metrics: dict[str, dict[str, str]] = {}
    for suite in junitparser.JUnitXml.fromfile(str(path)):
        for prop in suite.properties():
            item, _, name = prop.name.rpartition(".")
            metrics.setdefault(item, {})[name] = prop.value
    return metrics


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_xunit2_by_default_validates_and_junitparser_reads_every_metric(pytester, toy, bench, workers):
    result = bench("--agent=baseline", "--seeds=2", "--junitxml=out.xml", *workers, "toy_task")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*JUnit XML (xunit2): each item's metrics are suite-level properties*"
                                 "-o junit_family=xunit1*"])
    path = pytester.path / "out.xml"
    assert_xunit2_structure(path)
    assert not list(ET.parse(path).getroot().iter("testcase"))[0].findall("properties")
    metrics = junitparser_metrics(path)
    for seed in (0, 1):
        item = metrics[f"toy_task[seed{seed}]"]
        assert METRICS <= set(item), set(item)
        assert item["seed"] == str(seed) and item["integrity"] == "ok" and float(item["test_metric"]) > 0.5
    assert junit_props(path, "toy_task[seed1]")["seed"] == "1"


@pytest.mark.parametrize("family", ["xunit1", "legacy"])
def test_xunit1_keeps_properties_on_each_testcase(pytester, toy, bench, family):
    result = bench("--agent=baseline", "-o", f"junit_family={family}", "--junitxml=out.xml", "-n", "2", "toy_task")
    result.assert_outcomes(passed=1)
    assert "suite-level properties" not in result.stdout.str()
    root = ET.parse(pytester.path / "out.xml").getroot()
    (case,) = root.iter("testcase")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert METRICS <= set(props)
    assert props["human"] == "false" and "human_active_s" not in props  # an agent's run, not a person's
    assert not [p for p in root.iter("property") if "." in p.get("name") and p.get("name").startswith("toy_task")]


def test_readme_junitparser_example_reads_the_metrics(pytester, toy, bench, monkeypatch):
    from doc_pages import one_example

    block = one_example(r"<!-- junitparser-example -->\n```python\n(.*?)```", "reference/outcomes.md")
    assert len(block.strip().splitlines()) == 5
    bench("--agent=baseline", "--junitxml=out.xml", "toy_task").assert_outcomes(passed=1)
    monkeypatch.chdir(pytester.path)
    namespace: dict = {}
    exec(block, namespace)
    assert METRICS <= set(namespace["metrics"]["toy_task[seed0]"])

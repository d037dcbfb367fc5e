"""The README's agent example works as written."""

import re

from conftest import REPO, load_record


def test_readme_agent_example(pytester, toy, bench):
    readme = (REPO / "README.md").read_text()
    example = re.search(r"```python\n(# my_agent.py.*?)```", readme, re.S).group(1)
    command = re.search(r"->\s+pytest (.*)", example).group(1).split()
    (pytester.path / "my_agent.py").write_text(example)
    result = bench(*command, "toy_task")
    result.assert_outcomes(passed=1)
    record = load_record(pytester.path)
    assert record["agent"] == "tweak" and record["agent_options"] == {"lr": 0.05} and record["steps_used"] == 1

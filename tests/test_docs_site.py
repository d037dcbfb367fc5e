"""The documentation site (`make docs`): it builds with warnings as errors, its reference pages hold every
option and command the code declares, in headless Chromium every internal link of every page reaches a
page that exists and every anchor it names is on that page, every pytest and fmlbench command of its pages
(and of the README) names options, commands and agent options that exist, and its JavaScript client of the agent protocol
drives a run."""

import contextlib
import functools
import html
import http.server
import io
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import REPO, load_record
from test_external_agent import announced, finish, start

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NODE = shutil.which("node")
sys.path.insert(0, str(REPO / "scripts"))
import docs_reference  # noqa: E402  (the site's generator, a script beside the others)

# Runs in the browser, served from the site's own origin: from the home page, fetch every page and file
# that a link, stylesheet, script or image names, as the browser resolves it, and note each anchor asked for
CRAWLER = """<!doctype html><meta charset="utf-8"><title>crawl</title><pre id="result">running</pre>
<script>
(async () => {
  const pages = new Map(), links = [];
  const start = new URL("index.html", location.href).href, queue = [start], seen = new Set(queue);
  while (queue.length) {
    const url = queue.shift();
    let response;
    try { response = await fetch(url); } catch (error) { pages.set(url, {status: String(error), ids: []}); continue; }
    const entry = {status: response.status, ids: []};
    pages.set(url, entry);
    if (!response.ok || !(response.headers.get("content-type") || "").includes("text/html")) continue;
    const page = new DOMParser().parseFromString(await response.text(), "text/html");
    entry.ids = [...page.querySelectorAll("[id]")].map(element => element.id);
    for (const element of page.querySelectorAll("a[href], link[href], script[src], img[src]")) {
      const written = element.getAttribute("href") ?? element.getAttribute("src");
      const target = new URL(written, url);
      if (target.origin !== location.origin) continue;
      const anchor = decodeURIComponent(target.hash.slice(1));
      target.hash = "";
      links.push({from: url, written, page: target.href, anchor});
      if (!seen.has(target.href)) { seen.add(target.href); queue.push(target.href); }
    }
  }
  const report = {pages: {}, links};
  for (const [url, entry] of pages) report.pages[url] = entry;
  document.getElementById("result").textContent = JSON.stringify(report);
})();
</script>
"""


def build_site(folder: Path) -> Path:
    """The site as `make docs` builds it (--strict: a broken link or anchor, or any warning, fails)."""
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                           "--config-file", str(REPO / "mkdocs.yml"), "--site-dir", str(folder)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return folder


def text_of(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def assert_the_reference_holds_every_pytest_option_and_every_fmlbench_command(site: Path) -> None:
    options = text_of(site / "reference" / "pytest-options.html")
    declared = [name for option in docs_reference.plugin_parser().getgroup("fmlbench").options
                for name in option.names()]
    assert len(declared) > 30 and [name for name in declared if name not in options] == []

    commands = text_of(site / "reference" / "cli.html")
    parser = docs_reference.cli_parser()
    names = [name for name, _help, _sub in docs_reference._subcommands(parser)]
    assert {"score", "report", "compare", "data", "judge", "doctor", "agents"} <= set(names)
    for name, _help, sub in docs_reference._subcommands(parser):
        assert f"fmlbench {name}" in commands
        for action in sub._actions:
            assert all(flag in commands for flag in action.option_strings), (name, action.option_strings)

    assert "<!-- fmlbench:" not in "".join(page.read_text() for page in site.rglob("*.html"))


def serve(folder: Path) -> http.server.ThreadingHTTPServer:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def crawl(site: Path) -> dict:
    (site / "_crawl.html").write_text(CRAWLER)
    server = serve(site)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/_crawl.html"
        done = subprocess.run([CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
                               "--no-proxy-server", "--virtual-time-budget=30000", "--dump-dom", url],
                              capture_output=True, text=True, timeout=120)
    finally:
        server.shutdown()
        (site / "_crawl.html").unlink()
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'<pre id="result">(.*?)</pre>', done.stdout, re.S)
    assert found and found.group(1) != "running", done.stdout[-2000:]
    return json.loads(html.unescape(found.group(1)))


def test_the_site_builds_holds_the_whole_reference_and_every_internal_link_reaches_its_page_and_anchor(tmp_path):
    # one test, so that the site is built once whichever xdist worker runs it
    site = build_site(tmp_path / "site")
    assert_the_reference_holds_every_pytest_option_and_every_fmlbench_command(site)
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (make browser installs it)")
    report = crawl(site)
    pages, links = report["pages"], report["links"]
    broken = sorted({(link["from"], link["written"], pages[link["page"]]["status"]) for link in links
                     if pages[link["page"]]["status"] != 200})
    assert broken == []
    missing = sorted({(link["from"], link["written"]) for link in links
                      if link["anchor"] and link["anchor"] not in pages[link["page"]]["ids"]})
    assert missing == []
    # every page the build wrote is reached from the home page by links alone
    origin = next(iter(pages)).split("/index.html")[0]
    reached = {url[len(origin) + 1:] for url in pages}
    written = {str(page.relative_to(site)) for page in site.rglob("*.html")} - {"404.html"}
    assert written - reached == set()
    assert len(written) > 20


def node_client() -> str:
    page = (REPO / "docs" / "how-to" / "external-agent.md").read_text()
    return re.search(r"<!-- external-client-node -->\n```javascript\n(.*?)```", page, re.S).group(1)


@pytest.mark.skipif(NODE is None, reason="node is not installed (make tools installs it as root)")
def test_the_javascript_client_of_the_how_to_drives_a_run(pytester, toy, monkeypatch):
    monkeypatch.setenv("FMLBENCH_ENCODER", "none")  # the exploration metrics play no part here
    (pytester.path / "external_agent.mjs").write_text(node_client())
    proc, lines = start(pytester.path, "--steps=2", "toy_task")
    seen: list[str] = []
    try:
        path = announced(lines, seen)
        client = subprocess.run([NODE, "external_agent.mjs", path], cwd=pytester.path, capture_output=True,
                                text=True, timeout=300)
    finally:
        output = finish(proc, lines, seen)
    assert client.returncode == 0, client.stderr
    assert proc.returncode == 0, output[-3000:]
    assert [line.split()[0] for line in client.stdout.splitlines()] == ["1", "2", "best:"]
    record = load_record(pytester.path)
    assert (record["agent_process"], record["status"], record["steps_used"]) == ("external", "finished", 2)
    assert record["test_metric"] is not None


def shell_commands(pages: list[Path]) -> list[tuple[str, list[str]]]:
    """(page, words) of every pytest and fmlbench command in the pages' bash blocks, as a shell splits it."""
    import shlex

    found = []
    for page in pages:
        for block in re.findall(r"```bash\n(.*?)```", page.read_text(), re.S):
            for line in block.replace("\\\n", " ").splitlines():
                words = shlex.split(line, comments=True)
                while words and ("=" in words[0] and not words[0].startswith("-")):
                    words = words[1:]  # VARIABLE=value before the command
                if words[:2] == [".venv/bin/python", "-m"]:
                    words = words[2:]
                if words and words[0].startswith(".venv/bin/"):
                    words[0] = words[0][len(".venv/bin/"):]
                if words and words[0] in ("pytest", "fmlbench"):
                    found.append((str(page.relative_to(REPO)), words))
    return found


def pytest_option_strings() -> set[str]:
    """Every option string (aliases too) of pytest with the installed plugins (this one, xdist, benchmark)."""
    from _pytest.config import get_config

    config = get_config()
    config.pluginmanager.load_setuptools_entrypoints("pytest11")
    return set(config._parser.optparser._option_string_actions)


def test_every_command_of_the_site_names_options_commands_and_agent_options_that_exist():
    from pytest_fmlbench.agentkit.catalog import catalog

    # the README's commands too: it shows one example of each main use, each also on a page of the site
    commands = shell_commands([REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))])
    assert len(commands) > 40 and any(page == "README.md" for page, _words in commands)
    known = pytest_option_strings()
    agents = {info.name: {option.name for option in info.options} for info in catalog()}
    parser = docs_reference.cli_parser()
    wrong = []
    for page, (program, *args) in commands:
        if program == "fmlbench":
            try:
                with contextlib.redirect_stderr(io.StringIO()):  # argparse's usage message: the page names it
                    parser.parse_args(args)
            except SystemExit:
                wrong.append((page, " ".join(args)))
            continue
        agent = next((arg.split("=", 1)[1] for arg in args if arg.startswith("--agent=")), None)
        for arg in args:
            name = arg.split("=", 1)[0]
            if name.startswith("--") and name not in known:
                wrong.append((page, f"pytest option {name}"))
            if name == "--agent" and agent not in agents and agent != "external" and ":" not in agent:
                wrong.append((page, f"agent {agent}"))
            if name == "--agent-opt" and agent in agents:
                option = arg.split("=", 2)[1]
                if option not in agents[agent]:
                    wrong.append((page, f"{agent}'s option {option}"))
    assert wrong == []

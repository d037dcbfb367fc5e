"""What a hostile agent may send, checked where it enters the harness: each kind of payload is refused (a
protocol violation that ends the agent, or a BadRequest it may go on from) or kept cleaned and capped, and
none of it makes the harness raise its own failure (``dispatcher.fatal``), which would cost the final test.

Unit level: the bytes a socket would carry, into the real dispatcher on a copy of the toy task (see
test_agent_protocol.py); the describe process's answer into the harness's reading of it; edits into the
editor on a scratch folder.
"""

import ast
import json
import math
import socket
import threading
from types import SimpleNamespace

import pytest
from test_agent_protocol import ask, toy_dispatcher

from pytest_fmlbench.agent_host import describe as d
from pytest_fmlbench.agent_host import protocol as p
from pytest_fmlbench.agent_host.transport import LocalTransport, hello
from pytest_fmlbench.agentkit.loading import AgentLoadError
from pytest_fmlbench.editor import MAX_EDITABLE_BYTES, PARSE_IN_PROCESS_CHARS, Editor, SearchReplace, WholeFile
from pytest_fmlbench.session import Session


def line(op: str, **args) -> bytes:
    return json.dumps({"id": 1, "op": op, "args": args}).encode()


def refused(dispatcher, raw: bytes, match: str) -> None:
    """The line is a protocol violation, and the harness itself is unharmed: the run goes to its final test."""
    with pytest.raises(p.ProtocolViolation, match=match):
        dispatcher.handle_line(raw)
    assert dispatcher.fatal is None and dispatcher.session.steps_used == 0


@pytest.fixture
def greeted(tmp_path):
    dispatcher = toy_dispatcher(tmp_path)
    ask(dispatcher, "hello", version=2)
    return dispatcher


@pytest.fixture(scope="module")
def refusing(tmp_path_factory):
    """One run for the requests that are refused: they change nothing in it (``refused`` checks)."""
    dispatcher = toy_dispatcher(tmp_path_factory.mktemp("hostile"))
    ask(dispatcher, "hello", version=2)
    return dispatcher


# -- encoding: every string is Unicode ---------------------------------------------------------------------
@pytest.mark.parametrize("raw", [
    b'{"id":1,"op":"run_step","args":{"action":"a","plan":"\\ud800"}}',   # an escaped lone surrogate
    '{"id":1,"op":"run_step","args":{"action":"a","plan":"\ud800"}}'.encode("utf-8", "surrogatepass"),  # raw
    b'{"id":1,"op":"run_step","args":{"action":"a","extra":{"\\udfff":1}}}',  # in a key
    b'{"id":1,"op":"edit","args":{"edits":[{"kind":"whole","path":"algorithm.py","content":"x = \'\\ud800\'"}]}}',
    b'{"id":1,"op":"run_step","args":{"action":"\xff"}}',  # not UTF-8
], ids=["escaped", "raw", "key", "code", "not-utf8"])
def test_a_string_that_is_not_unicode_is_a_protocol_violation(refusing, raw):
    refused(refusing, raw, "not JSON in UTF-8")


# -- texts hold no control characters but newline and tab ------------------------------------------------
@pytest.mark.parametrize("args", [
    {"action": "improve\x1b[2J\x1b[H"},           # ESC: a terminal escape sequence in a label
    {"action": "improve\rPASSED"},               # a carriage return overwriting the line shown
    {"action": "a", "plan": "\x9b31m red"},      # C1 CSI, an escape sequence of one character
    {"action": "a", "analysis": "x\x00y"},
    {"action": "a", "idea": "bell\x07"},
    {"action": "a", "extra": {"k": ["fine", "\x1b]0;title\x07"]}},
    {"action": "a", "extra": {"\x1b[31mkey": 1}},
    {"action": "a", "edit": {"applied": True, "changed": ["config.json\x1b[A"], "error": ""}},
], ids=["esc-label", "cr-label", "c1", "nul", "bel", "extra-string", "extra-key", "changed"])
def test_control_characters_in_a_text_are_a_protocol_violation(refusing, args):
    refused(refusing, line("run_step", **args), "U\\+00")


@pytest.mark.parametrize("op, args", [
    ("done", {"outcome": "crashed", "reason": "boom\x1b[31m"}),
    ("done", {"outcome": "crashed", "error_type": "=cmd|' /C calc'!A0\x0b"}),
    ("done", {"outcome": "crashed", "traceback": "Traceback\r\n  ...\x1b[0m"}),
    ("done", {"outcome": "finished", "caught": ["fine", "main loop: \x1b[2JBoom"]}),
    ("llm.complete", {"messages": [{"role": "user", "content": "hi"}], "purpose": "draft\x1b"}),
    ("edit", {"edits": [{"kind": "whole", "path": "config.json\r", "content": "{}"}]}),
    ("set_files", {"files": {"algorithm.py\x1b": "x = 1\n"}}),
])
def test_every_kind_of_text_is_checked(refusing, op, args):
    refused(refusing, line(op, **args), "U\\+00")


def test_newlines_and_tabs_are_text_and_code_keeps_what_source_files_hold(greeted):
    reply = ask(greeted, "run_step", action="improve\tnow", plan="line one\nline two", extra={"k": "a\tb\nc"})
    node = reply["result"]["node"]
    assert node["action"] == "improve\tnow" and node["plan"] == "line one\nline two"
    # a carriage return, a form feed, even an ESC inside a string literal: a source file may hold them
    code = "x = 1\r\n\f\ny = '\x1b[0m'\n"
    assert ask(greeted, "edit", 2, edits=[{"kind": "whole", "path": "algorithm.py", "content": code}])["result"][
        "applied"]
    assert greeted.session.files["algorithm.py"] == code
    # NUL is no source file's: a failed edit (a coding tool's working copy may hold one), the agent goes on
    nul = ask(greeted, "edit", 3, edits=[{"kind": "whole", "path": "algorithm.py", "content": "x = 1\x00\n"}])
    assert nul["result"] == {"applied": False, "changed": [], "error": "algorithm.py: holds NUL, which no source file "
                                                                      "holds"}


# -- numbers are finite and fit 64 bits; nesting and sizes are capped -------------------------------------
@pytest.mark.parametrize("number", [b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-1e400",
                                    b"18446744073709551616", b"1" + b"0" * 4000, b"1" + b"0" * 100000])
def test_numbers_that_are_not_finite_or_exceed_64_bits_are_a_protocol_violation(refusing, number):
    raw = b'{"id":1,"op":"run_step","args":{"action":"a","extra":{"v":' + number + b"}}}"
    refused(refusing, raw, "not finite|64 bits|not JSON")


def test_extra_nests_at_most_max_depth_levels(greeted):
    def nested(levels: int) -> dict:
        value: object = 1
        for _ in range(levels):
            value = {"k": value}
        return value

    # ``extra`` itself is the first level
    assert ask(greeted, "run_step", action="a", extra=nested(p.MAX_DEPTH))["ok"]
    for levels in (p.MAX_DEPTH + 1, 300, 100000):
        raw = line("annotate", step=1, extra=nested(levels)) if levels < 900 else (
            b'{"id":1,"op":"annotate","args":{"step":1,"extra":{"k":' + b"[" * levels + b"]" * levels + b"}}}")
        with pytest.raises(p.ProtocolViolation, match="nested more than|not JSON"):
            greeted.handle_line(raw)
    assert greeted.fatal is None and greeted.session.journal.get(1).extra == nested(p.MAX_DEPTH)


def test_a_message_over_its_size_or_its_count_of_values_is_refused_before_it_is_parsed():
    with pytest.raises(p.ProtocolViolation, match="a message has at most"):
        p.decode(b'{"a":"' + b"x" * p.MAX_MESSAGE_BYTES + b'"}')
    # 3 bytes of JSON for 64 bytes of Python object each, were it parsed
    many = b'{"a":[' + b"{}," * p.MAX_JSON_VALUES + b"{}]}"
    with pytest.raises(p.ProtocolViolation, match="JSON values"):
        p.decode(many)
    # strings hold commas and brackets that are no values; escaped quotes do not end them
    text = '\\"[{,' * 300_000
    assert p.decode(json.dumps({"a": text, "b": ["\\", 1]}).encode())["a"] == text


def test_serving_stops_reading_a_line_at_the_cap(refusing):
    from pytest_fmlbench.agent_host.serve import BROKE_PROTOCOL, Ended, serve

    ours, theirs = socket.socketpair()
    replies = []

    def agent():
        reader = theirs.makefile("rb")
        theirs.sendall(line("steps") + b"\n" + line("steps") + b"\n")  # two in one chunk: both answered
        replies.extend(json.loads(reader.readline()) for _ in range(2))
        try:
            theirs.sendall(b'{"id": 3, "op": "steps", "args": {"x": "' + b"x" * (16 << 20))
        except OSError:
            pass  # the harness stopped reading

    sender = threading.Thread(target=agent)
    sender.start()
    # 16 MiB: what the largest message an honest agent sends needs (see protocol.MAX_MESSAGE_BYTES)
    with ours, theirs, pytest.raises(Ended, match="a message of more than 16777216 bytes") as ended:
        serve(ours, refusing, 10.0)
    sender.join(10)
    assert [reply["ok"] for reply in replies] == [True, True]
    assert ended.value.kind == BROKE_PROTOCOL and refusing.fatal is None


# -- what the Python client sends: a model's reply or a tool's output quoted as it came -------------------
def test_the_python_client_sends_texts_the_harness_takes(greeted):
    transport = LocalTransport(greeted)
    session = Session(transport, hello(transport))
    result = session.run_step("improve\r\n", plan="ANSI \x1b[31mred\x1b[0m\r\nprogress\r50%", idea="\ud800",
                              extra={"loss": math.nan, "best": math.inf, "log\x1b": ["\x9b"]})
    node = greeted.session.journal.get(result.step)
    assert node.action == "improve\n" and node.idea == "\ufffd"
    assert node.plan == "ANSI \\x1b[31mred\\x1b[0m\nprogress\n50%"
    assert node.extra == {"loss": None, "best": None, "log\\x1b": ["\\x9b"]}
    # file contents are sent as they are: the harness judges them
    assert not session.edit([WholeFile("algorithm.py", "x = 1\r\n\x00")]).applied
    with pytest.raises(p.ProtocolViolation, match="not JSON in UTF-8"):
        session.edit([WholeFile("algorithm.py", "x = '\ud800'\n")])


# -- what is well-formed but wrong stays a BadRequest -----------------------------------------------------
def test_data_over_a_refused_cap_is_a_bad_request_the_agent_may_go_on_from(refusing):
    too_many = [{"kind": "search_replace", "path": "algorithm.py", "search": "a", "replace": "a"}] * (p.MAX_EDITS + 1)
    assert ask(refusing, "edit", edits=too_many)["error"]["type"] == "BadRequest"
    assert "keys hold at most" in ask(refusing, "run_step", action="a", extra={"k" * 500: 1})["error"]["message"]
    assert ask(refusing, "llm.complete", messages=[{"role": "user", "content": "hi"}],
               max_output_tokens=1 << 40)["error"]["type"] == "BadRequest"
    # the field named in a refusal is spelt out, never echoed raw
    message = ask(refusing, "steps", **{"\x1b[2Jx": 1})["error"]["message"]
    assert "\x1b" not in message and "\\u001b[2Jx" in message
    assert refusing.fatal is None and ask(refusing, "steps")["ok"]


# -- the editor: whatever an edit holds, it fails with one line, never raises ------------------------------
@pytest.fixture
def editor(tmp_path):
    (tmp_path / "algorithm.py").write_text("x = 1\n")
    (tmp_path / "config.json").write_text("{}")
    return Editor(tmp_path, ["algorithm.py", "config.json"])


@pytest.mark.parametrize("edits, reason", [
    ([WholeFile("config.json", "[" * 100000 + "]" * 100000)], "config.json: invalid JSON: maximum recursion"),
    ([WholeFile("config.json", "1" * 5000)], "config.json: invalid JSON: Exceeds the limit"),
    ([WholeFile("algorithm.py", "x = 1\x00\n")], "algorithm.py: holds NUL"),
    ([WholeFile("algorithm.py", "x = '\ud800'\n")], "algorithm.py: holds a lone surrogate"),
    ([WholeFile("algorithm.py", "x = " + "a+" * 100000 + "a\n")], "algorithm.py: does not parse: RecursionError"),
    ([WholeFile("algorithm.py", "#" * (MAX_EDITABLE_BYTES + 1))], "an editable file holds at most"),
    ([WholeFile("algorithm.py", "# é\n" * (MAX_EDITABLE_BYTES // 5 + 1))], "an editable file holds at most"),
    # each block grows the file: the cap stops it at the block that crosses it
    ([WholeFile("algorithm.py", "#x\n")] + [SearchReplace("algorithm.py", "#x\n", "#x\n" + "#" * 5000 + "\n")] * 1000,
     "an editable file holds at most"),
    ([WholeFile("algorithm.py", "#" + "ab" * 500_000 + "\n"), SearchReplace("algorithm.py", "ab", "c")],
     "SEARCH block matches 500000 places"),
], ids=["deep-json", "huge-int-json", "nul", "surrogate", "deep-binop", "size", "size-utf8", "growth",
        "search-everywhere"])
def test_a_pathological_edit_fails_with_one_line(editor, edits, reason):
    result = editor.apply(edits)
    assert not result.applied and reason in result.error and "\n" not in result.error
    assert (editor.workspace / "algorithm.py").read_text() == "x = 1\n"


def test_a_large_python_file_is_parsed_apart_from_the_harness(editor, monkeypatch):
    # Python's parser takes several hundred bytes per byte of a dense file: never in the harness's process
    parse = ast.parse

    def small_only(source, *args, **kwargs):
        assert len(source) <= PARSE_IN_PROCESS_CHARS, "a large file parsed in the harness's process"
        return parse(source, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", small_only)
    body = "x = 1\n" + "# padding\n" * (PARSE_IN_PROCESS_CHARS // 10 + 1)
    assert editor.apply([WholeFile("algorithm.py", body)]).applied
    broken = editor.apply([WholeFile("algorithm.py", body + "def f(:\n")])
    assert not broken.applied and broken.error.startswith("algorithm.py: does not parse: ")
    assert f"(line {body.count(chr(10)) + 1})" in broken.error


# -- the describe process's answer about a user's agent ---------------------------------------------------
LOCATOR = SimpleNamespace(spec="my_agent.py:MyAgent")


def described(**changes):
    reply = {"name": "my-agent", "uses_llm": False, "options": {"steps": 3}, "needs_workdir": False,
             "needs_gateway": False, "protocols": None, **changes}
    return d._description(LOCATOR, reply)


@pytest.mark.parametrize("name", ["random-search", "ai-scientist-v2", "aira-mcts", "MyAgent", "agent_v1.2", "x"])
def test_names_in_use_are_names(name):
    assert described(name=name).name == name


@pytest.mark.parametrize("name", ["[/]", "[bold red]x[/]", "=cmd|' /C calc'!A0", "../x", "a/b", "a\nb", "a\x1b[31m",
                                  "", "-rf", ".hidden", "a b", "é", "x" * 65])
def test_a_hostile_agent_name_is_refused_with_one_line(name):
    with pytest.raises(AgentLoadError, match="is not a name") as refusal:
        described(name=name)
    assert "\n" not in str(refusal.value) and "\x1b" not in str(refusal.value)


def nested_list(levels: int) -> list:
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


@pytest.mark.parametrize("options, reason", [
    ({"deep": nested_list(300)}, "inside another"),
    ({"deep": nested_list(3)}, "inside another"),
    ({"bad key": 1}, "is not a name"),
    ({"[/]": 1}, "is not a name"),
    ({"o": "x" * (d.MAX_OPTION_CHARS + 1)}, "at most"),
    ({"o": "\x1b[2J"}, "U\\+001B"),
    ({"o": list(range(d.MAX_OPTION_ITEMS + 1))}, "items"),
    ({"o": {"=x": 1}}, "is not a name"),
    ({f"o{i}": i for i in range(d.MAX_OPTIONS + 1)}, "options; an agent has at most"),
    ({"o": 1 << 70}, "64 bits"),
])
def test_hostile_options_are_refused_with_one_line(options, reason):
    with pytest.raises(AgentLoadError, match=reason) as refusal:
        described(options=options)
    assert "\n" not in str(refusal.value)


def test_the_built_in_agents_options_are_options():
    from pytest_fmlbench.agentkit import load_builtin
    from pytest_fmlbench.agentkit.loading import builtin_names

    for name in builtin_names():
        cls = load_builtin(name)
        options = cls.Options().model_dump(mode="json")
        assert described(name=cls.name, options=options).options.model_dump(mode="json") == options


def test_the_describe_answer_is_read_as_flags_and_refusals_as_one_line():
    needs = described(needs_workdir=True, needs_gateway=True, protocols=["anthropic"]).needs
    assert (needs.workdir, needs.gateway, needs.protocols) == (True, True, ("anthropic",))
    with pytest.raises(AgentLoadError, match="unusable data"):
        described(uses_llm="yes")
    with pytest.raises(AgentLoadError, match="unusable data"):
        described(protocols=["[/]"])
    with pytest.raises(AgentLoadError) as refusal:
        d._description(LOCATOR, {"error": "agent 'x': \x1b[2Jboom\nsecond line"})
    assert str(refusal.value) == "agent 'x': \\x1b[2Jboom"


def test_an_in_process_agent_class_meets_the_described_agents_rules(pytester, toy, bench, write_agent):
    """--agent-in-process loads a user's class in the harness: its name and options are checked as a described
    agent's are, one line each, before any run."""
    spec = write_agent("""
        from pytest_fmlbench import Agent, AgentOptions

        class Opts(AgentOptions):
            prompt: dict = {"deep": {"er": 1}}

        class MyAgent(Agent):
            name = "[bold]x[/]"
            Options = Opts

            def run(self, session):
                session.run_step("never")
    """)
    result = bench(f"--agent={spec}", "--agent-in-process", "toy_task")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: agent 'my_agent.py:MyAgent': its name '[[]bold]x[[]/]' is not a name*"])
    (pytester.path / "my_agent.py").write_text((pytester.path / "my_agent.py").read_text().replace(
        'name = "[bold]x[/]"', 'name = "plain"'))
    result = bench(f"--agent={spec}", "--agent-in-process", "toy_task")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: agent 'my_agent.py:MyAgent': option 'prompt'*"])
    assert not (pytester.path / "reports").exists()

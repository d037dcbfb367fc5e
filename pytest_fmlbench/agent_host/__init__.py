"""The agent under test is untrusted: its ``run(session)`` executes in a process of its own, in a
bubblewrap sandbox, and reaches the run only through a narrow, versioned protocol.

Modules: ``protocol`` (the messages, version and size caps), ``server`` (the harness's dispatcher of
requests onto its ``HarnessSession``), ``serve`` (the socket loop with the agent's time budget),
``transport`` (the agent's end: ``pytest_fmlbench.session.Session`` speaks through it), ``launcher``
(the agent's process: sandbox, limits, capped output), ``child`` (that process's entry point),
``locate`` and ``describe`` (finding and describing a user's agent without importing it here),
``external`` (``--agent=external``: any program on a UNIX socket), ``host`` (which of these a run uses),
``needs`` (what an agent class declares it needs beyond the protocol) and ``lent`` (what the harness lends
it: ``working_copy``, ``gateway_binding``).
"""
